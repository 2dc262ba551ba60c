"""What the page's progress bar says while a continuation is sampled: the share made so far (`GenerationProgress`
for a performance model, counted in seconds; `musictx.app.metrical.BarProgress` for a metrical one, in bars)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from torch import Tensor

from musictx.decoding import ShiftClock, steps_in

Report = Callable[[float, str], None]  # (fraction done, what is happening)


class GenerationProgress:
    """An ``on_step`` for `musictx.decoding.sampling.generate` that reports ``(fraction, text)``: the mean
    share of ``seconds`` the samples have made so far, counted from the TIME_SHIFT ids they draw."""

    def __init__(self, tokenizer, seconds: float, report: Report):
        self.clock, self.seconds, self.report = ShiftClock.of(tokenizer), seconds, report
        self.steps = steps_in(seconds, tokenizer.config.time_step)

    def __call__(self, next_ids: Tensor, done: Tensor) -> None:
        steps = self.clock.add(next_ids)  # (B,) each sample's steps so far
        fraction = float(np.minimum(steps / self.steps, 1.0).mean())
        self.report(fraction, f"generating: {fraction * self.seconds:.1f} of {self.seconds:g} s")
