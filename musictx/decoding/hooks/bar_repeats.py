"""Repetition control for metrical (REMI) ids, a sampling hook: a loop is broken.

When the last ``max_repeats`` bars are identical token for token, the next bar may not be the same again
from its first note on: the pitch that would go on copying them is forbidden, so the bar's first note is
steered elsewhere. A stuck model otherwise restates one bar for a minute; real pop repeats a bar at most a
few times in a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MAX_REPEATS = 4  # identical bars in a row before the next must differ


class BarRepeatLimit(ReadsCursor):
    """Reads each sample's bars (as id lists, the Bar id itself left out) from the cursor and forbids the pitch
    that would make a bar the ``max_repeats + 1``-th copy in a row."""

    def __init__(self, tokenizer, max_repeats: int = MAX_REPEATS, cursor: RemiCursor | None = None):
        if max_repeats < 1:
            raise ValueError(f"max_repeats must be >= 1, got {max_repeats}")
        self.max_repeats = max_repeats
        self.is_pitch = np.array([t == "Pitch" for t in tokenizer.type_of])  # (V,)
        self._read(tokenizer, cursor)

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        self._bars_seen = [-1] * prompt.shape[0]  # row -> its bars when `_repeated_bar` last looked
        self._repeated: list[list[int] | None] = [None] * prompt.shape[0]

    def __call__(self, logits: Tensor) -> Tensor:
        for b in range(logits.shape[0]):
            nxt = self._loop_breaker(b)
            # never forbid the last id a sample may draw: the grammar leaves at least one
            if nxt is not None and int(torch.isfinite(logits[b]).sum()) > 1:
                logits[b, nxt] = float("-inf")
        return logits

    def _loop_breaker(self, b: int) -> int | None:
        """The pitch id that would go on copying the repeated bar (the last ``max_repeats`` finished bars are
        the same, they hold a pitch, and the bar being written copies them so far), else None."""
        bar = self._repeated_bar(b)
        if bar is None:
            return None
        current = self.cursor.recent_bar_ids(b, 1)[0]
        if len(current) >= len(bar) or current != bar[: len(current)]:
            return None
        nxt = bar[len(current)]
        return nxt if self.is_pitch[nxt] else None

    def _repeated_bar(self, b: int) -> list[int] | None:
        """The ids of the bar that row b's last ``max_repeats`` finished bars all are, where they are one bar
        that holds a pitch, else None: read again only when a bar begins (finished bars do not change)."""
        bars = len(self.cursor.bars[b])
        if self._bars_seen[b] != bars:
            self._bars_seen[b] = bars
            done = self.cursor.recent_bar_ids(b, self.max_repeats + 1)[:-1]
            same = len(done) >= self.max_repeats and all(x == done[0] for x in done) and any(self.is_pitch[done[0]])
            self._repeated[b] = done[0] if same else None
        return self._repeated[b]


@dataclass
class BarRepeatsOptions:
    max_repeats: int | None = option(MAX_REPEATS, "identical bars in a row before the next must differ; null: no limit",
                                     low=1)


def _make(inputs: HookInputs, o: BarRepeatsOptions) -> BarRepeatLimit | None:
    if not o.max_repeats:
        return None
    return BarRepeatLimit(inputs.tokenizer, o.max_repeats, cursor=shared_cursor(inputs))


SPEC = HookSpec("bar_repeats", BarRepeatsOptions, ("remi",), ("continue", "infill", "accompany"),
                _make, "no more than max_repeats identical bars in a row")
