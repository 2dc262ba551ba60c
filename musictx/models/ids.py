"""The one check of what a model is fed: ids (B, T) of whole numbers inside its vocabulary. Torch only.

Without it a 1-D row failed as 'tuple index out of range' in the Transformers and ran silently in the LSTM
(nn.LSTM reads a 2-D input as one unbatched sequence: logits (T, V), no batch), float ids failed inside the
embedding, an id outside the vocabulary as 'index out of range in self', and an empty batch as a division by
zero in the attention kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor


def check_ids(ids: Tensor, vocab_size: int, values: bool = True) -> None:
    """Raise (TypeError, ValueError) naming ``ids`` and what is wrong. ``values``: read the ids themselves too,
    which happens only on the CPU and outside ``torch.compile`` (on a GPU the read would make every forward wait
    for the device; there the embedding still stops on them); decoding steps skip it, their ids drawn from the
    net's own logits."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"ids must be a torch.Tensor (B, T) of token ids, got {type(ids).__name__}")
    if ids.ndim != 2:
        raise ValueError(f"ids must be (B, T) token ids, got shape {tuple(ids.shape)}; one sequence is ids[None]")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integers (torch.long), got dtype {ids.dtype}")
    if ids.shape[0] == 0:
        raise ValueError(f"ids has no rows (shape {tuple(ids.shape)}): nothing to run")
    if values and ids.numel() and ids.device.type == "cpu" and not torch.compiler.is_compiling():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"ids hold {bad}, outside the model's vocabulary of size {vocab_size} (ids of "
                             "another tokenizer?)")
