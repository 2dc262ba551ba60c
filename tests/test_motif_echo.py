"""Motif echo (musictx.decoding.hooks.motif_echo): each track leans toward the seed's own figures.

The bonus lands only where the next id is a pitch of an echoed track, on the pitches that go on as that
track's seed line went on from the same last intervals, in the share of the matches; on the shipped pop
model and held-out POP909 songs it makes the melody restate the seed's figures far more often."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.motif_echo import MotifEcho
from musictx.decoding.sampling_options import SamplingOptions
from musictx.listening import scorecard_metrics as sm

from .helpers import held_out_pop_continuations, needs_shared

MELODY, PIANO = 80, 0  # the internal programs of POP909's MELODY and PIANO tracks


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    net, tok, _ = load_model("pop")
    return net, tok


def _ids(tok, tokens: list[str]) -> torch.Tensor:
    return torch.tensor([[tok.vocab[t] for t in tokens]])  # (1, T)


def _notes(program: int, pitches: list[int]) -> list[str]:
    out = []
    for k, p in enumerate(pitches):
        out += [f"Position_{2 * k}", f"Program_{program}", f"Pitch_{p}", "Velocity_95", "Duration_0.2.4"]
    return out


def _seed(tok) -> torch.Tensor:
    """A bar of melody going up a tone twice then down a major third (60 62 64 60 62 64 60 ...), and a bar of
    piano repeating one fifth downward (48 55 48 55)."""
    return _ids(tok, ["Bar_None", "TimeSig_4/4", *_notes(MELODY, [60, 62, 64, 60, 62, 64, 60]),
                      "Bar_None", "TimeSig_4/4", *_notes(PIANO, [48, 55, 48, 55])])


def test_bonus_only_on_the_next_pitch_of_an_echoed_track_as_its_seed_went_on(pop):
    _, tok = pop
    echo = MotifEcho(tok, [MELODY, PIANO], strength=1.5)
    echo.start(_seed(tok))
    logits = torch.zeros(1, tok.vocab_size)
    assert torch.equal(echo(logits), logits)  # the last id is a Duration: no pitch comes next
    echo.update(torch.tensor([tok.vocab[f"Program_{MELODY}"]]))
    bonus = echo(logits)[0]  # the line ends 62 64 60 (+2, -4): the seed went on +2 from there
    assert bonus.sum().item() == pytest.approx(1.5)
    assert bonus[tok.vocab["Pitch_62"]].item() == pytest.approx(1.5)
    echo.update(torch.tensor([tok.vocab["Pitch_67"]]))  # the model leaps instead: 60 -> 67 (+7) is not in the seed
    echo.update(torch.tensor([tok.vocab["Velocity_95"]]))
    assert torch.equal(echo(logits), logits)  # a Velocity comes next
    for t in ("Duration_0.2.4", "Position_8", f"Program_{MELODY}"):
        echo.update(torch.tensor([tok.vocab[t]]))
    assert torch.equal(echo(logits), logits)  # no seed interval follows +7: nothing to echo
    echo.update(torch.tensor([tok.vocab[f"Program_{PIANO}"]]))  # a piano note instead: its own line, 48 55 48 55
    bonus = echo(logits)[0]
    assert bonus[tok.vocab["Pitch_48"]].item() == pytest.approx(1.5)  # as the piano went on after +7: -7
    assert torch.count_nonzero(bonus) == 1


def test_shares_of_the_matches_longest_first_and_the_grammar_masks_stay(pop):
    _, tok = pop
    echo = MotifEcho(tok, [MELODY], strength=2.0)
    echo.start(_ids(tok, ["Bar_None", "TimeSig_4/4", *_notes(MELODY, [60, 62, 64, 62, 64, 66, 64])]))
    echo.update(torch.tensor([tok.vocab[f"Program_{MELODY}"]]))
    assert echo.next_intervals(0) == {2: 1}  # the line ends +2 +2 -2, played once in the seed, then +2
    for t in ("Pitch_57", "Velocity_95", "Duration_0.2.4", f"Program_{MELODY}", "Pitch_59", "Velocity_95",
              "Duration_0.2.4", f"Program_{MELODY}"):
        echo.update(torch.tensor([tok.vocab[t]]))
    # now ... 64 57 59: -7 +2 is not in the seed, +2 alone is, four times, followed by +2, -2, +2, -2
    assert echo.next_intervals(0) == {2: 2, -2: 2}
    bonus = echo(torch.zeros(1, tok.vocab_size))[0]
    assert bonus[tok.vocab["Pitch_61"]].item() == pytest.approx(1.0)
    assert bonus[tok.vocab["Pitch_57"]].item() == pytest.approx(1.0)
    assert torch.count_nonzero(bonus) == 2
    masked = torch.zeros(1, tok.vocab_size)
    masked[0, tok.vocab["Pitch_61"]] = float("-inf")  # the grammar forbids the echoed pitch: it stays forbidden
    assert echo(masked)[0, tok.vocab["Pitch_61"]] == float("-inf")
    assert MotifEcho(tok, [MELODY], strength=0.0)(masked) is masked


def test_bad_strength_is_refused_in_one_line():
    with pytest.raises(GenerateError, match="hooks.motif_echo.strength must be >= 0"):
        SamplingOptions(hooks={"motif_echo": {"strength": -1}}).check_sampling()


@needs_shared
@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_the_melody_restates_the_seeds_figures_on_held_out_songs(pop):
    """Two POP909 songs from the shipped model's validation files, 2 samples of 8 bars each: the melody's
    interval 4-grams found in the seed's melody, echo off against echo on (same seeds)."""
    net, tok = pop
    torch.set_num_threads(1)
    share = {}
    for strength in (0.0, 2.0):
        found = []
        for seed, new in held_out_pop_continuations(net, tok, {"hooks": {"motif_echo": {"strength": strength}}}):
            lead = sm.lead_track(seed)
            assert lead == "MELODY"
            found.append(sm.motif_reuse(sm.top_line(sm.track_named(new, lead))[1],
                                        sm.top_line(sm.track_named(seed, lead))[1])["transposed"])
        share[strength] = float(np.nanmean(found))
    assert share[2.0] > share[0.0] + 0.1, share


def test_lead_track_by_name_else_the_highest():
    from musictx.listening.note_span import Span

    def span(names, pitches):
        n = len(pitches)
        return Span(np.arange(n, dtype=float), np.arange(n) + 0.5, np.array(pitches), np.full(n, 80),
                    np.arange(n) % len(names), list(names))

    assert sm.lead_track(span(["Piano", "Vocals"], [72, 60, 72, 60])) == "Vocals"
    assert sm.lead_track(span(["Strings", "Flute"], [50, 80, 50, 80])) == "Flute"
    assert sm.lead_track(span(["Piano"], [60, 62])) is None
    assert list(sm.track_named(span(["Piano", "Vocals"], [72, 60, 71, 61]), "Vocals").pitch) == [60, 61]
