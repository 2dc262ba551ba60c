"""Reading MIDI into flat note arrays (no torch).

Two readers give the same `Notes`:
- ``symusic`` (C++, ~300x faster than pretty_midi): the data-prep path.
- ``pretty_midi``: the reference reader, and what decoding writes with.

Both apply the sustain pedal (CC64) per track/channel before notes are merged, then drop all
control changes; drum tracks are dropped by default. Seconds are computed from integer ticks and the
tempo map in float64 for symusic, so both readers agree to well below the 10 ms token grid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

SUSTAIN_CC = 64


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
    order = np.argsort(cc_times, kind="stable")
    times, down = cc_times[order], cc_values[order] >= 64
    # Keep only state changes: the first event of each run of equal pedal states.
    change = np.concatenate([[True], down[1:] != down[:-1]])
    times, down = times[change], down[change]
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


def read_notes_symusic(path: str | os.PathLike, drop_drums: bool = True, sustain: bool = True) -> Notes:
    """Read a MIDI file with symusic. Raises MidiReadError naming the file on any failure."""
    import symusic

    try:
        score = symusic.Score(str(path))
    except Exception as err:  # symusic raises plain RuntimeError/ValueError for broken files
        raise MidiReadError(path, f"unreadable MIDI ({type(err).__name__}: {err})") from None
    if score.ticks_per_quarter <= 0:
        raise MidiReadError(path, "invalid ticks-per-quarter in header")
    tempos = score.tempos.numpy()
    to_sec = lambda t: _ticks_to_seconds(  # noqa: E731
        np.asarray(t, dtype=np.int64), tempos["time"], tempos["mspq"], score.ticks_per_quarter
    )
    parts, n_drum_notes = [], 0
    for track in score.tracks:
        arr = track.notes.numpy()
        if not (arr["duration"] > 0).any():
            continue
        if drop_drums and track.is_drum:
            n_drum_notes += len(arr["pitch"])
            continue
        # A note-off on the note-on's own tick sounds nothing; pretty_midi drops these too.
        sounding = arr["duration"] > 0
        start_tick = arr["time"][sounding].astype(np.int64)
        notes = Notes(
            to_sec(start_tick),
            to_sec(start_tick + arr["duration"][sounding].astype(np.int64)),
            arr["pitch"][sounding].astype(np.int64),
            arr["velocity"][sounding].astype(np.int64),
        )
        if sustain:
            cc = track.controls.numpy()
            is_pedal = cc["number"] == SUSTAIN_CC
            notes = apply_sustain(notes, to_sec(cc["time"][is_pedal]), cc["value"][is_pedal].astype(np.int64))
        parts.append(notes)
    return _check_notes(path, Notes.concat(parts), n_drum_notes)


def notes_from_pretty_midi(pm, drop_drums: bool = True, sustain: bool = True, path=None) -> Notes:
    """Extract notes from a ``pretty_midi.PrettyMIDI`` with the same rules as the symusic reader."""
    parts, n_drum_notes = [], 0
    for inst in pm.instruments:
        if not inst.notes:
            continue
        if drop_drums and inst.is_drum:
            n_drum_notes += len(inst.notes)
            continue
        raw = np.array([(n.start, n.end, n.pitch, n.velocity) for n in inst.notes], dtype=np.float64)
        notes = Notes(raw[:, 0], raw[:, 1], raw[:, 2].astype(np.int64), raw[:, 3].astype(np.int64))
        if sustain:
            cc = [(c.time, c.value) for c in inst.control_changes if c.number == SUSTAIN_CC]
            if cc:
                cc_arr = np.array(cc, dtype=np.float64)
                notes = apply_sustain(notes, cc_arr[:, 0], cc_arr[:, 1].astype(np.int64))
        parts.append(notes)
    return _check_notes(path, Notes.concat(parts), n_drum_notes)


def read_notes_pretty_midi(path: str | os.PathLike, drop_drums: bool = True, sustain: bool = True) -> Notes:
    """Read a MIDI file with pretty_midi (the reference reader)."""
    import warnings

    import pretty_midi

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pretty_midi warns about odd but legal files
            pm = pretty_midi.PrettyMIDI(str(path))
    except Exception as err:
        raise MidiReadError(path, f"unreadable MIDI ({type(err).__name__}: {err})") from None
    return notes_from_pretty_midi(pm, drop_drums, sustain, path=path)


def _check_notes(path, notes: Notes, n_drum_notes: int) -> Notes:
    if len(notes) == 0:
        raise MidiReadError(path, "only drum notes" if n_drum_notes else "no notes")
    if not (np.isfinite(notes.start).all() and np.isfinite(notes.end).all()):
        raise MidiReadError(path, "non-finite note times")
    return notes


READERS = {"symusic": read_notes_symusic, "pretty_midi": read_notes_pretty_midi}


def read_notes(path, reader: str = "symusic", drop_drums: bool = True, sustain: bool = True) -> Notes:
    """Read ``path`` with the named reader ("symusic" or "pretty_midi")."""
    if reader not in READERS:
        raise ValueError(f"unknown MIDI reader {reader!r}; choose one of {sorted(READERS)}")
    if not os.path.isfile(path):
        raise MidiReadError(path, "no such file")
    if os.path.getsize(path) == 0:
        raise MidiReadError(path, "empty file (0 bytes)")
    return READERS[reader](path, drop_drums=drop_drums, sustain=sustain)
