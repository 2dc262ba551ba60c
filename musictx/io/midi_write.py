"""Writing `Notes` as MIDI, beside `musictx.io.midi_io` which reads them (no torch).

Two writers: `write_midi` (symusic, C++, from arrays) writes a file on a seed's tempo map and bars and is
what generation uses; `notes_to_midi` builds a ``pretty_midi.PrettyMIDI`` object, for callers that want
one to edit or render (`EventTokenizer.decode` returns one).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from musictx.io.midi_io import Notes
from musictx.io.midi_timing import MidiTiming
from musictx.safe_output import atomic_path


def notes_to_midi(notes: Notes, program: int = 0, name: str = "musictx"):
    """A ``pretty_midi.PrettyMIDI`` with one track (``program``, ``name``) holding ``notes``."""
    import pretty_midi  # a slow import that only this writer needs

    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=program, name=name)
    for s, e, p, v in zip(notes.start.tolist(), notes.end.tolist(), notes.pitch.tolist(), notes.velocity.tolist(),
                          strict=True):
        inst.notes.append(pretty_midi.Note(velocity=int(v), pitch=int(p), start=s, end=e))
    pm.instruments.append(inst)
    return pm


def write_midi(notes: Notes, path: str | os.PathLike, program: int = 0, timing: MidiTiming | None = None,
               name: str = "musictx piano") -> Path:
    """Write ``notes`` as a one-track MIDI file (`notes_score`), atomically (`write_score`)."""
    return write_score(notes_score(notes, program, timing, name), path)


def notes_score(notes: Notes, program: int = 0, timing: MidiTiming | None = None, name: str = "musictx piano"):
    """``notes`` as a one-track symusic Score named ``name``, with the tempo map and time signatures of
    ``timing`` (None: 120 bpm, 4/4, where the tokenizer's 10 ms grid is exact); note seconds become ticks
    through that map. Built from arrays: a million notes take seconds, where `notes_to_midi` (pretty_midi, one
    Python object per note) takes minutes."""
    import symusic

    from musictx.io.score_io import note_list

    timing = (timing or MidiTiming()).fine()
    score = symusic.Score(timing.tpq)
    for t in timing.tempos:
        score.tempos.append(symusic.Tempo(t.tick, mspq=t.mspq))
    for m in timing.meters:
        score.time_signatures.append(symusic.TimeSignature(m.tick, m.numerator, m.denominator))
    track = symusic.Track(name=name, program=program)
    on = timing.ticks(notes.start).astype(np.int32)
    off = np.maximum(timing.ticks(notes.end).astype(np.int32), on + 1)  # a note lasts at least one tick
    track.notes = note_list(on, off - on, notes.pitch, np.clip(notes.velocity, 1, 127))
    score.tracks.append(track)
    return score


def write_score(score, path: str | os.PathLike) -> Path:
    """A symusic Score written to ``path`` atomically (a temporary name, then renamed): whole or absent."""
    with atomic_path(path) as tmp:
        score.dump_midi(str(tmp))
    return Path(path)
