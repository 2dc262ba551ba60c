"""One id sequence as the tokenizers' decoders take it, checked before any id is read. No torch.

``decode`` once flattened whatever it was given: a batch of samples (B, T) became one piece, their notes laid
end to end, and float ids were cut to whole numbers without a word. A sampler's (1, T) output is still taken
as it is.
"""

from __future__ import annotations

import numpy as np


def id_row(ids, vocab_size: int | None = None) -> np.ndarray:
    """``ids`` (a list, an array or a CPU tensor of shape (T,) or (1, T)) as a (T,) int64 array. ValueError for
    a batch of several rows, an id that is not a whole number, or (with ``vocab_size``) one outside
    0..vocab_size-1, naming its position."""
    arr = np.asarray(ids)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    elif arr.ndim > 1:
        raise ValueError(f"ids must be one sequence, shape (T,) or (1, T); got shape {tuple(arr.shape)}: "
                         "decode each row of a batch on its own")
    arr = arr.reshape(-1)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        try:
            values = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"ids must be whole numbers (token ids); got an array of {arr.dtype}") from None
        broken = np.flatnonzero(~(np.isfinite(values) & (values == np.round(values))))
        if len(broken):
            k = int(broken[0])
            raise ValueError(f"ids must be whole numbers (token ids); got {float(values[k])!r} at position {k}")
    out = arr.astype(np.int64)
    if vocab_size is not None:
        bad = np.flatnonzero((out < 0) | (out >= vocab_size))
        if len(bad):
            k = int(bad[0])
            raise ValueError(f"id {int(out[k])} at position {k} outside the vocabulary of size {vocab_size} "
                             "(ids of another tokenizer?)")
    return out
