"""Repetition control for metrical (REMI) ids, a sampling hook: a loop is broken.

When the last ``max_repeats`` bars are identical token for token, the next bar may not be the same again
from its first note on: the pitch that would go on copying them is forbidden, so the bar's first note is
steered elsewhere. A stuck model otherwise restates one bar for a minute; real pop repeats a bar at most a
few times in a row.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from musictx.generation.hooks import HookInputs, HookSpec, LogitsHook

MAX_REPEATS = 4  # identical bars in a row before the next must differ


class BarRepeatLimit(LogitsHook):
    """Follows each sample's bars (as id lists, the Bar id itself left out) and forbids the pitch that would
    make a bar the ``max_repeats + 1``-th copy in a row."""

    def __init__(self, tokenizer, max_repeats: int = MAX_REPEATS):
        if max_repeats < 1:
            raise ValueError(f"max_repeats must be >= 1, got {max_repeats}")
        self.bar_id, self.max_repeats = tokenizer.bar_id, max_repeats
        self.is_pitch = np.array([t == "Pitch" for t in tokenizer.type_of])  # (V,)
        self.bars: list[list[list[int]]] = []  # per sample: the last bars, the one being written last

    def start(self, prompt: Tensor) -> None:
        self.bars = [[[]] for _ in range(len(prompt))]
        for b, row in enumerate(prompt.tolist()):
            for i in row:
                self._follow(b, i)

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        for b, i in enumerate(next_ids.tolist()):
            self._follow(b, i)

    def _follow(self, b: int, i: int) -> None:
        if i == self.bar_id:
            self.bars[b] = self.bars[b][-self.max_repeats :] + [[]]  # the finished bars a loop needs, then a new one
        else:
            self.bars[b][-1].append(i)

    def __call__(self, logits: Tensor) -> Tensor:
        for b in range(len(logits)):
            nxt = self._loop_breaker(b)
            # never forbid the last id a sample may draw: the grammar leaves at least one
            if nxt is not None and int(torch.isfinite(logits[b]).sum()) > 1:
                logits[b, nxt] = float("-inf")
        return logits

    def _loop_breaker(self, b: int) -> int | None:
        """The pitch id that would go on copying the repeated bar (the last ``max_repeats`` finished bars are
        the same, they hold a pitch, and the bar being written copies them so far), else None."""
        *done, current = self.bars[b]
        done = done[-self.max_repeats :]
        if len(done) < self.max_repeats or any(x != done[0] for x in done) or not any(self.is_pitch[done[0]]):
            return None
        if len(current) >= len(done[0]) or current != done[0][: len(current)]:
            return None
        nxt = done[0][len(current)]
        return nxt if self.is_pitch[nxt] else None


def _make(inputs: HookInputs) -> BarRepeatLimit | None:
    if not (inputs.sampling.guard and inputs.max_bar_repeats):
        return None
    return BarRepeatLimit(inputs.tokenizer, inputs.max_bar_repeats)


SPEC = HookSpec("bar_repeats", ("guard", "max_bar_repeats"), ("remi",), ("continue", "infill", "accompany"), 30,
                _make, "no more than max_bar_repeats identical bars in a row")
