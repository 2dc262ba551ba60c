"""symusic scores to and from the rest of the house (pretty_midi for writing and audio). No torch."""

from __future__ import annotations

import io

import pretty_midi
from symusic import Score


def score_to_pretty_midi(score: Score) -> pretty_midi.PrettyMIDI:
    """The same music as a ``pretty_midi.PrettyMIDI`` (through MIDI bytes: tempo map, meter, named tracks)."""
    return pretty_midi.PrettyMIDI(io.BytesIO(score.dumps_midi()))
