"""The windows of a prepared dataset's split (see `musictx.io.token_store`), each L + 1 ids.

- `RandomWindows` (train): window ``g`` (a global window number) is drawn by an rng seeded with
  ``(seed, g)``: a piece is chosen with probability proportional to its length (which is the same as
  choosing a token uniformly over the split and taking its piece), then a start uniformly among the
  starts that keep ``L + 1`` tokens inside the piece (start 0 when the piece is shorter). Because a
  window depends only on ``(seed, g)``, the stream is the same for any number of workers, and
  resuming is skipping to the right ``g``. Augmentation (transposition, time stretch) and the recall
  curriculum (`musictx.training.recall_windows`: an earlier passage repeated later in the window) are
  drawn from the same rng.
- `FixedWindows` (validation / test): consecutive windows of ``L + 1`` tokens starting at ``0, L, 2L``
  ... of every piece, so each token but the first of a piece is a target exactly once.
- A window that runs past the end of its piece is padded with PAD; PAD targets are left out of the loss.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from musictx.io.token_store import TokenArrays
from musictx.io.tokenizer import EventTokenizer
from musictx.training.augment import augment_ids
from musictx.training.infill_windows import InfillCurriculum
from musictx.training.recall_windows import RecallCurriculum

# Augmented slices are taken this much longer than the window (plus a few tokens), so that a stretch
# by 0.95 or notes dropped by transposition still leave L + 1 tokens to crop.
AUGMENT_MARGIN = 0.15


def slice_length(n: int, stretch_low: float) -> int:
    """Ids to read for a window of ``n`` after augmentation: the margin above, and in proportion more
    when the stretch may compress further than 0.95 (``data.mix.stretch_range`` for tempo variety)."""
    return int(n * (1 + AUGMENT_MARGIN) * max(1.0, 0.95 / stretch_low)) + 8


def pad_to(ids: np.ndarray, n: int, pad_id: int) -> np.ndarray:
    """The first ``n`` ids, right-padded with ``pad_id`` when there are fewer."""
    out = np.full(n, pad_id, dtype=np.int64)
    ids = ids[:n]
    out[: len(ids)] = ids
    return out


def to_xy(window: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of a window of L + 1 ids: inputs and next-token targets, both (L,)."""
    w = torch.from_numpy(window)
    return w[:-1], w[1:]


class _SplitDataset(Dataset):
    """Opens its split lazily in each process, so that worker processes never pickle a memmap."""

    def __init__(self, data_dir: str | os.PathLike, split: str, seq_len: int, tokenizer: EventTokenizer):
        self.data_dir, self.split, self.seq_len, self.tok = Path(data_dir), split, seq_len, tokenizer
        self._arrays: TokenArrays | None = None

    @property
    def arrays(self) -> TokenArrays:
        if self._arrays is None:
            self._arrays = TokenArrays(self.data_dir, self.split)
        return self._arrays

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_arrays": None}


class RandomWindows(_SplitDataset):
    """Train windows, indexed by a global window number ``g`` (any int >= 0); see the module docstring."""

    def __init__(self, data_dir, split, seq_len, tokenizer, seed: int = 0, augment: bool = True,
                 max_transpose: int = 3, stretch_range: tuple[float, float] = (0.95, 1.05),
                 recall: RecallCurriculum | None = None, velocity_shift: int = 0,
                 infill: InfillCurriculum | None = None):
        super().__init__(data_dir, split, seq_len, tokenizer)
        self.seed, self.augment = seed, augment
        self.max_transpose, self.stretch_range = max_transpose, tuple(stretch_range)
        self.velocity_shift = velocity_shift
        self.recall = recall or RecallCurriculum()
        self.infill = infill or InfillCurriculum()

    def window(self, g: int) -> np.ndarray:
        """The L + 1 ids of window ``g`` (int64, PAD-padded)."""
        arr, n = self.arrays, self.seq_len + 1
        rng = np.random.default_rng((self.seed, g))
        # A token uniform over the split picks its piece with probability proportional to its length.
        piece = int(np.searchsorted(arr.offsets, rng.integers(arr.num_tokens), side="right")) - 1
        lo, hi = int(arr.offsets[piece]), int(arr.offsets[piece + 1])
        start = lo + int(rng.integers(max(hi - lo - n, 0) + 1))
        if not self.augment:
            ids = np.asarray(arr.tokens[start:min(start + n, hi)], dtype=np.int64)
        else:
            longer = slice_length(n, self.stretch_range[0])
            ids = np.asarray(arr.tokens[start:min(start + longer, hi)], dtype=np.int64)
            ids = augment_ids(ids, self.tok, rng, self.max_transpose, self.stretch_range, self.velocity_shift)
        # drawn after augmentation, so a run with prob 0 sees exactly the windows it saw before
        ids = self.recall.apply(ids, n, self.tok, rng)
        return pad_to(self.infill.apply(ids, n, self.tok, rng), n, self.tok.pad_id)  # no draw at prob 0

    def __getitem__(self, g: int) -> tuple[torch.Tensor, torch.Tensor]:
        return to_xy(self.window(int(g)))


class FixedWindows(_SplitDataset):
    """Validation / test windows: each piece cut at 0, L, 2L, ... into windows of L + 1 ids."""

    def __init__(self, data_dir, split, seq_len, tokenizer):
        super().__init__(data_dir, split, seq_len, tokenizer)
        lengths = self.arrays.lengths
        # A piece of n ids has n - 1 targets, covered by ceil((n - 1) / L) windows (at least one).
        counts = np.maximum(-(-(lengths - 1) // seq_len), 1)
        piece = np.repeat(np.arange(len(lengths)), counts)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        k = np.arange(len(piece)) - np.repeat(first, counts)
        self.starts = self.arrays.offsets[piece] + k * seq_len  # (n_windows,) absolute start
        self.ends = self.arrays.offsets[piece + 1]  # (n_windows,) end of the window's piece

    def __len__(self) -> int:
        return len(self.starts)

    def window(self, i: int) -> np.ndarray:
        n, start = self.seq_len + 1, int(self.starts[i])
        ids = np.asarray(self.arrays.tokens[start:min(start + n, int(self.ends[i]))], dtype=np.int64)
        return pad_to(ids, n, self.tok.pad_id)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return to_xy(self.window(int(i)))
