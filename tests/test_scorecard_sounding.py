"""The continuation scorecard reads the real music of a Performance model as it sounds, the pedal held on as the
tokenizer folds it: the model's notes carry the pedal in their lengths, and were compared with bare key lengths."""

from __future__ import annotations

import numpy as np
import pretty_midi
import pytest

from musictx.evaluation.scorecard import sounds_with_pedal
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.tokenizer import EventTokenizer, TokenizerConfig
from musictx.listening.note_span import Span

from .helpers import needs_shared, piano_files


def pedalled_piece() -> pretty_midi.PrettyMIDI:
    pm = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(0, name="piano")
    for start, pitch in ((0.0, 48), (0.5, 60), (1.0, 64), (3.0, 60)):  # 60 struck again while the pedal holds it
        piano.notes.append(pretty_midi.Note(80, pitch, start, start + 0.3))
    piano.control_changes += [pretty_midi.ControlChange(64, 127, 0.1), pretty_midi.ControlChange(64, 0, 4.0)]
    pm.instruments.append(piano)
    return pm


def test_sounding_notes_hold_on_to_the_pedal_lift_and_end_where_their_pitch_is_struck_again():
    pm = pedalled_piece()
    keys, heard = Span.from_pretty_midi(pm), Span.from_pretty_midi(pm, sustain=True)
    assert np.allclose(keys.end, keys.start + 0.3)
    by_onset = dict(zip(heard.start.round(2).tolist(), heard.end.round(2).tolist(), strict=True))
    assert by_onset == {0.0: 4.0, 0.5: 3.0, 1.0: 4.0, 3.0: 4.0}


def test_the_pedal_is_folded_for_performance_tokenizers_only():
    assert sounds_with_pedal(EventTokenizer())
    assert sounds_with_pedal(EventTokenizer(TokenizerConfig(sustain=False, pedal_events=True)))
    assert not sounds_with_pedal(EventTokenizer(TokenizerConfig(sustain=False)))
    assert not sounds_with_pedal(MetricalTokenizer())  # a metrical tokenizer has no pedal rule


def pedal_presses(pm: pretty_midi.PrettyMIDI) -> int:
    return sum(c.number == 64 and c.value >= 64 for inst in pm.instruments for c in inst.control_changes)


@needs_shared
@pytest.mark.parametrize("k", [0, 40])
def test_sounding_notes_are_what_the_piano_tokenizer_reads(k):
    """On real pedalled performances the span's ends are the tokenizer's own reading (to its 10 ms grid)."""
    pm = next(pm for path in piano_files()[k:] if pedal_presses(pm := pretty_midi.PrettyMIDI(str(path))) >= 20)
    tok = EventTokenizer()
    span, notes = Span.from_pretty_midi(pm, sustain=True), tok.quantize_notes(tok.read(pm))
    ours = sorted(zip(span.start.round(2), span.pitch, span.end, strict=True))
    theirs = sorted(zip(notes.start.round(2), notes.pitch, notes.end, strict=True))
    assert len(ours) == len(theirs)
    off = np.abs(np.array([a[2] for a in ours]) - np.array([b[2] for b in theirs]))
    assert np.mean(off > 0.02) < 0.01
    assert np.mean(span.end > Span.from_pretty_midi(pm).end + 0.05) > 0.05  # the pedal holds notes on here
