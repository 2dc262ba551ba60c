"""A model's NLL on a small fixed sample of MIDI files: the first ``tokens_per_file`` tokens of each,
scored in one window. The shipped model's card records the figure so that a test can check that the
weights a user installed still give it (a quick fingerprint of the model, not a benchmark)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from musictx.evaluation.scoring import score_pieces


def sample_nll(net: torch.nn.Module, tokenizer, files: list[str | Path], tokens_per_file: int = 1024) -> dict:
    """{"nll", "tokens", ...} over the first ``tokens_per_file`` tokens of each file (each its own piece)."""
    pieces = [np.asarray(tokenizer.encode(f), dtype=np.int64)[: tokens_per_file] for f in files]
    lengths = np.array([len(p) for p in pieces])
    totals = score_pieces(net, lambda i: pieces[i], len(pieces), lengths, context=tokens_per_file,
                          stride=tokens_per_file, batch_size=len(pieces), pad_id=tokenizer.pad_id,
                          device=next(net.parameters()).device, progress=False)
    return totals.as_dict()
