"""The pieces of a batch-1 decoding step: a cache laid out for one-row reads, the four-op attention and the
operand layouts that CPU matrix-vector products run fastest on.

At batch 1 a step is a few dozen tiny ops, and each op's fixed cost counts as much as its arithmetic:
`decode_attention` is four ops on operands laid out for it ahead of the steps: `decode_table` once per
decoder, `StepKVCache.keys_t` / ``values`` once per buffer.
"""

from __future__ import annotations

import math
import threading
from contextlib import nullcontext

import torch
from torch import Tensor

from musictx.models.kv_cache import KVCache


class StepKVCache(KVCache):
    """A `KVCache` whose keys and values share one (2, B*H, allocated, D) buffer, with the views that a
    decoding step reads made once per buffer rather than once per step: ``keys_t`` (B*H, D, allocated)
    and ``values`` (B*H, allocated, D). The general forward appends to it as to any KVCache."""

    def __init__(self, capacity: int | None = None):
        super().__init__(capacity)
        self._pairs: Tensor | None = None  # (2, B*H, allocated, D): keys, then values
        self.keys_t: Tensor | None = None
        self.values: Tensor | None = None

    def _allocate(self, like: Tensor, size: int) -> tuple[Tensor, Tensor]:
        B, H, _, D = like.shape
        pairs = like.new_empty(2, B * H, size, D)
        self._pairs, self.keys_t, self.values = pairs, pairs[0].transpose(1, 2), pairs[1]
        return pairs[0].view(B, H, size, D), pairs[1].view(B, H, size, D)

    def push_one(self, k: Tensor, v: Tensor) -> None:
        """Add one key and value per sample and head, (B, H, D) each, in place: `append` for a step that
        reads the buffers itself (no views returned)."""
        self._make_room(k[:, :, None])
        self._k.select(2, self.n).copy_(k)
        self._v.select(2, self.n).copy_(v)
        self.n += 1

    def push_pair(self, pairs: Tensor) -> None:
        """`push_one` at batch 1 in one copy, of one entry or several: ``pairs`` (2, H, t, D) holds the new keys
        of each head, then the values (a view of the pass's projections)."""
        t = pairs.shape[2]
        if self._k is None or self.n + t > self._k.shape[2]:  # checked here: the shape's view is made only to grow
            self._grow(pairs[0].unsqueeze(0), self.n + t)
        self._pairs.narrow(2, self.n, t).copy_(pairs)
        self.n += t

    def _make_room(self, like: Tensor, new: int = 1) -> None:
        """Grow the buffers where ``new`` more entries would not fit; ``like`` (B, H, ., D) gives their shape."""
        if self._k is None or self.n + new > self._k.shape[2]:
            self._grow(like, self.n + new)


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
    """A Linear's weight (out, in) as the (in, out) right operand of ``x @ W`` for a step's one-row
    products, in the layout that CPU matrix-vector products (MKL) run fastest on: a row-major (in, out)
    copy when in <= out, the parameter's own rows (a transposed view, no copy) when in > out."""
    n_out, n_in = weight.shape
    return weight.t() if n_in > n_out else weight.t().contiguous()


def decode_table(rel_emb: Tensor) -> Tensor:
    """(H, D, M): column c holds E[M - 1 - c], the table of `rel_emb` (H, M, D) laid out for
    `decode_attention`.

    The columns run from the farthest distance, M - 1, to distance 0, in the order of the cached keys, so
    the last Tk columns line up with Tk keys (key j is at distance Tk - 1 - j) without a flip; and it is
    transposed, so q . E is a plain row-times-matrix product."""
    return rel_emb.flip(1).transpose(1, 2).contiguous()


def decode_attention(q_heads: Tensor, cache: StepKVCache, table: Tensor) -> Tensor:
    """One query per sample against every cached key: q_heads (H, B, D), heads first -> (B, H * D).

    Four ops: the relative term as one batched matmul against the last Tk columns of `decode_table`
    (heads first: the batch shares each head's table), the keys' term added to it by ``baddbmm`` straight
    from the cache's buffer with the 1/sqrt(D) scale as the op's own factors, then the softmax and the
    weighted values. The function of `musictx.models.attention.attend_relative_one_query` up to float
    rounding.

    Past the table (Tk > M keys), distances clip to M - 1: the keys that far all get the term of the
    table's first column, so the product runs over M columns only and that term is repeated, rather than
    reading a column per key (a step is bound by the bytes it reads)."""
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


def relative_table_for(table: Tensor, t_k: int) -> Tensor:
    """The (H, D, Tk) columns of `decode_table` for keys at distances Tk - 1 .. 0; past the table's M
    distances, its farthest column repeated (distances clip to M - 1)."""
    n_dist = table.shape[2]
    if t_k <= n_dist:
        return table.narrow(2, n_dist - t_k, t_k)
    return torch.cat([table[:, :, :1].expand(-1, -1, t_k - n_dist), table], dim=2)


def shifted_to_each_query(rel: Tensor) -> Tensor:
    """The relative term of the last ``t`` tokens' queries, rel (N, t, Tk), each row computed as for the last query
    (column c: distance Tk - 1 - c), shifted to its own: row i sits ``t - 1 - i`` tokens before the last, so its
    columns move left by that much, and those that fall off the end, the keys after it, are -inf."""
    n, t, t_k = rel.shape
    rel = torch.constant_pad_nd(rel, (0, t), float("-inf"))  # (N, t, Tk + t)
    width = t_k + t
    # row i starts t - 1 - i columns in: element (i, j) is column j + t - 1 - i of the padded row i
    return rel.as_strided((n, t, t_k), (t * width, width - 1, 1), t - 1)


def catch_up_attention(q: Tensor, cache: StepKVCache, table: Tensor) -> Tensor:
    """The last ``t`` cached tokens' queries q (B, H, t, D) against every cached key (theirs already pushed),
    each seeing only the keys up to its own -> (B, t, H * D): `decode_attention` for several new tokens of
    one cache at once (a branch catching up on the ids it skipped).

    Query i sits ``t - 1 - i`` tokens before the last, so its relative term is the last query's columns
    shifted left by that much: one product against the table, then a strided view does the shift (the
    columns that fall off the end are the keys after the query, masked)."""
    B, H, t, D = q.shape
    t_k = cache.n
    q_heads = q.transpose(0, 1).reshape(H, B * t, D)
    rel = torch.bmm(q_heads, relative_table_for(table, t_k))  # (H, B * t, Tk): distance Tk - 1 - column
    rel = shifted_to_each_query(rel.view(H * B, t, t_k))
    rel = rel.reshape(H, B, t, t_k).transpose(0, 1).reshape(B * H, t, t_k)
    scale = 1.0 / math.sqrt(D)
    logits = torch.baddbmm(rel, q.reshape(B * H, t, D), cache.keys_t.narrow(2, 0, t_k), beta=scale, alpha=scale)
    out = torch.bmm(logits.softmax(dim=-1), cache.values.narrow(1, 0, t_k))  # (B*H, t, D)
    return out.view(B, H, t, D).transpose(1, 2).reshape(B, t, H * D)


def catch_up_one_sample(q_k_v: Tensor, cache: StepKVCache, table: Tensor) -> Tensor:
    """`catch_up_attention` at batch 1 from the projections as they come, q_k_v (3, H, t, D) (a view of the pass's
    rows): the keys and values go in with one copy, and the queries stay heads first, which saves the
    batch's reshapes -> (t, H * D)."""
    _, H, t, D = q_k_v.shape
    cache.push_pair(q_k_v[1:])
    t_k = cache.n
    q = q_k_v[0]  # (H, t, D)
    rel = shifted_to_each_query(torch.bmm(q, relative_table_for(table, t_k)))  # (H, t, Tk)
    scale = 1.0 / math.sqrt(D)
    logits = torch.baddbmm(rel, q, cache.keys_t.narrow(2, 0, t_k), beta=scale, alpha=scale)  # (H, t, Tk)
    out = torch.bmm(logits.softmax(dim=-1), cache.values.narrow(1, 0, t_k))  # (H, t, D)
    return out.transpose(0, 1).reshape(t, H * D)
