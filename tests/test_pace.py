"""Pace (Performance events): a continuation that runs ahead of its seed's notes a second has its NOTE_ONs held
back, more the further ahead it is; at the seed's pace, or with no seed notes, nothing changes; through
`generate`, a strong pace keeps a fast-playing net's notes a second near the ceiling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from musictx.decoding.hook import LogitsHook
from musictx.decoding.hooks.pace import Pace
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.tokenizer import EventTokenizer

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
LAY = TOK.layout
STEP_S = TOK.config.time_step
ONS = slice(LAY.note_on, LAY.note_off)


def on(p: int) -> int:
    return LAY.note_on + p - TOK.config.pitch_min


def shift(seconds: float) -> int:
    return LAY.time_shift + round(seconds / STEP_S) - 1


def seeded(strength=2.0, ratio=1.0, slack=1.0, seed_notes=10, seed_seconds=1.0) -> Pace:
    """A pace whose seed plays ``seed_notes`` notes, each followed by ``seed_seconds`` of time."""
    pace = Pace(TOK, strength, ratio, slack)
    pace.start(torch.tensor([[x for _ in range(seed_notes) for x in (on(60), shift(seed_seconds))]]))
    return pace


def feed(pace: Pace, ids) -> None:
    for i in ids:
        pace.update(torch.tensor([i]))


def test_a_continuation_ahead_of_its_seed_is_held_back_more_the_further_ahead():
    pace = seeded()  # 1 note a second, ceiling 1 a second, 1 s of slack
    logits = torch.randn(1, TOK.vocab_size)
    assert torch.equal(pace(logits), logits)  # nothing drawn yet: the next note is within the slack
    feed(pace, [on(62)])  # 1 note in 0 s: the next would be 1 note past the slack, the most it can be here
    out = pace(logits)
    assert torch.allclose(out[0, ONS], logits[0, ONS] - 2.0)  # every NOTE_ON lowered by the full strength
    outside = torch.ones(TOK.vocab_size, dtype=torch.bool)
    outside[ONS] = False
    assert torch.equal(out[0, outside], logits[0, outside])  # time, note ends, velocities: untouched
    feed(pace, [shift(1.0)])  # a second passes: back within the ceiling
    assert torch.equal(pace(logits), logits)
    wide = seeded(slack=4.0)  # the lead ramps up over the slack: the 7th note in no time is 3 past 4 of slack
    feed(wide, [on(62)] * 6)
    assert float(logits[0, on(60)] - wide(logits)[0, on(60)]) == pytest.approx(2.0 * 3 / 4)


def test_the_seeds_own_pace_and_a_seed_without_notes_are_left_alone():
    pace = seeded(ratio=1.25)
    logits = torch.randn(1, TOK.vocab_size)
    for _ in range(30):  # the seed's pace, a note a second for 30 s
        feed(pace, [on(64), shift(1.0)])
        assert torch.equal(pace(logits), logits)
    silent = Pace(TOK, 2.0, 1.0, 1.0)
    silent.start(torch.tensor([[shift(1.0)] * 5]))  # 5 s without a note: no rate to keep
    feed(silent, [on(60)] * 20)
    assert torch.equal(silent(logits), logits)
    assert np.isnan(silent.ceiling[0])


def test_generate_with_a_strong_pace_keeps_near_the_ceiling():
    """A net that plays notes far faster than its seed: with the pace at a large strength, its notes a second
    come down to the ceiling's neighbourhood, and without it they do not."""
    net = tiny_net("music_transformer", max_seq_len=64)

    class FastPlayer(LogitsHook):  # before the pace, as the net's own preference: NOTE_ONs far likelier
        def __call__(self, logits):
            out = logits.clone()
            out[:, ONS] += 4.0
            return out

    prompt = torch.tensor([[x for _ in range(4) for x in (on(60), shift(1.0))]])  # 1 note a second
    opts = SamplingOptions(top_p=None, hooks={"recall_guidance": {"strength": 0.0}})

    def notes_a_second(hooks) -> float:
        ids = generate(net, TOK, prompt, opts, hooks, max_new_tokens=300)[0, prompt.shape[1]:].numpy()
        notes = ((ids >= ONS.start) & (ids < ONS.stop)).sum()
        seconds = np.where((ids >= LAY.time_shift) & (ids < LAY.velocity), ids - LAY.time_shift + 1, 0).sum() * STEP_S
        return notes / max(seconds, STEP_S)

    free = notes_a_second([FastPlayer()])
    held = notes_a_second([FastPlayer(), Pace(TOK, 20.0, 1.25, 1.0)])
    assert free > 5.0  # the fast player, left alone
    assert held < 2.0 < free  # near 1.25 notes a second (its slack and the draw's luck around it)
