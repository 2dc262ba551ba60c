"""symusic scores to and from the rest of the house (pretty_midi for writing and audio). No torch."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

import numpy as np
from symusic import Note, Score

from musictx.io.grace_notes import read_symusic
from musictx.io.zero_tempos import tell_zero_tempos

if TYPE_CHECKING:
    import pretty_midi


def note_list(time, duration, pitch, velocity):
    """A symusic note list from four columns of ticks and numbers (any integer arrays or sequences, one entry a
    note; empty columns: no notes)."""
    return Note.from_numpy(*(np.asarray(column, dtype=np.int32) for column in (time, duration, pitch, velocity)))


def without_zero_tempos(score: Score) -> Score:
    """``score`` (changed in place) without its set_tempo events of 0 or less microseconds a beat, which no
    clock can play (pretty_midi divides by them); the tempo before each holds on, as
    `musictx.io.midi_timing.MidiTiming` reads them."""
    if any(t.mspq <= 0 for t in score.tempos):
        score.tempos = [t for t in score.tempos if t.mspq > 0]
    return score


def read_score(path: str | os.PathLike) -> Score:
    """The symusic score of a MIDI file, its unplayable tempos (`without_zero_tempos`) and its grace notes written
    as a note-off before their note-on (`musictx.io.grace_notes`) left out and said on stderr; symusic's own
    errors pass on to the caller."""
    score = read_symusic(path)
    tell_zero_tempos(path, sum(t.mspq <= 0 for t in score.tempos))
    return without_zero_tempos(score)


def score_to_pretty_midi(score: Score) -> pretty_midi.PrettyMIDI:
    """The same music as a ``pretty_midi.PrettyMIDI`` (through MIDI bytes: tempo map, meter, named tracks)."""
    import pretty_midi  # here: reading a score (the tokenizer, the GPU image's training) needs no pretty_midi

    if not (score.tracks or score.tempos or score.time_signatures or score.key_signatures or score.markers):
        # nothing to write (no ids, or PAD and EOS only): pretty_midi cannot read a file with no track at all
        return pretty_midi.PrettyMIDI(resolution=score.ticks_per_quarter)
    return pretty_midi.PrettyMIDI(io.BytesIO(without_zero_tempos(score.copy()).dumps_midi()))
