"""Pace: a piano continuation keeps near its seed's notes a second.

The shipped `piano` model writes more notes a second than the music it continues, and part of it is the model
running away from its seed's pace, far more often than the real music does (measured in docs/generation.md,
"Pace").

The hook counts the NOTE_ONs drawn since the seed and the time that has passed (its TIME_SHIFT steps); once
the continuation is ahead of ``ratio`` times the seed's rate, by more than ``slack_seconds`` of notes at
that rate, every NOTE_ON logit is lowered, by up to ``strength`` as the lead grows to twice the slack. Time moving
on, a note ending and the pedal are untouched, so the model chooses how to wait; *which* note comes stays the
model's, and a continuation at its seed's pace is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import option, strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor


class Pace(LogitsHook):
    """The seed's onset rate as a soft ceiling on a Performance continuation's NOTE_ONs."""

    def __init__(self, tokenizer, strength: float, ratio: float, slack_seconds: float):
        self.tok = tokenizer
        self.ons = slice(tokenizer.layout.note_on, tokenizer.layout.note_off)
        self.step_s = tokenizer.config.time_step
        self.strength, self.ratio, self.slack_s = float(strength), float(ratio), float(slack_seconds)

    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()  # (B, T0)
        is_on = (rows >= self.ons.start) & (rows < self.ons.stop)
        seconds = self.tok.shift_steps(rows).sum(axis=1) * self.step_s  # (B,)
        seed_rate = np.where((seconds > 0) & is_on.any(axis=1), is_on.sum(axis=1) / np.maximum(seconds, 1e-9), np.nan)
        self.ceiling = self.ratio * seed_rate  # (B,) notes a second it may keep up; nan: none (a seed without notes)
        self.notes = np.zeros(len(rows))  # (B,) NOTE_ONs drawn since the seed
        self.seconds = np.zeros(len(rows))  # (B,) time passed since the seed

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        ids = next_ids.cpu().numpy()  # (B,)
        self.notes += (ids >= self.ons.start) & (ids < self.ons.stop)
        self.seconds += self.tok.shift_steps(ids) * self.step_s

    def lowering(self) -> np.ndarray:
        """(B,) what each row's NOTE_ON logits lose now: 0 at or below the ceiling plus its slack, rising to
        ``strength`` at twice the slack ahead."""
        slack = np.maximum(self.ceiling * self.slack_s, 1.0)  # (B,) notes
        ahead = self.notes + 1 - self.ceiling * self.seconds - slack  # the next note's lead past the slack
        return np.nan_to_num(self.strength * np.clip(ahead / slack, 0.0, 1.0))  # no ceiling: nothing lost

    def __call__(self, logits: Tensor) -> Tensor:
        lower = self.lowering()
        if not lower.any():
            return logits
        out = logits.clone()
        out[:, self.ons] -= torch.from_numpy(lower.astype(np.float32)).to(logits.device, logits.dtype)[:, None]
        return out


@dataclass
class PaceOptions:
    strength: float = strength_option(4.0, (
        "how far a piano continuation's next notes are held back once it runs ahead of its seed's notes a second "
        "(logits lowered by up to this much); 0: off"))
    ratio: float = option(1.25, "the ceiling, as a multiple of the seed's notes a second", low=1.0)
    slack_seconds: float = option(2.0, "how many seconds of notes at the ceiling it may run ahead before it is held",
                                  low=0.0)


def _make(inputs: HookInputs, o: PaceOptions) -> Pace | None:
    return Pace(inputs.tokenizer, o.strength, o.ratio, o.slack_seconds) if o.strength else None


SPEC = HookSpec("pace", PaceOptions, ("performance",), ("continue",), _make,
                "a piano continuation's notes a second held near its seed's (notes wait once it runs ahead)")
