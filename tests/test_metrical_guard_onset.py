"""The metrical guard's onset rule (musictx.decoding.hooks.metrical_guard): within one onset of one track each pitch
once, and at most MAX_NOTES_AT_ONSET notes; a new position or bar starts afresh. The H100's pop stacked 139
notes on 5 positions of one accompaniment bar without it, until the token cap cut the sample short."""

from __future__ import annotations

import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.hooks.metrical_guard import MAX_NOTES_AT_ONSET, RemiGuard

from .helpers import remi_bar, started_on_bars, step

PIANO, MELODY = 0, 80
WHOLE = "4.0.2"


def _allowed(guard, tok) -> set[str]:
    out = guard(torch.zeros(1, tok.vocab_size))[0]
    return {tok.id_to_token(int(i)) for i in torch.nonzero(torch.isfinite(out)).flatten()}


def test_a_pitch_is_struck_once_per_onset_and_track():
    tok = load_model("pop")[1]
    guard = started_on_bars(RemiGuard(tok, programs=[PIANO, MELODY]), tok, [remi_bar((0, [(PIANO, 48, WHOLE)]))])
    step(guard, tok, "TimeSig_4/4", "Position_0", "Program_0", "Pitch_60", "Velocity_87", f"Duration_{WHOLE}",
         "Program_0")
    pitches = {t for t in _allowed(guard, tok) if t.startswith("Pitch_")}
    assert "Pitch_60" not in pitches and "Pitch_64" in pitches
    step(guard, tok, "Pitch_64", "Velocity_87", f"Duration_{WHOLE}", "Program_80")
    assert "Pitch_60" in _allowed(guard, tok)  # another track may double it
    step(guard, tok, "Pitch_72", "Velocity_87", f"Duration_{WHOLE}", "Position_4", "Program_0")
    assert "Pitch_60" in _allowed(guard, tok)  # a new onset starts afresh


def test_a_track_stops_at_the_cap_and_the_others_go_on():
    tok = load_model("pop")[1]
    guard = started_on_bars(RemiGuard(tok, programs=[PIANO, MELODY]), tok, [remi_bar((0, [(PIANO, 48, WHOLE)]))])
    step(guard, tok, "TimeSig_4/4", "Position_0")
    for k in range(MAX_NOTES_AT_ONSET):
        assert "Program_0" in _allowed(guard, tok)
        step(guard, tok, "Program_0", f"Pitch_{40 + k}", "Velocity_87", f"Duration_{WHOLE}")
    allowed = _allowed(guard, tok)
    assert "Program_0" not in allowed and "Program_80" in allowed and "Position_4" in allowed
    step(guard, tok, "Bar_None", "TimeSig_4/4", "Position_0")
    assert "Program_0" in _allowed(guard, tok)


def test_the_guard_names_the_one_id_its_grammar_leaves_and_only_then():
    """`only_choice`: the sampler writes such an id without asking the net (and feeds it with the next one)."""
    tok = load_model("pop")[1]
    one_track = started_on_bars(RemiGuard(tok, programs=[PIANO]), tok, [remi_bar((0, [(PIANO, 48, WHOLE)]))])
    two_tracks = started_on_bars(RemiGuard(tok, programs=[PIANO, MELODY]), tok, [remi_bar((0, [(PIANO, 48, WHOLE)]))])
    for guard, after_position in ((one_track, ["Program_0"]), (two_tracks, None)):
        assert [tok.id_to_token(i) for i in guard.only_choice()] == ["TimeSig_4/4"]  # after a Bar: the seed's meter
        assert _allowed(guard, tok) == {"TimeSig_4/4"}
        step(guard, tok, "TimeSig_4/4")
        assert guard.only_choice() is None  # any position of the bar
        step(guard, tok, "Position_0")
        only = guard.only_choice()
        assert (only and [tok.id_to_token(i) for i in only]) == after_position
        assert len(_allowed(guard, tok)) == (1 if after_position else 2)
