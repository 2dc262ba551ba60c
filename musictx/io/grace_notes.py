"""Grace notes written as a note-off before their own note-on on one tick (music21's way), left out of a MIDI
file before symusic pairs its notes (no torch). The rule is `musictx.io.note_pairing.grace_events`; the mido
reader applies it to the events it parses (`musictx.io.midi_io`), and symusic, which pairs them in C++, gets
the file's bytes without those events (`read_symusic`: the REMI path's scores and the Performance path's
notes). Each file that has any is said once on stderr (`tell_grace_notes`): notes are left out, not silently.

Ordinary files cost a walk over their note events (`note_events`, about 0.7 us an event: some 2 ms for a POP909
song or a piano performance, a tenth of mido's parse, though ten times symusic's own read) and are then read
from their own path exactly as before; only a file with grace notes so written is parsed and rewritten with mido.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from musictx.io.note_pairing import grace_events
from musictx.io.zero_tempos import tell_once

if TYPE_CHECKING:
    import mido
    from symusic import Score


def note_events(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tick, key, is_on) of the note events in a standard MIDI file's bytes, in file order within each track;
    key = (track * 16 + channel) * 128 + pitch, tracks counted as mido counts them (MTrk chunks). Raises
    IndexError on a file cut short inside an event."""
    rows: list[tuple[int, int, int, bool]] = []
    pos, track = 8 + int.from_bytes(data[4:8], "big"), 0  # past the header chunk
    while pos + 8 <= len(data):
        size = int.from_bytes(data[pos + 4:pos + 8], "big")
        if data[pos:pos + 4] == b"MTrk":
            _track_notes(data, pos + 8, min(pos + 8 + size, len(data)), track * 16, rows)
            track += 1
        pos += 8 + size
    tick, channel, pitch, on = np.array(rows, dtype=np.int64).reshape(-1, 4).T
    return tick, channel * 128 + pitch, on.astype(bool)


def _track_notes(data: bytes, i: int, end: int, base: int, rows: list) -> None:
    """Append one track's note events to ``rows``: (tick, base + channel, pitch, is_on). Lean on purpose: every
    file symusic reads is walked once."""
    tick = status = 0
    while i < end:
        byte = data[i]
        i += 1
        delta = byte & 0x7F
        while byte & 0x80:  # a variable-length delta time
            byte = data[i]
            i += 1
            delta = (delta << 7) | (byte & 0x7F)
        tick += delta
        if data[i] & 0x80:
            if data[i] >= 0xF0:  # meta (FF type length data) or sysex (F0/F7 length data)
                i += 2 if data[i] == 0xFF else 1
                byte = data[i]
                i += 1
                size = byte & 0x7F
                while byte & 0x80:
                    byte = data[i]
                    i += 1
                    size = (size << 7) | (byte & 0x7F)
                i += size
                continue
            status = data[i]  # else running status: the last channel message's
            i += 1
        kind = status & 0xF0
        if kind == 0x90 or kind == 0x80:
            rows.append((tick, base + (status & 0x0F), data[i], kind == 0x90 and data[i + 1] > 0))
        i += 1 if kind == 0xC0 or kind == 0xD0 else 2


def grace_note_count(data: bytes) -> int:
    """How many grace notes written off before on the file's bytes hold (0 for a file the walk cannot read)."""
    try:
        return int(grace_events(*note_events(data)).sum()) // 2
    except (IndexError, ValueError):  # cut short or odd: symusic read it, so it is read as before
        return 0


def drop_grace_messages(midi: mido.MidiFile) -> int:
    """Leave the grace notes written off before on out of ``midi`` (in place: each dropped message's delta time
    goes to the next message of its track); returns how many notes that was."""
    events, where = _note_messages(midi)
    dropped = grace_events(events[:, 0], events[:, 1], events[:, 2])
    gone = {where[i] for i in np.flatnonzero(dropped)}
    for index in {t for t, _ in gone}:
        kept, carry = [], 0
        for j, msg in enumerate(midi.tracks[index]):
            if (index, j) in gone:
                carry += msg.time
            else:
                kept.append(msg.copy(time=msg.time + carry))
                carry = 0
        midi.tracks[index][:] = kept
    return int(dropped.sum()) // 2


def _note_messages(midi: mido.MidiFile) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(N, 3) rows (tick, key, is_on) of ``midi``'s note messages as `note_events` gives them, and where each is
    (track index, message index)."""
    rows, where = [], []
    for index, track in enumerate(midi.tracks):
        tick = 0
        for j, msg in enumerate(track):
            tick += msg.time
            if msg.type == "note_on" or msg.type == "note_off":
                key = (index * 16 + msg.channel) * 128 + msg.note
                rows.append((tick, key, msg.type == "note_on" and msg.velocity > 0))
                where.append((index, j))
    return np.array(rows, dtype=np.int64).reshape(-1, 3), where


def tell_grace_notes(path: str | os.PathLike | None, count: int) -> None:
    """One line on stderr naming ``path`` when ``count`` grace notes were left out of it (once per file)."""
    if count:
        tell_once(path, "grace notes", f"{count} grace note(s) written as a note-off before its note-on on one tick "
                  "(music21's way) left out: they sound nothing")


def read_symusic(path: str | os.PathLike) -> Score:
    """symusic's score of a MIDI file, its grace notes written off before on left out and said
    (`tell_grace_notes`); symusic's own errors pass on to the caller."""
    from symusic import Score

    score = Score(str(path))
    try:
        data = Path(path).read_bytes()
        if not grace_note_count(data):
            return score
        fixed, count = _without_grace_notes(data)
    except Exception:  # noqa: BLE001 - mido refuses what symusic read (it is stricter): read as before
        return score
    if not count:
        return score
    tell_grace_notes(path, count)
    return Score.from_midi(fixed)


def _without_grace_notes(data: bytes) -> tuple[bytes, int]:
    """The file's bytes without its grace notes written off before on (parsed and written with mido), and how
    many those were."""
    import mido

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        midi = mido.MidiFile(file=io.BytesIO(data))
    count = drop_grace_messages(midi)
    out = io.BytesIO()
    midi.save(file=out)
    return out.getvalue(), count
