"""Causal self-attention: relative (Music Transformer, Huang et al. 2018) and plain, with a KV cache.

Relative logits: S_rel[i, j] = q_i . E[i - j] for 0 <= i - j < max_rel_dist, with one learned table E per
head; longer distances get no relative term. logits = (q.k + S_rel) / sqrt(d_head), causal mask, softmax.

The kernels (scores + relative term + mask + softmax + weighted sum) are free functions apart from the
projections, so `RelativeSelfAttention.impl` can be switched on a live module:
  - "naive":     materialises the (T, T, d_head) table of relative embeddings (Shaw et al.). Reference.
  - "skew":      the paper's skewing trick, O(T * d) extra for the relative term but full T x T logits.
  - "efficient": a flash-style autograd.Function over query blocks; keeps only the output and each row's
                 log-sum-exp, recomputes logits in backward. Never holds a T x T tensor.

All kernels take q (B, H, Tq, D) and k, v (B, H, Tk, D) with Tk >= Tq: the queries are the *last* Tq
positions of the Tk keys. This one convention covers training (Tq == Tk) and cached decoding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from musictx.models.decoding import KVCache, attend_relative_one_query

IMPLS = ("naive", "skew", "efficient")


def causal_allowed(t_q: int, t_k: int, device=None) -> Tensor:
    """Bool (Tq, Tk), True where query i (absolute position t_k - t_q + i) may see key j."""
    offset = t_k - t_q
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril_(offset)


# ---------------------------------------------------------------------------------------------------
# Reference kernels: plain autograd over full T x T logits.


def relative_table(rel_emb: Tensor, t_q: int, t_k: int) -> Tensor:
    """(H, Tq, Tk, D) table holding E[h, i - j] where 0 <= i - j < M, zeros elsewhere."""
    n_rel = rel_emb.shape[1]
    pos_q = torch.arange(t_k - t_q, t_k, device=rel_emb.device)
    dist = pos_q[:, None] - torch.arange(t_k, device=rel_emb.device)[None, :]  # (Tq, Tk)
    valid = (dist >= 0) & (dist < n_rel)
    table = rel_emb[:, dist.clamp(0, n_rel - 1)]  # (H, Tq, Tk, D)
    return table * valid[..., None].to(rel_emb.dtype)


def _softmax_weighted(logits: Tensor, v: Tensor, dropout_p: float) -> Tensor:
    t_q, t_k = logits.shape[-2:]
    logits = logits.masked_fill(~causal_allowed(t_q, t_k, logits.device), float("-inf"))
    probs = F.dropout(logits.softmax(dim=-1), p=dropout_p) if dropout_p > 0 else logits.softmax(dim=-1)
    return probs @ v  # (B, H, Tq, D)


def attend_naive(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0) -> Tensor:
    """Relative attention with the relative embeddings materialised per (i, j) pair. Tests only."""
    table = relative_table(rel_emb, q.shape[2], k.shape[2])
    logits = q @ k.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, table)  # (B, H, Tq, Tk)
    return _softmax_weighted(logits / math.sqrt(q.shape[-1]), v, dropout_p)


def skew_relative_logits(q: Tensor, rel_emb: Tensor, t_k: int) -> Tensor:
    """S_rel (B, H, Tq, Tk) by the paper's skewing trick; entries above the causal diagonal are junk.

    q @ E^T with E ordered by *decreasing* distance puts distance Tk-1-c in column c (after left-padding
    the missing long distances with zeros). Padding one more zero column on the left and re-reading the
    flat buffer with rows of length Tk shifts row a left by Tq-1-a, which lines distance up with key.
    """
    t_q, n_rel = q.shape[2], rel_emb.shape[1]
    n_dist = min(n_rel, t_k)
    qe = q @ rel_emb[:, :n_dist].flip(1).transpose(-1, -2)  # (B, H, Tq, n_dist): distances n_dist-1..0
    padded = F.pad(qe, (t_k - n_dist + 1, 0))  # (B, H, Tq, Tk + 1)
    flat = padded.flatten(-2)  # (B, H, Tq * (Tk + 1))
    return flat[..., t_q : t_q + t_q * t_k].unflatten(-1, (t_q, t_k))


def attend_skew(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0) -> Tensor:
    """Relative attention with the skewing trick (Huang et al. 2018, section 3.4.1)."""
    logits = q @ k.transpose(-1, -2) + skew_relative_logits(q, rel_emb, k.shape[2])  # (B, H, Tq, Tk)
    return _softmax_weighted(logits / math.sqrt(q.shape[-1]), v, dropout_p)


# ---------------------------------------------------------------------------------------------------
# Memory-efficient kernel: blocks of queries, logits recomputed in backward from the saved log-sum-exp.
# Internally batch is folded into heads, head-major: q (HB, Tq, D), k and v (HB, Tk, D), so that a
# block of queries viewed as (H, B*nb, D) meets the per-head distance table in one batched matmul.


def _take(buf: Tensor, *shape: int) -> Tensor:
    """A contiguous (shape) view at the start of a flat scratch buffer.

    Every query block reuses the same few scratch buffers: fresh multi-MiB tensors per block are
    returned to the OS by glibc and page-faulted back in on the next block, which on CPU cost more
    than the matmuls themselves.
    """
    return buf[: math.prod(shape)].view(shape)


def dropout_keep(seed: int, block_start: int, p: float, out: Tensor) -> Tensor:
    """Fill `out` (HB, nb, end) with the 0/1 keep-mask of one query block and return it.

    The mask is a function of (seed, block_start, out's shape, dtype and device) only, so backward can
    draw it again instead of storing it.
    """
    gen = torch.Generator(device=out.device)
    gen.manual_seed(seed + block_start)
    return torch.rand(out.shape, generator=gen, out=out, dtype=out.dtype, device=out.device).ge_(p)


def _distance_table(rel_emb: Tensor, block_size: int) -> Tensor:
    """(H, M + block_size - 1, D): E by *decreasing* distance, led by zero rows for distances >= M.

    A query block's relative window can reach up to block_size - 1 distances past M; the zero rows let
    one matmul cover the whole window, so the long distances come out as exact zeros without padding.
    """
    H, _, D = rel_emb.shape
    return torch.cat([rel_emb.new_zeros(H, block_size - 1, D), rel_emb.flip(1)], dim=1)


def _window_start(start: int, n_rel: int) -> int:
    """First key that has a relative term for some query of a block starting at `start`."""
    return max(0, start - n_rel + 1)


def _block_logits(q_k, kT, qs, tableT, start: int, end: int, n_rel: int, scratch) -> Tensor:
    """Scaled, causally masked logits (HB, nb, end) of the queries at absolute positions start..end-1.

    Content term q_k @ kT (either (nb, D) @ (D, Tk), or with one extra column that subtracts a per-row
    constant for free); relative term from qs (HB, nb, D) by a strided skew: qe[a, c] = q_a . E[W-1-c]
    for the window keys j0..end-1. Query a needs key j0+jj at column c = nb-1-a+jj, so reading qe with
    row stride W-1 from offset nb-1 lines distances up with keys. Reads that run past a row's end land
    on future keys, which the causal mask overwrites.
    """
    HB, nb, D = qs.shape
    H = tableT.shape[0]
    j0 = _window_start(start, n_rel)
    width = end - j0
    qe = _take(scratch["qe"], H, HB // H * nb, width)  # (H, B*nb, W)
    torch.bmm(qs.reshape(H, -1, D), tableT[:, :, tableT.shape[2] - width :], out=qe)
    rel = qe.as_strided((HB, nb, width), (nb * width, width - 1, 1), qe.storage_offset() + nb - 1)
    logits = _take(scratch["logits"], HB, nb, end)
    if j0 == 0:
        torch.baddbmm(rel, q_k, kT[:, :, :end], out=logits)
    else:
        torch.bmm(q_k, kT[:, :, :end], out=logits)
        logits[:, :, j0:] += rel
    masked = torch.ones(nb, nb, dtype=torch.bool, device=qs.device).triu_(1)
    logits[:, :, start:].masked_fill_(masked, float("-inf"))
    return logits


def _block_attend(qs, kT, v, tableT, start, end, n_rel, drop, scratch) -> tuple[Tensor, Tensor]:
    """Output (HB, nb, D) and log-sum-exp (HB, nb) of one query block; `drop` = (keep mask, p) or None."""
    logits = _block_logits(qs, kT, qs, tableT, start, end, n_rel, scratch)
    row_max = logits.amax(dim=-1, keepdim=True)
    probs = logits.sub_(row_max).exp_()  # unnormalised, in the logits buffer
    row_sum = probs.sum(dim=-1, keepdim=True)
    scale = row_sum.reciprocal()  # normalise the (nb, D) output rather than the (nb, end) probabilities
    if drop is not None:
        probs.mul_(drop[0])
        scale = scale / (1 - drop[1])
    out = torch.bmm(probs, v[:, :end]).mul_(scale)  # (HB, nb, D)
    return out, (row_max + row_sum.log()).squeeze(-1)


def _augment(x: Tensor, col: Tensor) -> Tensor:
    """(HB, nb, D) and (HB, nb) -> (HB, nb, D+1); against a row of ones it adds col to every logit."""
    return torch.cat([x, col[:, :, None]], dim=-1)


def _block_grads(saved, qs, dout, lse, row_dot, start, end, drop, grads, scratch) -> Tensor:
    """Accumulate one query block's dk, dv, dtable into `grads`; return its dqs (HB, nb, D).

    kT and vT carry an extra row of ones, so [q, -lse] @ kT gives logits - lse and [dout, -row_dot] @ vT
    gives dP - row_dot straight out of the matmuls.
    """
    k, kT, vT, tableT, n_rel = saved
    dk, dv, dtable = grads
    HB, nb, D = qs.shape
    H = tableT.shape[0]
    probs = _block_logits(_augment(qs, -lse), kT, qs, tableT, start, end, n_rel, scratch).exp_()
    # dlogits go to the (now free) qe scratch with nb-1 leading zeros per head: see the inverse skew
    slab = nb - 1 + nb * end
    buf = _take(scratch["qe"], HB, slab)
    dlogits = buf[:, nb - 1 :].view(HB, nb, end)
    if drop is None:
        torch.bmm(_augment(dout, -row_dot), vT[:, :, :end], out=dlogits)
        dv[:, :end].baddbmm_(probs.transpose(1, 2), dout)
        dlogits.mul_(probs)  # softmax backward: P * (dP - rowsum(P * dP))
    else:
        keep = drop[0].mul_(1 / (1 - drop[1]))
        torch.bmm(dout, vT[:, :D, :end], out=dlogits).mul_(keep).sub_(row_dot[:, :, None])
        dlogits.mul_(probs)
        dv[:, :end].baddbmm_(probs.mul_(keep).transpose(1, 2), dout)
    dqs = torch.bmm(dlogits, k[:, :end])  # (HB, nb, D)
    dk[:, :end].baddbmm_(dlogits.transpose(1, 2), qs)
    # inverse skew: dqe[a, c] = dlogits[a, j0 + c + a - (nb-1)]; reads left of the window land on
    # masked (zero) logits of the previous row, on the leading zeros, or on distances >= M whose table
    # rows are zero padding
    buf[:, : nb - 1].zero_()
    j0 = _window_start(start, n_rel)
    width = end - j0
    dqe = buf.as_strided((HB, nb, width), (slab, end + 1, 1), buf.storage_offset() + j0)
    if HB != H:  # (HB, nb, W) -> (H, B*nb, W) needs a copy; the logits scratch is free again
        dqe = _take(scratch["logits"], HB, nb, width).copy_(dqe)
    dqe = dqe.view(H, -1, width)  # (H, B*nb, W)
    rows = slice(tableT.shape[2] - width, tableT.shape[2])
    dqs += torch.bmm(dqe, tableT[:, :, rows].transpose(1, 2)).view(HB, nb, D)
    dtable[:, rows].baddbmm_(dqe.transpose(1, 2), qs.reshape(H, -1, D))
    return dqs


def _fold_heads(x: Tensor, scale: float = 1.0) -> Tensor:
    """(B, H, T, D) -> scale * x as (H*B, T, D), head-major, contiguous; one copy."""
    B, H, T, D = x.shape
    out = x.new_empty(H, B, T, D)
    torch.mul(x.transpose(0, 1), scale, out=out)
    return out.view(H * B, T, D)


def _query_blocks(t_q: int, t_k: int, block_size: int):
    """Yield (query slice, absolute start, absolute end) per block; queries are the last t_q of t_k."""
    for a0 in range(0, t_q, block_size):
        a1 = min(a0 + block_size, t_q)
        yield slice(a0, a1), t_k - t_q + a0, t_k - t_q + a1


def _block_dropout(scratch: dict, seed: int, p: float, HB: int, blk: slice, end: int):
    """(keep mask (HB, nb, end), p) for one query block, or None without dropout."""
    if p == 0:
        return None
    return dropout_keep(seed, blk.start, p, _take(scratch["keep"], HB, blk.stop - blk.start, end)), p


def _scratch(like: Tensor, t_k: int, block_size: int, names: tuple[str, ...]) -> dict:
    HB, t_q = like.shape[:2]
    numel = HB * min(block_size, t_q) * t_k + HB * block_size  # + leading zeros of the dlogits slab
    return {name: like.new_empty(numel) for name in names}


class EfficientRelativeAttention(torch.autograd.Function):
    """Flash-style relative attention. apply(q, k, v, rel_emb, dropout_p, seed, block_size) -> (B, H, Tq, D).

    Saves only q, k, v, the output and each row's log-sum-exp (and E, a parameter anyway); backward
    recomputes every block's logits. Dropout on the attention probabilities is done inside the kernel:
    each block's keep-mask is drawn from a generator seeded with (seed, block start) and drawn again in
    backward.
    """

    @staticmethod
    def forward(ctx, q, k, v, rel_emb, dropout_p: float, seed: int, block_size: int):
        B, H, t_q, D = q.shape
        t_k, n_rel = k.shape[2], rel_emb.shape[1]
        qs = _fold_heads(q, 1.0 / math.sqrt(D))  # scale once: every logit is linear in q
        k, v = _fold_heads(k), _fold_heads(v)
        kT = k.transpose(1, 2).contiguous()  # (HB, D, Tk): BLAS is faster on q @ kT than q @ k.mT
        tableT = _distance_table(rel_emb, block_size).transpose(1, 2).contiguous()  # (H, D, M + bs - 1)
        out, lse = torch.empty_like(qs), qs.new_empty(H * B, t_q)
        scratch = _scratch(qs, t_k, block_size, ("logits", "qe", "keep") if dropout_p > 0 else ("logits", "qe"))
        for blk, start, end in _query_blocks(t_q, t_k, block_size):
            drop = _block_dropout(scratch, seed, dropout_p, H * B, blk, end)
            out[:, blk], lse[:, blk] = _block_attend(qs[:, blk], kT, v, tableT, start, end, n_rel, drop, scratch)
        ctx.save_for_backward(qs, k, v, rel_emb, out, lse)
        ctx.opts = (dropout_p, seed, block_size)
        return out.view(H, B, t_q, D).transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        qs, k, v, rel_emb, out, lse = ctx.saved_tensors
        dropout_p, seed, block_size = ctx.opts
        (HB, t_q, D), (B, H, t_k) = qs.shape, (dout.shape[0], dout.shape[1], k.shape[1])
        tableT = _distance_table(rel_emb, block_size).transpose(1, 2).contiguous()  # rebuilt, not saved
        ones = k.new_ones(HB, 1, t_k)
        kT, vT = (torch.cat([x.transpose(1, 2), ones], dim=1) for x in (k, v))  # (HB, D+1, Tk)
        saved = (k, kT, vT, tableT, rel_emb.shape[1])
        dout = _fold_heads(dout)
        dtable = tableT.new_zeros(H, tableT.shape[2], D)  # (H, M + bs - 1, D)
        dqs, grads = torch.empty_like(qs), (torch.zeros_like(k), torch.zeros_like(v), dtable)
        scratch = _scratch(qs, t_k, block_size, ("logits", "qe", "keep") if dropout_p > 0 else ("logits", "qe"))
        for blk, start, end in _query_blocks(t_q, t_k, block_size):
            drop = _block_dropout(scratch, seed, dropout_p, HB, blk, end)
            row_dot = (dout[:, blk] * out[:, blk]).sum(-1)  # (HB, nb): rowsum(P * dP), softmax backward
            dqs[:, blk] = _block_grads(saved, qs[:, blk], dout[:, blk], lse[:, blk], row_dot,
                                       start, end, drop, grads, scratch)
        del scratch, saved, kT, vT  # free the scratch before the outputs below are allocated
        dk, dv = (g.view(H, B, t_k, D).transpose(0, 1) for g in grads[:2])
        drel = grads[2][:, block_size - 1 :].flip(1)  # drop the zero-pad rows
        dq = dqs.mul_(1.0 / math.sqrt(D)).view(H, B, t_q, D).transpose(0, 1)
        return dq, dk, dv, drel, None, None, None


def attend_efficient(
    q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0, block_size: int = 64
) -> Tensor:
    """Memory-efficient relative attention; see `EfficientRelativeAttention`."""
    seed = int(torch.randint(0, 2**62, (1,)).item()) if dropout_p > 0 else 0
    return EfficientRelativeAttention.apply(q, k, v, rel_emb, dropout_p, seed, block_size)


# ---------------------------------------------------------------------------------------------------
# Modules: projections + heads + cache; the kernel is chosen by name.


class _SelfAttention(nn.Module):
    """Shared projections and head split; subclasses supply `_attend(q, k, v)` on (B, H, T, D)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model).

        With a cache, x holds the next T tokens after the cached ones: their keys/values are appended
        to the cache (in place) and they attend to every cached token.
        """
        B, T, _ = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, T_cache, D)
        y = self._attend(q, k, v)  # (B, H, T, D)
        return self.proj(y.transpose(1, 2).reshape(B, T, self.d_model))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        raise NotImplementedError


class RelativeSelfAttention(_SelfAttention):
    """Causal multi-head self-attention with learned relative-position embeddings (Music Transformer).

    `rel_emb` (n_heads, max_rel_dist, d_head) holds E[h, r] for distance r = i - j. `impl` ("naive",
    "skew", "efficient") and `block_size` (query block of the efficient kernel) are plain attributes and
    may be changed on a live module. With impl="efficient", a single new token (a decoding step) uses
    `attend_relative_one_query`, and inputs of at most `block_size` tokens the skew path: same result,
    same memory, less repacking.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        max_rel_dist: int,
        dropout: float = 0.0,
        impl: str = "efficient",
        block_size: int = 64,
    ):
        super().__init__(d_model, n_heads, dropout)
        if impl not in IMPLS:
            raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
        self.max_rel_dist, self.impl, self.block_size = max_rel_dist, impl, block_size
        self.rel_emb = nn.Parameter(torch.randn(n_heads, max_rel_dist, self.d_head) * 0.02)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        p = self.dropout if self.training else 0.0
        if self.impl == "efficient":
            if q.shape[2] == 1 and p == 0.0:
                return attend_relative_one_query(q, k, v, self.rel_emb)  # a decoding step
            if q.shape[2] <= self.block_size:
                # a single query block (e.g. a decoding step) holds no more with the skew path, which
                # skips the kernel's repacking of every cached key and value: twice as fast per token
                return attend_skew(q, k, v, self.rel_emb, p)
            return attend_efficient(q, k, v, self.rel_emb, p, self.block_size)
        if self.impl == "skew":
            return attend_skew(q, k, v, self.rel_emb, p)
        if self.impl == "naive":
            return attend_naive(q, k, v, self.rel_emb, p)
        raise ValueError(f"unknown attention impl {self.impl!r}; expected one of {IMPLS}")

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_rel_dist={self.max_rel_dist}, impl={self.impl}"


class PlainSelfAttention(_SelfAttention):
    """Causal multi-head self-attention via F.scaled_dot_product_attention (no position information)."""

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        p = self.dropout if self.training else 0.0
        t_q, t_k = q.shape[2], k.shape[2]
        if t_q == t_k:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        # is_causal aligns the mask top-left; cached queries are the *last* t_q positions
        mask = causal_allowed(t_q, t_k, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
