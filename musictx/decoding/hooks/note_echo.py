"""Note echo: a piano continuation leans toward the seed's own figures (the motif echo for Performance events).

A performance is one stream of NOTE_ONs, chords written low to high. The line of NOTE_ON pitches the sampler
has drawn is matched against the seed's line by its last intervals, longest match first (3, then 2, then 1
interval); each pitch that would go on the way the seed went on from a match, at the current pitch (so also a
transposed restatement), gets ``strength`` times its share of the matches added to its NOTE_ON logit, when
its pitch class is one the seed sounds: a figure restated at another pitch stays in the seed's key.

The echo chooses *which* note, never *whether* or *when* one starts: after the bonus the NOTE_ON logits are
shifted together so that a note starting keeps the probability the model gave it. The texture and the timing
stay the model's; the grammar guard keeps the last word (its -inf stay -inf).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.filters import like_logits
from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MAX_ORDER = 3  # intervals matched at most, as the metrical motif echo


class NoteEcho(LogitsHook):
    """The echo of the seed's NOTE_ON line, at ``strength``, for an `EventTokenizer`'s ids."""

    def __init__(self, tokenizer, strength: float, max_order: int = MAX_ORDER):
        lay = tokenizer.layout
        self.note_on, self.n_pitches = lay.note_on, lay.note_off - lay.note_on
        self.pitch_min = tokenizer.config.pitch_min
        self.strength, self.max_order = float(strength), max_order

    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()
        self.lines = [self._pitches(row).tolist() for row in rows]  # row -> NOTE_ON pitch indices so far
        self.seed = [np.diff(np.asarray(line, dtype=np.int64)) for line in self.lines]  # row -> (S-1,) intervals
        self.bonus: list[np.ndarray | None] = [None] * len(rows)  # row -> (n_pitches,) for its line as it is
        classes = (np.arange(self.n_pitches) + self.pitch_min) % 12
        self.in_key = [np.isin(classes, (np.asarray(line, dtype=np.int64) + self.pitch_min) % 12)
                       for line in self.lines]  # row -> (n_pitches,) the seed sounds the pitch class

    def _pitches(self, ids: np.ndarray) -> np.ndarray:
        is_on = (ids >= self.note_on) & (ids < self.note_on + self.n_pitches)
        return ids[is_on] - self.note_on

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        for b, i in enumerate(next_ids.tolist()):
            if self.note_on <= i < self.note_on + self.n_pitches:
                self.lines[b].append(i - self.note_on)
                self.bonus[b] = None  # the line moved on: its next pitches change

    def next_intervals(self, b: int) -> Counter:
        """How often each interval followed the seed's line where it matches the end of row b's line, at the
        longest order that matches; empty when nothing matches."""
        seed, line = self.seed[b], self.lines[b]
        if len(seed) < 2 or len(line) < 2:
            return Counter()
        recent = np.diff(np.asarray(line[-self.max_order - 1:], dtype=np.int64))  # (<= max_order,)
        for order in range(min(self.max_order, len(recent), len(seed) - 1), 0, -1):
            windows = np.lib.stride_tricks.sliding_window_view(seed[:-1], order)  # (S-1-order, order)
            hits = np.flatnonzero((windows == recent[-order:]).all(axis=1))
            if len(hits):
                return Counter(seed[hits + order].tolist())
        return Counter()

    def _row_bonus(self, b: int) -> np.ndarray:
        if self.bonus[b] is None:
            bonus = np.zeros(self.n_pitches, dtype=np.float32)
            counts = self.next_intervals(b)
            total = sum(counts.values())
            for step, n in counts.items():
                pitch = self.lines[b][-1] + step
                if 0 <= pitch < self.n_pitches and self.in_key[b][pitch]:
                    bonus[pitch] += self.strength * n / total
            self.bonus[b] = bonus
        return self.bonus[b]

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V) with the NOTE_ON block leaning toward the seed's continuations, its total kept."""
        if self.strength == 0:
            return logits
        bonus = np.stack([self._row_bonus(b) for b in range(logits.shape[0])])  # (B, n_pitches)
        if not bonus.any():
            return logits
        ons = slice(self.note_on, self.note_on + self.n_pitches)
        old = logits[:, ons]  # (B, n_pitches)
        new = old + like_logits(torch.from_numpy(bonus), logits)
        keep = torch.logsumexp(old, dim=1, keepdim=True) - torch.logsumexp(new, dim=1, keepdim=True)  # (B, 1)
        out = logits.clone()
        out[:, ons] = torch.where(torch.isfinite(keep), new + keep, old)  # a row with no NOTE_ON allowed: as it was
        return out


@dataclass
class NoteEchoOptions:
    strength: float = strength_option(2.5, (
        "the logit bonus of a next note that goes on as the seed went on from the same last intervals; 0: off"))


def _make(inputs: HookInputs, o: NoteEchoOptions) -> NoteEcho | None:
    return NoteEcho(inputs.tokenizer, o.strength) if o.strength else None


SPEC = HookSpec("note_echo", NoteEchoOptions, ("performance",), ("continue",), _make,
                "a piano continuation's next note leans toward the seed's continuations of its last intervals")
