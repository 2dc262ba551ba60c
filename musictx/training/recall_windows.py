"""The recall curriculum (train split only, like augmentation): an earlier passage of a window is played
again later in the same window, so that the loss rewards using what the model has already heard.

Performed piano rarely repeats itself literally inside a 1024-token window, so a model trained on it alone
learns that looking far back does not pay: a repeat is then predicted hardly better than new music. In
a recall window some passage ``A`` (``min_len``..``max_len`` tokens) is inserted again after a gap drawn
uniformly over the whole window, as itself, transposed (a motif moved to another key) or slightly
re-timed (a motif played a little faster or slower). The rest of the window is the piece as it was, so
ordinary prediction is still most of the loss. numpy only; the rng is the window's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from musictx.io.token_edits import stretch_ids, transpose_ids
from musictx.io.tokenizer import EventTokenizer


@dataclass(frozen=True)
class RecallCurriculum:
    """How often and how a window gets a repeat. ``prob`` 0 turns the curriculum off.

    Args:
        prob: share of train windows that get a repeat.
        min_len, max_len: the repeated passage's length in tokens (uniform).
        transpose_prob: share of repeats moved by 1..max_transpose semitones, up or down.
        stretch_prob: share of repeats re-timed by a factor in ``stretch_range``.
        repeats: a recall window gets 1..repeats repeats (uniform), each of its own passage and gap, so
            that more of the window rewards recall ("bursty" data, which brings in-context copying on
            earlier in language models).
        loop_prob: share of repeats played as a loop: the passage three times back to back (A A A). With a
            gap, what follows a repeat's end is the filler again, so the data never rewards *starting* the
            passage once it has been heard through; in a loop, the third A begins where the second began
            after the first, which is what continuing a seed that plays its phrase twice asks for.
    """

    prob: float = 0.0
    min_len: int = 64
    max_len: int = 256
    transpose_prob: float = 0.25
    max_transpose: int = 3
    stretch_prob: float = 0.15
    stretch_range: tuple[float, float] = (0.9, 1.1)
    repeats: int = 1
    loop_prob: float = 0.0

    def __post_init__(self):
        if not 0.0 <= self.prob <= 1.0:
            raise ValueError(f"data.recall.prob must be in [0, 1], got {self.prob!r}")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"data.recall needs 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}")
        if self.repeats < 1:
            raise ValueError(f"data.recall.repeats must be >= 1, got {self.repeats!r}")
        for name in ("transpose_prob", "stretch_prob", "loop_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"data.recall.{name} must be in [0, 1], got {getattr(self, name)!r}")

    def check_fits(self, seq_len: int) -> None:
        """A window must hold a passage, its repeat and one more token."""
        copies = 3 if self.loop_prob > 0 else 2
        if copies * self.max_len + 1 > seq_len + 1 and self.prob > 0:
            raise ValueError(f"data.recall.max_len={self.max_len}: a passage and its {copies - 1} repeat(s) do "
                             f"not fit in data.seq_len={seq_len}; use max_len <= {seq_len // copies}")

    def apply(self, ids: np.ndarray, n: int, tok: EventTokenizer, rng: np.random.Generator) -> np.ndarray:
        """``ids`` (at least ``n`` of them, else returned as is) with a repeat inserted, drawn by ``rng``."""
        if self.prob == 0.0 or rng.random() >= self.prob or len(ids) < n:
            return ids
        count = int(rng.integers(1, self.repeats + 1)) if self.repeats > 1 else 1  # no draw: streams of 1 stay
        for _ in range(count):
            ids = self._insert_repeat(ids, n, tok, rng)
        return ids

    def _insert_repeat(self, ids: np.ndarray, n: int, tok: EventTokenizer, rng: np.random.Generator) -> np.ndarray:
        """One passage of the first ``n`` ids played again later among them (what follows is pushed on)."""
        if tok.kind != "performance":
            return self._insert_bars(ids, n, tok, rng)
        length = int(rng.integers(self.min_len, self.max_len + 1))
        if self.loop_prob > 0 and rng.random() < self.loop_prob:  # no draw at 0: the windows stay as they were
            src = int(rng.integers(0, n - 3 * length + 1))
            at, again = src + length, self.variant(ids[src:src + length], tok, rng)
            return np.concatenate([ids[:at], again, again, ids[at:]])
        gap = int(rng.integers(0, n - 2 * length + 1))  # tokens between the passage's end and the repeat
        src = int(rng.integers(0, n - 2 * length - gap + 1))
        at = src + length + gap
        return np.concatenate([ids[:at], self.variant(ids[src:src + length], tok, rng), ids[at:]])

    def _insert_bars(self, ids: np.ndarray, n: int, tok, rng: np.random.Generator) -> np.ndarray:
        """The metrical form: whole bars (from a Bar id to the next) played again from a later bar line, as a
        chorus comes back; a passage of ``min_len``..``max_len`` ids where the window's bars allow one."""
        starts = np.flatnonzero(ids[:n] == tok.bar_id)  # (n_bars,) where each bar begins
        if len(starts) < 3:
            return ids
        first = int(rng.integers(0, len(starts) - 2))
        ends = starts[first + 1:]  # candidate ends: the later bar lines
        fits = np.flatnonzero((ends - starts[first] >= self.min_len) & (ends - starts[first] <= self.max_len))
        last = first + 1 + (int(fits[int(rng.integers(len(fits)))]) if len(fits) else 0)  # bars first .. last - 1
        src, end = int(starts[first]), int(starts[last])
        later = starts[last:]  # bar lines at or after the passage's end
        at = int(later[int(rng.integers(0, len(later)))])
        again = self.variant(ids[src:end], tok, rng)
        if self.loop_prob > 0 and rng.random() < self.loop_prob:
            again = np.concatenate([again, again])
        return np.concatenate([ids[:at], again, ids[at:]])

    def variant(self, passage: np.ndarray, tok: EventTokenizer, rng: np.random.Generator) -> np.ndarray:
        """The passage as repeated: exact, transposed and/or re-timed (metrical tokens: time is in beats, so
        only transposed)."""
        out = passage
        if tok.kind != "performance":
            if self.max_transpose and rng.random() < self.transpose_prob:
                step = int(rng.integers(1, self.max_transpose + 1)) * (1 if rng.random() < 0.5 else -1)
                out = tok.transpose_ids(out, step)
            return out
        if self.max_transpose and rng.random() < self.transpose_prob:
            step = int(rng.integers(1, self.max_transpose + 1)) * (1 if rng.random() < 0.5 else -1)
            out = transpose_ids(out, step, tok)
        if rng.random() < self.stretch_prob:
            out = stretch_ids(out, float(rng.uniform(*self.stretch_range)), tok)
        return out
