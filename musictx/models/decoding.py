"""Incremental decoding pieces for the attention layers: a growing KV cache and the one-query kernel.

During generation each step feeds one token. Two things then dominate the cost if done naively:
copying the whole cache every step (``torch.cat``) and running the single query through the training
kernels, which rebuild tables sized for many queries. `KVCache` writes in place into buffers that grow
by doubling, and `attend_relative_one_query` touches nothing bigger than (B, H, 1, max_rel_dist).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


class KVCache:
    """Keys and values of every token fed so far to one attention layer.

    Positions are counted from the first cached token: a fresh cache fed the last L-k tokens of a piece
    gives those tokens the same relative distances as before, which is what sliding-window generation
    needs. `append` mutates the cache in place; ``capacity`` (e.g. the model's context) is allocated on
    the first append so that later appends never reallocate.
    """

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity
        self._k: Tensor | None = None  # (B, H, allocated, D)
        self._v: Tensor | None = None
        self.n = 0
        self.rel_table: Tensor | None = None  # `decode_table` of the layer, built on its first decoding step

    @property
    def length(self) -> int:
        return self.n

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, :, : self.n]  # (B, H, n, D) view

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, :, : self.n]

    def _grow(self, like: Tensor, need: int) -> None:
        allocated = 0 if self._k is None else self._k.shape[2]
        size = max(need, self.capacity or 0, 2 * allocated, 16)
        B, H, _, D = like.shape
        k, v = like.new_empty(B, H, size, D), like.new_empty(B, H, size, D)
        if self.n:
            k[:, :, : self.n], v[:, :, : self.n] = self.k, self.v
        self._k, self._v = k, v

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new keys/values (B, H, t_new, D); return all cached keys and values (views)."""
        need = self.n + k.shape[2]
        if self._k is None or need > self._k.shape[2]:
            self._grow(k, need)
        self._k[:, :, self.n : need] = k
        self._v[:, :, self.n : need] = v
        self.n = need
        return self.k, self.v


def decode_table(rel_emb: Tensor, length: int) -> Tensor:
    """(H, length, D): row r holds E[min(r, M - 1)], the clipped table out to distance length - 1.

    Built once per cache rather than clipping (a (H, Tk, D) copy) at every step; the table only changes
    between generations."""
    dist = torch.arange(length, device=rel_emb.device).clamp_(max=rel_emb.shape[1] - 1)
    return rel_emb.index_select(1, dist)


def decode_attention(q: Tensor, cache: KVCache, table: Tensor) -> Tensor:
    """One query per sample against every cached key: q (B, H, D) -> (B, H * D).

    The decoding step's few large ops: the keys and values stay in the cache's buffers (viewed as
    (B*H, allocated, D)), the relative term is one batched matmul against `decode_table`'s first Tk rows,
    flipped onto the keys (key j is at distance Tk - 1 - j) and added in place. The same arithmetic on
    the same operand layouts as `attend_relative_one_query` over `clipped_table`, so the results, and
    the sampled ids, are bit for bit the same."""
    B, H, D = q.shape
    t_k, allocated = cache.n, cache._k.shape[2]
    keys = cache._k.view(B * H, allocated, D)[:, :t_k]
    logits = torch.bmm(q.reshape(B * H, 1, D), keys.transpose(1, 2))  # (B*H, 1, Tk)
    # heads first: the batch shares each head's table instead of a broadcast copy per sample
    rel = torch.bmm(q.transpose(0, 1), table[:, :t_k].transpose(1, 2))  # (H, B, Tk), distance 0..
    logits.view(B, H, t_k).add_(rel.transpose(0, 1).flip(-1))
    probs = logits.mul_(1.0 / math.sqrt(D)).softmax(dim=-1)
    return torch.bmm(probs, cache._v.view(B * H, allocated, D)[:, :t_k]).view(B, H * D)


def attend_relative_one_query(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor) -> Tensor:
    """Relative attention of the last position only: q (B, H, 1, D), k and v (B, H, T, D) -> (B, H, 1, D).

    The same function as the training kernels (S_rel[j] = q . E[T-1-j] for distances below M): q @ E^T
    over the distances, flipped onto the keys. The last query sees every key, so no mask is needed.
    """
    t_k, d_head = k.shape[2], q.shape[-1]
    n_dist = min(rel_emb.shape[1], t_k)
    logits = q @ k.transpose(-1, -2)  # (B, H, 1, Tk)
    # Heads first, so that the batch shares each head's table instead of a broadcast copy per sample.
    rel = q.squeeze(2).transpose(0, 1) @ rel_emb[:, :n_dist].transpose(-1, -2)  # (H, B, n_dist), distance 0..
    logits[..., t_k - n_dist :] += rel.transpose(0, 1).unsqueeze(2).flip(-1)  # key Tk-1-d is at distance d
    return (logits * (1.0 / math.sqrt(d_head))).softmax(dim=-1) @ v
