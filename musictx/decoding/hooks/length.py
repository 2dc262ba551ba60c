"""The length rules: hooks that end samples (`LogitsHook.finished`) at the length a task asks for, made by
`build_hooks` from the run's `HookInputs` (``length_seconds`` on Performance events, ``stop_after_bars`` on
REMI), like every other hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import KINDS, HookInputs, HookSpec, LogitsHook, StopRule, ids_on_host
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor


class ShiftClock:
    """Per-sample steps of new music, counted from the TIME_SHIFT ids as they are sampled: ids
    ``first_shift .. first_shift + n_shifts - 1`` move time on by 1 .. n_shifts steps, others by none.

    Counted in numpy with a table of each id's steps: it runs once a token (as a stop and as progress),
    and a handful of torch ops on (B,) ids cost as much as a tenth of a decoding step."""

    def __init__(self, first_shift: int, n_shifts: int):
        self.first_shift, self.n_shifts = first_shift, n_shifts
        # steps of each id up to the last TIME_SHIFT, then one entry (0) that every later id reads
        self._steps_of = np.zeros(first_shift + n_shifts + 1, dtype=np.int64)
        self._steps_of[first_shift : first_shift + n_shifts] = np.arange(1, n_shifts + 1)
        self.steps: np.ndarray | None = None  # (B,) steps generated so far

    @classmethod
    def of(cls, tokenizer) -> ShiftClock:
        """The clock of an `EventTokenizer`'s TIME_SHIFT ids."""
        lay = tokenizer.layout
        return cls(lay.time_shift, lay.velocity - lay.time_shift)

    def add(self, next_ids: Tensor) -> np.ndarray:
        """Count the ids (B,) just sampled; returns the steps (B,) so far."""
        ids = next_ids.cpu().numpy()
        shift = self._steps_of[np.minimum(ids, len(self._steps_of) - 1)]  # (B,)
        self.steps = shift if self.steps is None else self.steps + shift
        return self.steps


def steps_in(seconds: float, time_step: float) -> int:
    """The TIME_SHIFT steps of ``seconds`` of music (at least one): what a length of new music is counted in,
    by the length rule and by the app's progress alike."""
    return max(1, round(seconds / time_step))


class SecondsLimit(StopRule):
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

    def finished(self, next_ids: Tensor) -> Tensor | None:
        over = self.clock.add(next_ids) >= self.limit_steps  # (B,) numpy
        return torch.from_numpy(over).to(next_ids.device) if over.any() else None


class BarLimit(StopRule):
    """A length rule, the hook `generate` ends samples by: a sample is complete when it draws the Bar id that
    would open bar ``bars + 1``."""

    def __init__(self, bar_id: int, bars: int):
        self.bar_id, self.bars = bar_id, bars
        self.count: list[int] | None = None  # per sample, the Bar ids drawn so far

    def finished(self, next_ids: torch.Tensor) -> torch.Tensor | None:
        ids = ids_on_host(next_ids)  # counted on the host: a few tensor ops would cost more at every draw
        if self.count is None:
            self.count = [0] * len(ids)
        if self.bar_id not in ids:  # most draws: no count moves, and none was over before (it would be done)
            return None
        for b, i in enumerate(ids):
            self.count[b] += i == self.bar_id
        over = [n > self.bars for n in self.count]
        return torch.tensor(over, device=next_ids.device) if any(over) else None


def _make(inputs: HookInputs, _options) -> LogitsHook | None:
    if inputs.stop_after_bars is not None:
        return BarLimit(inputs.tokenizer.bar_id, inputs.stop_after_bars)
    if inputs.length_seconds:
        return SecondsLimit.of(inputs.tokenizer, inputs.length_seconds)
    return None


SPEC = HookSpec("length", None, KINDS, None, _make,
                "ends each sample at the length asked for (its seconds, or its bars)")
