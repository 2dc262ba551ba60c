"""Key lean (musictx.decoding.hooks.key_lean): a continuation's pitches lean toward the seed's pitch classes, and
nothing else moves: only the Pitch ids after a Program get a bonus."""

from __future__ import annotations

import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.hooks.key_lean import KeyLean

from .helpers import bonused, started_on_bars, step
from .helpers import remi_bar as _bar

MELODY, PIANO = 80, 0
QUARTER, WHOLE = "1.0.4", "4.0.2"


def test_the_key_lean_raises_the_seeds_pitch_classes_on_a_pitch_only():
    """In a seed of 46 beats of notes, C 5, E 1 and D F G A B 8 each: C and the other tones played get the whole
    bonus, E (1/46 of the time, under a twelfth) 12/46 of it, F# none."""
    tok = load_model("pop")[1]
    seed = _bar((0, [(PIANO, 48, WHOLE), (MELODY, 72, QUARTER)]), (4, [(MELODY, 76, QUARTER)]))
    others = [_bar((0, [(PIANO, p, WHOLE) for p in (50, 53, 55, 57, 59)])) for _ in range(2)]  # D F G A B
    hook = started_on_bars(KeyLean(tok, 2.0), tok, [seed, *others])
    step(hook, tok, "TimeSig_4/4", "Position_0")
    assert bonused(hook, tok) == set()  # a Program comes next: the lean waits for the Pitch
    step(hook, tok, "Program_0")
    out = hook(torch.zeros(1, tok.vocab_size))[0]
    assert out[tok.vocab["Pitch_60"]] == 2.0 and out[tok.vocab["Pitch_62"]] == 2.0  # C and D: in key
    assert abs(float(out[tok.vocab["Pitch_64"]]) - 2.0 * 12 / 46) < 1e-5  # E: 1 of 46 beats, under a twelfth
    assert out[tok.vocab["Pitch_66"]] == 0.0 and out[tok.vocab["Program_80"]] == 0.0
    assert {tok.id_to_token(int(i)).split("_")[0] for i in torch.nonzero(out).flatten()} == {"Pitch"}
