"""Likelihood of a whole split under a net: every token scored exactly once (torch, no Lightning).

A piece longer than the context is covered by windows that overlap, so each scored token still sees up
to ``context - stride`` tokens of history; only the targets a window adds beyond the previous one are
scored. The first token of a piece has no history and is never a target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from musictx.decoding import eval_mode


@dataclass(frozen=True)
class Window:
    piece: int
    start: int  # first input position in the piece
    length: int  # inputs ids[start:start+length], targets ids[start+1:start+length+1]
    score_from: int  # targets with index >= score_from (within the window) are scored


def plan_windows(n: int, context: int, stride: int, piece: int = 0) -> list[Window]:
    """Windows over a piece of ``n`` tokens whose scored targets are positions 1..n-1, each once."""
    if context < 1 or not 1 <= stride <= context:
        raise ValueError(f"need context >= 1 and 1 <= stride <= context, got context={context}, stride={stride}")
    if n < 2:
        return []
    if n - 1 <= context:
        return [Window(piece, 0, n - 1, 0)]
    windows, scored_until = [], 0  # targets at positions <= scored_until are done
    start = 0
    while scored_until < n - 1:
        start = min(start, n - 1 - context)  # the last window ends exactly at the piece's end
        first_new = scored_until + 1  # absolute position of the first target not yet scored
        windows.append(Window(piece, start, context, first_new - (start + 1)))
        scored_until = start + context
        start += stride
    return windows


@dataclass
class ScoreTotals:
    nll: float = 0.0  # summed negative log-likelihood, nats
    correct: int = 0
    tokens: int = 0

    def as_dict(self) -> dict[str, float]:
        mean = self.nll / max(self.tokens, 1)
        return {"nll": mean, "bits_per_token": mean / math.log(2), "ppl": math.exp(mean),
                "accuracy": self.correct / max(self.tokens, 1), "tokens": self.tokens}


def _batch(pieces, windows: list[Window], context: int, pad_id: int):
    x = np.full((len(windows), context), pad_id, dtype=np.int64)
    y = np.full((len(windows), context), -1, dtype=np.int64)  # -1: not scored
    for row, w in enumerate(windows):
        ids = np.asarray(pieces(w.piece)[w.start:w.start + w.length + 1], dtype=np.int64)
        x[row, :w.length] = ids[:-1]
        y[row, w.score_from:w.length] = ids[1 + w.score_from:]
    return torch.from_numpy(x), torch.from_numpy(y)


@torch.no_grad()
def score_pieces(net: torch.nn.Module, pieces, n_pieces: int, lengths: np.ndarray, context: int,
                 stride: int | None = None, batch_size: int = 8, pad_id: int = 0,
                 device: str | torch.device = "cpu", progress: bool = True) -> ScoreTotals:
    """Score every target of ``n_pieces`` pieces (``pieces(i)`` -> ids) with ``net`` in eval mode
    (`eval_mode`: its train flags put back after)."""
    stride = stride or max(context // 2, 1)
    plan = [w for i in range(n_pieces) for w in plan_windows(int(lengths[i]), context, stride, i)]
    totals = ScoreTotals()
    bar = tqdm(total=sum(w.length - w.score_from for w in plan), desc="score", unit="tok", disable=not progress)
    with eval_mode(net):
        for b in range(0, len(plan), batch_size):
            chunk = plan[b:b + batch_size]
            x, y = _batch(pieces, chunk, context, pad_id)
            x, y = x.to(device), y.to(device)
            logits = net(x).float()  # (B, T, V)
            mask = y >= 0
            logp = F.log_softmax(logits[mask], dim=-1)  # (N, V)
            target = y[mask]
            totals.nll -= float(logp.gather(1, target[:, None]).sum())
            totals.correct += int((logp.argmax(-1) == target).sum())
            totals.tokens += int(mask.sum())
            bar.update(int(mask.sum()))
    bar.close()
    return totals
