"""Incremental decoding pieces for the attention layers: a growing KV cache and the one-query kernel.

During generation each step feeds one token. Two things then dominate the cost if done naively:
copying the whole cache every step (``torch.cat``) and running the single query through the training
kernels, which rebuild tables sized for many queries. `KVCache` writes in place into buffers that grow
by doubling, and `attend_relative_one_query` touches nothing bigger than (B, H, 1, max_rel_dist).

At batch 1 a step is a few dozen tiny ops, and each op's fixed cost counts as much as its arithmetic:
`decode_attention` (the models' fast decoding path) is four ops on operands laid out for it ahead of the
steps: `decode_table` once per model, `KVCache.keys_t` / ``values`` once per buffer.
"""

from __future__ import annotations

import math
import threading
from contextlib import nullcontext

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
        self._pairs: Tensor | None = None  # (2, B*H, allocated, D): both, one buffer (`push_pair`)
        self.n = 0
        self.keys_t: Tensor | None = None  # views of the buffers for `decode_attention`, made by `_grow`
        self.values: Tensor | None = None

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
        pairs = like.new_empty(2, B * H, size, D)
        k, v = pairs[0].view(B, H, size, D), pairs[1].view(B, H, size, D)
        if self.n:
            k[:, :, : self.n], v[:, :, : self.n] = self.k, self.v
        self._k, self._v, self._pairs = k, v, pairs
        # the buffers as `decode_attention` reads them, made once: (B*H, D, allocated) and (B*H, allocated, D)
        self.keys_t, self.values = pairs[0].transpose(1, 2), pairs[1]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new keys/values (B, H, t_new, D); return all cached keys and values (views)."""
        need = self.n + k.shape[2]
        if self._k is None or need > self._k.shape[2]:
            self._grow(k, need)
        self._k[:, :, self.n : need] = k
        self._v[:, :, self.n : need] = v
        self.n = need
        return self.k, self.v

    def push_one(self, k: Tensor, v: Tensor) -> None:
        """Add one key and value per sample and head, (B, H, D) each, in place: `append` for a decoding
        step that reads the buffers itself (no views returned)."""
        self._make_room_for_one(k[:, :, None])
        self._k.select(2, self.n).copy_(k)
        self._v.select(2, self.n).copy_(v)
        self.n += 1

    def push_pair(self, pair: Tensor) -> None:
        """`push_one` at batch 1 in one copy: ``pair`` (2, H, 1, D) holds the new key and value of each head
        (a view of the step's projections)."""
        self._make_room_for_one(pair[0].unsqueeze(0))
        self._pairs.narrow(2, self.n, 1).copy_(pair)
        self.n += 1

    def _make_room_for_one(self, like: Tensor) -> None:
        """Grow the buffers when they are full; ``like`` (B, H, 1, D) gives the shape of a new entry."""
        if self._k is None or self.n == self._k.shape[2]:
            self._grow(like, self.n + 1)


class _OneDNNOff:
    """oneDNN off while any thread is inside, back to what it was once the last one leaves. The flag is
    process-wide: two threads that each put back what they had read could leave it off for good."""

    def __init__(self):
        self.lock, self.depth, self.saved = threading.Lock(), 0, True

    def __enter__(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.saved = torch.backends.mkldnn.enabled
            self.depth += 1
            torch.backends.mkldnn.enabled = False

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                torch.backends.mkldnn.enabled = self.saved


_ONEDNN_OFF = _OneDNNOff()


def without_onednn(wanted: bool):
    """A context for a decoding step: oneDNN off when ``wanted`` (fp32 steps: on one-row inputs its GELU
    is several times slower than ATen's own kernel, and no other fp32 op of the step reaches it), else
    nothing. Safe when several threads decode at once."""
    return _ONEDNN_OFF if wanted else nullcontext()


def matvec_operand(weight: Tensor) -> Tensor:
    """A Linear's weight (out, in) as the (in, out) right operand of ``x @ W`` for a decoding step's one-row
    products, in the layout that CPU matrix-vector products (MKL) run fastest on: a row-major (in, out)
    copy when in <= out, the parameter's own rows (a transposed view, no copy) when in > out: each layout
    wins on its side, timed cache-cold as between decoding steps."""
    n_out, n_in = weight.shape
    return weight.t() if n_in > n_out else weight.t().contiguous()


def decode_table(rel_emb: Tensor) -> Tensor:
    """(H, D, M): column c holds E[M - 1 - c], the table of `rel_emb` (H, M, D) laid out for
    `decode_attention`.

    The columns run from the farthest distance, M - 1, to distance 0, in the order of the cached keys, so
    the last Tk columns line up with Tk keys (key j is at distance Tk - 1 - j) without a flip; and it is
    transposed, so q . E is a plain row-times-matrix product. Built once, not at every step."""
    return rel_emb.flip(1).transpose(1, 2).contiguous()


def decode_attention(q_heads: Tensor, cache: KVCache, table: Tensor) -> Tensor:
    """One query per sample against every cached key: q_heads (H, B, D), heads first -> (B, H * D).

    The decoding step in four ops: the relative term as one batched matmul against the last Tk columns of
    `decode_table` (heads first: the batch shares each head's table), the keys' term added to it by
    ``baddbmm`` straight from the cache's buffer, with the 1/sqrt(D) scale as the op's own factors, then
    the softmax and the weighted values. The same function as `attend_relative_one_query` up to float
    rounding; every op counts at batch 1, so views are taken once (`KVCache.keys_t`, ``values``).

    Past the table (Tk > M keys), distances clip to M - 1: the keys that far all get the term of the
    table's first column, so the product runs over M columns only and that term is repeated, rather than
    reading a column per key (the steps are bound by the bytes they read: at Tk = 2048 and M = 512 this
    reads a quarter of the table's bytes for the same result)."""
    H, B, D = q_heads.shape
    t_k, n_dist = cache.n, table.shape[2]
    if t_k <= n_dist:
        rel = torch.bmm(q_heads, table.narrow(2, n_dist - t_k, t_k))  # (H, B, Tk), in key order
    else:
        near = torch.bmm(q_heads, table)  # (H, B, M): the last M keys, from distance M - 1 to 0
        rel = torch.cat([near[:, :, :1].expand(H, B, t_k - n_dist), near], dim=2)  # (H, B, Tk)
    if B > 1:  # sample-major rows for the keys' term; at B = 1 (H, 1, .) already is
        q_heads, rel = q_heads.transpose(0, 1).reshape(B * H, 1, D), rel.transpose(0, 1).reshape(B * H, 1, t_k)
    scale = 1.0 / math.sqrt(D)
    logits = torch.baddbmm(rel, q_heads, cache.keys_t.narrow(2, 0, t_k), beta=scale, alpha=scale)  # (B*H, 1, Tk)
    return torch.bmm(logits.softmax(dim=-1), cache.values.narrow(1, 0, t_k)).view(B, H * D)


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
