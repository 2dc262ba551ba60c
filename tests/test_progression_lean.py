"""Progression lean (musictx.decoding.hooks.progression_lean): each new bar's Pitch ids lean toward the pitch
classes of the seed's bar at the same place in its last phrase, cycled; nothing else moves, and 0 turns it off."""

from __future__ import annotations

import pytest
import torch

from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.progression_lean import ProgressionLean
from musictx.decoding.hooks.registry import hooks_made
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.metrical_tokenizer import MetricalTokenizer

from .helpers import bonused, started_on_bars, step
from .helpers import remi_bar as bar

PIANO, WHOLE = 0, "4.0.2"
C_MAJOR, A_MINOR = (48, 52, 55), (45, 48, 52)


@pytest.fixture(name="tok", scope="module")
def fixture_tok():
    return MetricalTokenizer()


def classes(tok, hook) -> set[int]:
    return {int(t.split("_")[1]) % 12 for t in bonused(hook, tok)}


def test_each_new_bar_leans_toward_the_seed_bar_at_its_place_in_the_phrase(tok):
    seed = [bar((0, [(PIANO, p, WHOLE) for p in C_MAJOR])), bar((0, [(PIANO, p, WHOLE) for p in A_MINOR]))]
    lean = started_on_bars(ProgressionLean(tok, 2.0), tok, seed)
    step(lean, tok, "TimeSig_4/4", "Position_0")
    assert bonused(lean, tok) == set()  # a Program comes next: where a note plays stays the model's
    step(lean, tok, "Program_0")
    assert classes(tok, lean) == {0, 4, 7} and all(t.startswith("Pitch_") for t in bonused(lean, tok))
    step(lean, tok, "Pitch_60", "Velocity_95", f"Duration_{WHOLE}", "Bar_None", "TimeSig_4/4", "Position_0",
         "Program_0")
    assert classes(tok, lean) == {9, 0, 4}  # the second new bar: the seed's second chord
    step(lean, tok, "Pitch_57", "Velocity_95", f"Duration_{WHOLE}", "Bar_None", "TimeSig_4/4", "Position_0",
         "Program_0")
    assert classes(tok, lean) == {0, 4, 7}  # and round again: a 2-bar seed is a 2-bar phrase
    masked = torch.zeros(1, tok.vocab_size)
    masked[0, tok.vocab["Pitch_60"]] = float("-inf")
    assert lean(masked)[0, tok.vocab["Pitch_60"]] == float("-inf")  # a forbidden pitch stays forbidden


def test_it_is_made_for_a_metrical_continuation_and_off_at_zero(tok):
    def made(options: SamplingOptions) -> list[str]:
        return list(hooks_made(HookInputs("continue", tok, options, programs=[0])))

    assert "progression_lean" in made(SamplingOptions())
    assert "progression_lean" not in made(SamplingOptions(hooks={"progression_lean": {"strength": 0}}))
    infill = hooks_made(HookInputs("infill", tok, SamplingOptions(), programs=[0]))
    assert "progression_lean" not in infill
