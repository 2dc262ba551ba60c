"""Reading MIDI into flat note arrays (no torch).

Two readers give the same `Notes`:
- ``symusic`` (C++, much faster): the data-prep path.
- ``mido`` (pure Python): the reference, and the second try for files symusic rejects. It parses with
  mido, the parser pretty_midi is built on, and pairs the raw events itself (`pair_note_events`).
  ``pretty_midi`` is its former name, still accepted. A ``pretty_midi.PrettyMIDI`` object (what decoding
  builds) is read by `notes_from_pretty_midi` with its notes as they are.

**Pairing rule: first in, first out.** Per track, channel and pitch, in file order, a note-off (or a
note-on with velocity 0) ends the earliest-struck note of that key that is still sounding. A note-off with
nothing sounding is ignored; a note still sounding at the end of its track is dropped; a note whose
note-off falls on its own note-on's tick sounds nothing and is dropped. So when a key is struck again
before it is released (common in automatic transcriptions), the first release ends the first note and the
second release the second. Why this rule: MIDI 1.0 asks a sender for one note-off per note-on, so pairing
them one to one uses every note-off the file has; it is what symusic does in C++, so the fast path keeps
its speed. pretty_midi, and the readers built on it, end *every* sounding note of the key at the first
note-off and ignore the later ones, which ends a re-struck note at the release of the earlier one
(seconds early on some transcriptions). The tokenizer then ends any note where its pitch is struck again.
Before pairing, both readers leave out the grace notes music21 writes as a note-off before their own note-on
on one tick (zero-length notes that would otherwise take the releases of the later notes of their key), and
say so on stderr: `musictx.io.note_pairing`, `musictx.io.grace_notes`.

**Tempo.** The set_tempo events of all tracks form one tempo map (120 bpm until the first); of several
on one tick the last wins (the later track). Players and symusic honour tempo events in any track;
pretty_midi reads only the first track's. Seconds come from integer ticks through the map in float64
(symusic's own second-based times are float32).

A set_tempo of 0 microseconds a beat (no clock can play it; it put every later note at one instant) is
left out, the tempo before it holding on, and said once per file on stderr (`musictx.io.zero_tempos`).

**Groups.** Notes and controls are grouped as symusic splits tracks: by track, channel and the program in
force (a note belongs to the program of its note-on). The sustain pedal (CC64 >= 64) lengthens each
group's notes before the groups are merged, then control changes are dropped; channel 10 (drums) is
dropped by default. Notes come back sorted by (start, pitch, velocity, end), so their order, which decides
the velocity the tokenizer keeps of two identical notes, does not depend on the reader.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from musictx.io.grace_notes import read_symusic, tell_grace_notes
from musictx.io.note_pairing import grace_events, pair_note_events
from musictx.io.read_errors import unreadable
from musictx.io.zero_tempos import playable_tempos

SUSTAIN_CC = 64
PEDAL_EVENTS = "events"  # a reader's ``sustain`` mode: notes keep their key lengths, the pedal comes beside them
DRUM_CHANNEL = 9  # channel 10 in MIDI's 1-based numbering


class MidiReadError(Exception):
    """A MIDI file could not be used; ``str(err)`` names the file and the reason."""

    def __init__(self, path: str | os.PathLike | None, reason: str):
        self.path = None if path is None else str(path)
        self.reason = reason
        where = self.path if self.path is not None else "<in-memory MIDI>"
        super().__init__(f"{where}: {reason}")


@dataclass
class Notes:
    """Notes as parallel arrays; times in seconds."""

    start: np.ndarray  # (N,) float64
    end: np.ndarray  # (N,) float64
    pitch: np.ndarray  # (N,) int64
    velocity: np.ndarray  # (N,) int64
    # (K, 2) float64 rows (seconds, 1 down / 0 up): the sustain pedal's changes, first a press, where it was
    # read as events (``sustain="events"``) rather than folded into the note ends; None otherwise
    pedal: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.pitch)

    @staticmethod
    def empty() -> Notes:
        z = np.zeros(0)
        return Notes(z, z.copy(), z.astype(np.int64), z.astype(np.int64))

    @staticmethod
    def concat(parts: list[Notes]) -> Notes:
        if not parts:
            return Notes.empty()
        return Notes(*(np.concatenate([getattr(p, f) for p in parts]) for f in Notes.FIELDS))

    def duration(self) -> float:
        return float(self.end.max()) if len(self) else 0.0


Notes.FIELDS = ("start", "end", "pitch", "velocity")


def apply_sustain(notes: Notes, cc_times: np.ndarray, cc_values: np.ndarray) -> Notes:
    """Lengthen notes held by the sustain pedal (CC64 >= 64 is down).

    A note whose key is released while the pedal is down keeps sounding until the pedal is released
    (or the end of the piece if it never is). Cutting at the next strike of the same pitch is left to
    the tokenizer's normalisation, which applies it to every note.
    """
    if len(notes) == 0 or len(cc_times) == 0:
        return notes
    times, down = pedal_changes(cc_times, cc_values >= 64)
    downs = times[down]
    if len(downs) == 0:
        return notes
    ups_after = np.full(len(downs), np.inf)
    # For each press, the first release after it.
    up_times = times[~down]
    idx = np.searchsorted(up_times, downs, side="left")
    has_up = idx < len(up_times)
    ups_after[has_up] = up_times[idx[has_up]]
    piece_end = max(float(notes.end.max()), float(times.max()))
    ups_after[~has_up] = piece_end

    # The press governing each note end: the last press at or before it.
    k = np.searchsorted(downs, notes.end, side="right") - 1
    valid = k >= 0
    release = np.where(valid, ups_after[np.clip(k, 0, None)], -np.inf)
    held = valid & (notes.end < release)
    end = np.where(held, np.maximum(notes.end, release), notes.end)
    return Notes(notes.start, end, notes.pitch, notes.velocity)


def pedal_changes(times: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, down) of the pedal's changes of state, in time order, from a press on: the first event of each
    run of equal states is kept, and releases before the first press (the pedal starts up) are dropped."""
    order = np.argsort(times, kind="stable")
    times, down = np.asarray(times, np.float64)[order], np.asarray(down, bool)[order]
    change = np.concatenate([[True], down[1:] != down[:-1]]) if len(down) else np.zeros(0, bool)
    times, down = times[change], down[change]
    first = int(np.argmax(down)) if down.any() else len(down)
    return times[first:], down[first:]


def _pedal_rows(times: list[np.ndarray], values: list[np.ndarray]) -> np.ndarray:
    """(K, 2) rows of `Notes.pedal` from the CC64 events of the groups kept (of several pedalled groups, one
    pedal: the changes of all, merged in time)."""
    if not times:
        return np.zeros((0, 2))
    at, down = pedal_changes(np.concatenate(times), np.concatenate(values) >= 64)
    return np.stack([at, down.astype(np.float64)], axis=1)


def _ticks_to_seconds(ticks: np.ndarray, tempo_ticks: np.ndarray, tempo_mspq: np.ndarray, tpq: int) -> np.ndarray:
    """Map integer ticks to seconds through a piecewise-constant tempo map (float64)."""
    if len(tempo_ticks) == 0 or tempo_ticks[0] != 0:
        # MIDI's default tempo (120 bpm) holds until the first tempo event.
        tempo_ticks = np.concatenate([[0], tempo_ticks])
        tempo_mspq = np.concatenate([[500000], tempo_mspq])
    order = np.argsort(tempo_ticks, kind="stable")
    tempo_ticks, tempo_mspq = tempo_ticks[order].astype(np.int64), tempo_mspq[order].astype(np.float64)
    # Several tempo events on one tick: the last one wins (as pretty_midi does).
    last = np.concatenate([tempo_ticks[1:] != tempo_ticks[:-1], [True]])
    tempo_ticks, tempo_mspq = tempo_ticks[last], tempo_mspq[last]
    sec_per_tick = tempo_mspq / 1e6 / tpq
    seg_start = np.concatenate([[0.0], np.cumsum(np.diff(tempo_ticks) * sec_per_tick[:-1])])
    seg = np.searchsorted(tempo_ticks, ticks, side="right") - 1
    return seg_start[seg] + (ticks - tempo_ticks[seg]) * sec_per_tick[seg]


class _Part(NamedTuple):
    """The paired notes (in ticks) and the sustain-pedal events of one group, as read from the file."""

    is_drum: bool
    start: np.ndarray  # (n,) int64 ticks
    end: np.ndarray  # (n,) int64 ticks
    pitch: np.ndarray  # (n,)
    velocity: np.ndarray  # (n,)
    pedal_tick: np.ndarray  # (m,) int64 ticks
    pedal_value: np.ndarray  # (m,)


def _notes_from_parts(path, parts: list[_Part], to_sec: Callable[[np.ndarray], np.ndarray],
                      drop_drums: bool, sustain: bool | str) -> Notes:
    """Seconds, sustain per group (or the pedal kept as events: ``sustain="events"``), drums dropped, groups
    merged in a reader-independent order."""
    out, keys, n_drum_notes, pedal_times, pedal_values = [], [], 0, [], []
    for part in parts:
        sounding = part.end > part.start  # a note-off on its note-on's own tick sounds nothing
        if not sounding.any():
            continue
        if drop_drums and part.is_drum:
            n_drum_notes += int(sounding.sum())
            continue
        start, pitch, velocity = part.start[sounding], part.pitch[sounding], part.velocity[sounding]
        notes = Notes(to_sec(start), to_sec(part.end[sounding]), pitch.astype(np.int64), velocity.astype(np.int64))
        if sustain == PEDAL_EVENTS:
            pedal_times.append(to_sec(part.pedal_tick))
            pedal_values.append(part.pedal_value.astype(np.int64))
        elif sustain:
            notes = apply_sustain(notes, to_sec(part.pedal_tick), part.pedal_value.astype(np.int64))
        out.append(notes)
        keys.append((start << 14) | (notes.pitch << 7) | notes.velocity)
    notes = _check_notes(path, Notes.concat(out), n_drum_notes)
    # Sorted by (start, pitch, velocity, end): two stable argsorts cost far less than np.lexsort here.
    order = np.argsort(notes.end, kind="stable")
    order = order[np.argsort(np.concatenate(keys)[order], kind="stable")]
    pedal = _pedal_rows(pedal_times, pedal_values) if sustain == PEDAL_EVENTS else None
    return Notes(*(getattr(notes, f)[order] for f in Notes.FIELDS), pedal=pedal)


def _tempo_map(tempo_ticks, tempo_mspq, tpq: int) -> Callable[[np.ndarray], np.ndarray]:
    tempo_ticks, tempo_mspq = np.asarray(tempo_ticks, np.int64), np.asarray(tempo_mspq, np.int64)
    return lambda ticks: _ticks_to_seconds(np.asarray(ticks, np.int64), tempo_ticks, tempo_mspq, tpq)


def _unreadable(path, err: Exception) -> MidiReadError:
    return MidiReadError(path, unreadable(err))


def read_notes_symusic(path: str | os.PathLike, drop_drums: bool = True, sustain: bool | str = True) -> Notes:
    """Read a MIDI file with symusic, which pairs notes first in, first out itself.
    Raises MidiReadError naming the file on any failure."""
    try:
        score = read_symusic(path)  # its grace notes written off before on left out, as the mido reader does
    except Exception as err:  # symusic raises plain RuntimeError/ValueError for broken files
        raise _unreadable(path, err) from None
    if score.ticks_per_quarter <= 0:
        raise MidiReadError(path, "invalid ticks-per-quarter in header")
    parts = []
    for track in score.tracks:  # one per (track, channel, program)
        arr, cc = track.notes.numpy(), track.controls.numpy()
        start = arr["time"].astype(np.int64)
        pedal = cc["number"] == SUSTAIN_CC
        parts.append(_Part(track.is_drum, start, start + arr["duration"].astype(np.int64), arr["pitch"],
                           arr["velocity"], cc["time"][pedal].astype(np.int64), cc["value"][pedal]))
    tempos = score.tempos.numpy()
    to_sec = _tempo_map(*playable_tempos(path, tempos["time"], tempos["mspq"]), score.ticks_per_quarter)
    return _notes_from_parts(path, parts, to_sec, drop_drums, sustain)


def _mido_events(path) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Parse with mido: ticks per quarter; note events (tick, track*16+channel, pitch, velocity, is_on,
    program) in file order; pedal events (tick, group, value); tempo events (tick, microseconds/quarter)."""
    import mido

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            midi = mido.MidiFile(str(path))
    except Exception as err:  # mido raises OSError, EOFError, ValueError, KeyError... on broken files
        raise _unreadable(path, err) from None
    notes, pedals, tempos = [], [], []
    for index, track in enumerate(midi.tracks):
        tick, program = 0, [0] * 16
        for msg in track:
            tick += msg.time
            kind = msg.type
            if kind == "note_on" or kind == "note_off":
                on = kind == "note_on" and msg.velocity > 0
                notes.append((tick, index * 16 + msg.channel, msg.note, msg.velocity, on, program[msg.channel]))
            elif kind == "control_change" and msg.control == SUSTAIN_CC:
                pedals.append((tick, (index * 16 + msg.channel) * 128 + program[msg.channel], msg.value))
            elif kind == "program_change":
                program[msg.channel] = msg.program
            elif kind == "set_tempo":
                tempos.append((tick, msg.tempo))
    as_array = lambda rows, width: np.array(rows, dtype=np.int64).reshape(-1, width)  # noqa: E731
    return midi.ticks_per_beat, as_array(notes, 6), as_array(pedals, 3), as_array(tempos, 2)


def read_notes_mido(path: str | os.PathLike, drop_drums: bool = True, sustain: bool | str = True) -> Notes:
    """Read a MIDI file with mido and pair its raw note events with `pair_note_events` (the reference)."""
    tpq, events, pedals, tempos = _mido_events(path)
    if tpq <= 0:
        raise MidiReadError(path, "invalid ticks-per-quarter in header")
    grace = grace_events(events[:, 0], events[:, 1] * 128 + events[:, 2], events[:, 4])
    tell_grace_notes(path, int(grace.sum()) // 2)
    tick, channel, pitch, velocity, is_on, program = events[~grace].T
    on_i, off_i = pair_note_events(channel * 128 + pitch, is_on.astype(bool))
    group = channel[on_i] * 128 + program[on_i]
    parts = []
    for g in np.unique(group):
        ons, offs, pedal = on_i[group == g], off_i[group == g], pedals[:, 1] == g
        parts.append(_Part((g // 128) % 16 == DRUM_CHANNEL, tick[ons], tick[offs], pitch[ons], velocity[ons],
                           pedals[pedal, 0], pedals[pedal, 2]))
    to_sec = _tempo_map(*playable_tempos(path, tempos[:, 0], tempos[:, 1]), tpq)
    return _notes_from_parts(path, parts, to_sec, drop_drums, sustain)


def sustain_events(inst) -> tuple[np.ndarray, np.ndarray]:
    """((K,) times in seconds, (K,) values) of one ``pretty_midi.Instrument``'s sustain pedal (CC64) events."""
    cc = np.array([(c.time, c.value) for c in inst.control_changes if c.number == SUSTAIN_CC],
                  dtype=np.float64).reshape(-1, 2)
    return cc[:, 0], cc[:, 1].astype(np.int64)


def notes_from_pretty_midi(pm, drop_drums: bool = True, sustain: bool | str = True, path=None) -> Notes:
    """Extract the notes of a ``pretty_midi.PrettyMIDI`` object (already paired, in seconds), with the
    file readers' sustain and drum rules."""
    parts, n_drum_notes, pedal_times, pedal_values = [], 0, [], []
    for inst in pm.instruments:
        if not inst.notes:
            continue
        if drop_drums and inst.is_drum:
            n_drum_notes += len(inst.notes)
            continue
        raw = np.array([(n.start, n.end, n.pitch, n.velocity) for n in inst.notes], dtype=np.float64)
        notes = Notes(raw[:, 0], raw[:, 1], raw[:, 2].astype(np.int64), raw[:, 3].astype(np.int64))
        times, values = sustain_events(inst)
        if sustain == PEDAL_EVENTS:
            pedal_times.append(times)
            pedal_values.append(values)
        elif sustain and len(times):
            notes = apply_sustain(notes, times, values)
        parts.append(notes)
    notes = _check_notes(path, Notes.concat(parts), n_drum_notes)
    if sustain == PEDAL_EVENTS:
        notes.pedal = _pedal_rows(pedal_times, pedal_values)
    return notes


def _check_notes(path, notes: Notes, n_drum_notes: int) -> Notes:
    if len(notes) == 0:
        raise MidiReadError(path, "only drum notes" if n_drum_notes else "no notes")
    if not (np.isfinite(notes.start).all() and np.isfinite(notes.end).all()):
        raise MidiReadError(path, "non-finite note times")
    return notes


# "pretty_midi" is the reference reader's former name, kept so that existing configs still work.
READERS = {"symusic": read_notes_symusic, "mido": read_notes_mido, "pretty_midi": read_notes_mido}


def read_notes(path, reader: str = "symusic", drop_drums: bool = True, sustain: bool | str = True) -> Notes:
    """Read ``path`` with the named reader (a key of `READERS`)."""
    if reader not in READERS:
        raise ValueError(f"unknown MIDI reader {reader!r}; choose one of {sorted(READERS)}")
    problem = file_problem(path)
    if problem:
        raise MidiReadError(path, problem)
    return READERS[reader](path, drop_drums=drop_drums, sustain=sustain)


def file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be a MIDI file to read (missing, a folder, a pipe or device, empty), or None.
    Only stat is used: opening a named pipe to look inside would wait for a writer forever."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if stat.S_ISDIR(info.st_mode):
        return "is a folder, not a MIDI file"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file ({_special_kind(info.st_mode)}), so not a MIDI file"
    return "empty file (0 bytes)" if info.st_size == 0 else None


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket or other special file"
