"""The length rules: hooks that end samples (`LogitsHook.finished`) at the length a task asks for, made by
`build_hooks` from the run's `HookInputs` (``length_seconds`` on Performance events, ``stop_after_bars`` on
REMI), like every other hook.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from musictx.decoding.hook import KINDS, HookInputs, HookSpec, LogitsHook
from musictx.decoding.sampling import ShiftClock, steps_in


class SecondsLimit(LogitsHook):
    """A length rule, the hook `generate` ends samples by: a sample is complete once its new TIME_SHIFTs reach
    ``seconds``.

    Counts the steps of every new TIME_SHIFT id per sample (`ShiftClock`). The shift that reaches the limit
    is kept, so the new material lasts at least ``seconds`` and less than ``seconds`` plus one shift. Make a
    fresh one per call.
    """

    def __init__(self, seconds: float, time_step: float, first_shift: int, n_shifts: int):
        if seconds <= 0:
            raise ValueError(f"length_seconds must be > 0, got {seconds}")
        self.limit_steps = steps_in(seconds, time_step)
        self.clock = ShiftClock(first_shift, n_shifts)

    @classmethod
    def of(cls, tokenizer, seconds: float) -> SecondsLimit:
        """The limit for an `EventTokenizer`'s TIME_SHIFT ids."""
        clock = ShiftClock.of(tokenizer)
        return cls(seconds, tokenizer.config.time_step, clock.first_shift, clock.n_shifts)

    @property
    def steps(self) -> np.ndarray | None:
        """(B,) steps generated so far; None before the first call."""
        return self.clock.steps

    def finished(self, next_ids: Tensor) -> Tensor:
        return torch.from_numpy(self.clock.add(next_ids) >= self.limit_steps).to(next_ids.device)


class BarLimit(LogitsHook):
    """A length rule, the hook `generate` ends samples by: a sample is complete when it draws the Bar id that
    would open bar ``bars + 1``."""

    def __init__(self, bar_id: int, bars: int):
        self.bar_id, self.bars = bar_id, bars
        self.count: np.ndarray | None = None  # (B,) Bar ids drawn so far

    def finished(self, next_ids: torch.Tensor) -> torch.Tensor:
        is_bar = next_ids.cpu().numpy() == self.bar_id
        self.count = is_bar.astype(np.int64) if self.count is None else self.count + is_bar
        return torch.from_numpy(self.count > self.bars).to(next_ids.device)


def _make(inputs: HookInputs, _options) -> LogitsHook | None:
    if inputs.stop_after_bars is not None:
        return BarLimit(inputs.tokenizer.bar_id, inputs.stop_after_bars)
    if inputs.length_seconds:
        return SecondsLimit.of(inputs.tokenizer, inputs.length_seconds)
    return None


SPEC = HookSpec("length", None, KINDS, None, 95, _make,
                "ends each sample at the length asked for (its seconds, or its bars)")
