"""Phrase echo (musictx.decoding.hooks.phrase_echo): each new bar leans toward the seed's bar at the same place
in the phrase, all tracks at once.

The bonus lands on the ids that would play the reference bar again from where the sample stands (another
note of the reference's at this position, the reference's next onset, its pitches after a Program), never
revives a forbidden id, and on the shipped pop model and held-out POP909 songs it brings the texture's top
line back the way the real songs do."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.phrase_echo import PhraseEcho
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation import scorecard_metrics as sm

from .helpers import bonused, held_out_pop_continuations, needs_shared, started_on_bars, step

MELODY, PIANO = 80, 0  # the internal programs of POP909's MELODY and PIANO tracks


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    net, tok, _ = load_model("pop")
    return net, tok


def _bar(*onsets: tuple[int, list[tuple[int, int]]]) -> list[str]:
    """A REMI bar: (position, [(program, pitch), ...]) for each onset."""
    out = ["Bar_None", "TimeSig_4/4"]
    for pos, notes in onsets:
        out.append(f"Position_{pos}")
        for program, pitch in notes:
            out += [f"Program_{program}", f"Pitch_{pitch}", "Velocity_95", "Duration_0.2.4"]
    return out


def _echo(tok, bars: list[list[str]], strength: float = 2.0, period: int = 4) -> PhraseEcho:
    """A phrase echo started on ``bars`` and the Bar id that opens the first new bar, as the sampler's prompt."""
    return started_on_bars(PhraseEcho(tok, strength, period), tok, bars)


def test_the_first_new_bar_replays_the_first_bar_of_the_seeds_last_phrase(pop):
    _, tok = pop
    first = _bar((0, [(MELODY, 72), (PIANO, 48), (PIANO, 55)]), (8, [(PIANO, 52)]))
    other = _bar((4, [(PIANO, 50)]))
    echo = _echo(tok, [other, first, other, other, other])  # 5 seed bars: the last 4 are the phrase, from `first`
    step(echo, tok, "TimeSig_4/4")
    assert bonused(echo, tok) == {"Position_0"}  # the reference's first onset
    step(echo, tok, "Position_0")
    assert bonused(echo, tok) == {f"Program_{MELODY}", f"Program_{PIANO}", "Position_8"}
    step(echo, tok, f"Program_{PIANO}")
    assert bonused(echo, tok) == {"Pitch_48", "Pitch_55"}  # the piano's notes there, at their own pitch
    step(echo, tok, "Pitch_55", "Velocity_95", "Duration_0.2.4")
    # the melody's note and one more piano note are still to come at this position, or the next onset (8)
    assert bonused(echo, tok) == {f"Program_{MELODY}", f"Program_{PIANO}", "Position_8"}
    step(echo, tok, f"Program_{PIANO}")
    assert bonused(echo, tok) == {"Pitch_48"}
    step(echo, tok, "Pitch_50", "Velocity_95", "Duration_0.2.4")
    # a piano note at another pitch counts: the piano has its two notes here, only the melody's is missing
    assert bonused(echo, tok) == {f"Program_{MELODY}", "Position_8"}
    step(echo, tok, "Position_8", f"Program_{PIANO}", "Pitch_52", "Velocity_95", "Duration_0.2.4")
    assert bonused(echo, tok) == {"Bar_None"}  # the reference has nothing after 8: its bar ends
    step(echo, tok, "Bar_None", "TimeSig_4/4")
    assert bonused(echo, tok) == {"Position_4"}  # the second new bar echoes the phrase's second bar


def test_the_phrase_cycles_and_a_short_seed_is_the_whole_phrase(pop):
    _, tok = pop
    a, b = _bar((2, [(PIANO, 40)])), _bar((6, [(PIANO, 41)]))
    echo = _echo(tok, [a, b], period=4)  # 2 seed bars: the phrase is 2 bars long
    positions = []
    for _ in range(4):
        step(echo, tok, "TimeSig_4/4")
        positions.append(bonused(echo, tok))
        step(echo, tok, "Bar_None")
    assert positions == [{"Position_2"}, {"Position_6"}, {"Position_2"}, {"Position_6"}]


def test_forbidden_ids_stay_forbidden_and_zero_strength_changes_nothing(pop):
    _, tok = pop
    echo = _echo(tok, [_bar((0, [(PIANO, 48)]))])
    step(echo, tok, "TimeSig_4/4")
    masked = torch.zeros(1, tok.vocab_size)
    masked[0, tok.vocab["Position_0"]] = float("-inf")
    assert echo(masked)[0, tok.vocab["Position_0"]] == float("-inf")
    assert masked[0, tok.vocab["Position_0"]] == float("-inf")  # the caller's logits are not changed in place
    off = _echo(tok, [_bar((0, [(PIANO, 48)]))], strength=0.0)
    logits = torch.randn(1, tok.vocab_size)
    assert off(logits) is logits


def test_bad_settings_are_refused_in_one_line(pop):
    _, tok = pop
    with pytest.raises(GenerateError, match="hooks.phrase_echo.strength must be >= 0"):
        SamplingOptions(hooks={"phrase_echo": {"strength": -0.5}}).check_sampling()
    with pytest.raises(ValueError, match="period must be >= 1"):
        PhraseEcho(tok, 1.0, period=0)


@needs_shared
def test_the_top_line_comes_back_on_held_out_songs(pop):
    """Two POP909 songs from the prep split's validation files, 2 samples of ~12 s each: the top line's
    interval 4-grams found in the seed's top line, echo off against echo on (same seeds)."""
    net, tok = pop
    torch.set_num_threads(1)
    share = {}
    for strength in (0.0, 2.0):
        echo = {"hooks": {"phrase_echo": {"strength": strength}}}
        found = [sm.motif_reuse(sm.top_line(new)[1], sm.top_line(seed)[1])["transposed"]
                 for seed, new in held_out_pop_continuations(net, tok, echo)]
        share[strength] = float(np.nanmean(found))
    assert share[2.0] > share[0.0] + 0.03, share
