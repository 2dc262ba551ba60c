"""Causal self-attention: relative (Music Transformer, Huang et al. 2018) and plain, with a KV cache.

Relative logits: S_rel[i, j] = q_i . E[min(i - j, M - 1)] for i - j >= 0, M = max_rel_dist, with one learned
table E per head; distances past the table are clipped to its last row (Shaw et al. 2018), so far keys keep
the position term the model learned for "far" instead of none. logits = (q.k + S_rel) / sqrt(d_head),
causal mask, softmax. The kernels themselves index a table by exact distance, zero past its end; the module
hands them `clipped_table`, the table extended to the keys' length by repeating its last row, which gives
every kernel (naive, skew, efficient, triton, one-query decoding) the clipped term and its gradient.

The kernels (scores + relative term + mask + softmax + weighted sum) are free functions apart from the
projections, so `RelativeSelfAttention.impl` can be switched on a live module:
  - "naive":     materialises the (T, T, d_head) table of relative embeddings (Shaw et al.). Reference.
  - "skew":      the paper's skewing trick, O(T * d) extra for the relative term but full T x T logits.
  - "efficient": `efficient_attention.attend_efficient`, one query block at a time with a hand-written
                 backward that recomputes each block: never holds a T x T tensor. Plain torch, so it is
                 part of the model and needs no other import.
  - "triton":    the fused GPU kernel of `musictx.kernels.triton_attention`, imported on first use when
                 the triton package is installed ("auto" picks it for CUDA inputs, else "efficient").

All kernels take q (B, H, Tq, D) and k, v (B, H, Tk, D) with Tk >= Tq: the queries are the *last* Tq
positions of the Tk keys. This one convention covers training (Tq == Tk) and cached decoding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from importlib.util import find_spec

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musictx.models.efficient_attention import attend_efficient
from musictx.models.kv_cache import KVCache

IMPLS = ("naive", "skew", "efficient", "triton", "auto")  # auto: triton for CUDA inputs if installed, else efficient
BLOCK_SIZE = 128  # the efficient kernel's query block (``attn_block_size`` in conf/model/music_transformer.yaml)
Kernel = Callable[..., Tensor]  # (q, k, v, rel_emb, dropout_p, ...) -> (B, H, Tq, D)


def clipped_table(rel_emb: Tensor, t_k: int) -> Tensor:
    """(H, max(M, Tk), D): E with its last row repeated out to distance Tk - 1 (a view when Tk <= M).

    Gradients of the repeated rows flow back to E[M - 1] through the expand."""
    n_rel = rel_emb.shape[1]
    if t_k <= n_rel:
        return rel_emb
    return torch.cat([rel_emb, rel_emb[:, -1:].expand(-1, t_k - n_rel, -1)], dim=1)


def shifted_table(rel_emb: Tensor) -> Tensor:
    """(H, M - 1, D): E[r] - E[M - 1], the table that gives clipped attention to a kernel whose
    distances past its table get no term.

    With distances from M - 1 on clipped to E[M - 1], every logit of query i holds q_i . E[M - 1] plus
    this table's term (zero from distance M - 1 on). That part is the same for all of query i's keys,
    and softmax ignores a constant per row, so the output and every gradient are unchanged, while the
    kernel's relative window stops at distance M - 1 instead of running over all Tk keys (a quarter of
    the relative work at M = L / 2). E[M - 1]'s gradient flows back through the subtraction."""
    return rel_emb[:, :-1] - rel_emb[:, -1:]


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


def naive_logits(q: Tensor, k: Tensor, rel_emb: Tensor) -> Tensor:
    """Scaled logits (B, H, Tq, Tk), unmasked, with the relative embeddings materialised per (i, j) pair."""
    table = relative_table(rel_emb, q.shape[2], k.shape[2])
    logits = q @ k.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, table)  # (B, H, Tq, Tk)
    return logits / math.sqrt(q.shape[-1])


def attend_naive(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0) -> Tensor:
    """Relative attention with the relative embeddings materialised per (i, j) pair. Tests only."""
    return _softmax_weighted(naive_logits(q, k, rel_emb), v, dropout_p)


def relative_logits_rows(q_rows: Tensor, rel_emb: Tensor, rows: Tensor, t_k: int) -> Tensor:
    """S_rel (B, H, R, Tk) of the queries at absolute positions `rows` (R,): q . E[row - j], zero where
    row - j is negative or >= M. Costs R x Tk, so any rows of any length can be asked for."""
    n_rel = rel_emb.shape[1]
    qe = q_rows @ rel_emb.transpose(-1, -2)  # (B, H, R, M): q . E[h, r] for every distance r
    dist = rows[:, None] - torch.arange(t_k, device=rows.device)[None, :]  # (R, Tk)
    valid = (dist >= 0) & (dist < n_rel)
    index = dist.clamp(0, n_rel - 1).expand(*qe.shape[:2], -1, -1)  # (B, H, R, Tk)
    return qe.gather(-1, index) * valid.to(qe.dtype)


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


def attend_relative_one_query(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor) -> Tensor:
    """Relative attention of the last position only, a decoding step with a KV cache: q (B, H, 1, D), k and
    v (B, H, Tk, D) -> (B, H, 1, D).

    The same function as the kernels above (S_rel[j] = q . E[Tk-1-j] for distances below M) at the cost
    of one row: q @ E^T over the distances, flipped onto the keys. The last query sees every key, so no
    mask is needed.
    """
    t_k, d_head = k.shape[2], q.shape[-1]
    n_dist = min(rel_emb.shape[1], t_k)
    logits = q @ k.transpose(-1, -2)  # (B, H, 1, Tk)
    # Heads first, so that the batch shares each head's table instead of a broadcast copy per sample.
    rel = q.squeeze(2).transpose(0, 1) @ rel_emb[:, :n_dist].transpose(-1, -2)  # (H, B, n_dist), distance 0..
    logits[..., t_k - n_dist :] += rel.transpose(0, 1).unsqueeze(2).flip(-1)  # key Tk-1-d is at distance d
    return (logits * (1.0 / math.sqrt(d_head))).softmax(dim=-1) @ v


@functools.cache
def triton_kernel() -> Kernel | None:
    """`attend_triton` when the triton package is installed, else None. Imported on first use only:
    importing triton is slow, and a CPU never needs it."""
    if find_spec("triton") is None:
        return None
    from musictx.kernels.triton_attention import attend_triton

    return attend_triton


# ---------------------------------------------------------------------------------------------------
# Modules: projections + heads + cache; the kernel is chosen by name.


class _SelfAttention(nn.Module):
    """Shared projections and head split; subclasses supply `attend(q, k, v)` on (B, H, T, D)."""

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
        y = self.attend(q, k, v)  # (B, H, T, D)
        return self.proj(y.transpose(1, 2).reshape(B, T, self.d_model))

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        raise NotImplementedError

    def _position_logits(self, q_rows: Tensor, rows: Tensor, t_k: int) -> Tensor | float:
        """Position term added to q.k for the query rows; plain attention has none."""
        return 0.0

    @torch.no_grad()
    def attention_probs(self, x: Tensor, rows: Tensor) -> Tensor:
        """The attention probabilities (B, H, R, T) that the query positions `rows` (R,) give to each of
        the T keys, for this layer's input x (B, T, d_model): the layer's own projections and logits,
        exactly what forward weighs the values with (no dropout), at a cost of R x T, not T x T."""
        B, T, _ = x.shape
        rows = torch.as_tensor(rows, dtype=torch.long, device=x.device)
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head)
        q, k, _ = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        q_rows = q[:, :, rows]  # (B, H, R, D)
        logits = q_rows @ k.transpose(-1, -2) + self._position_logits(q_rows, rows, T)  # (B, H, R, T)
        future = rows[:, None] < torch.arange(T, device=x.device)[None, :]  # (R, T)
        return (logits / math.sqrt(self.d_head)).masked_fill(future, float("-inf")).softmax(dim=-1)


class RelativeSelfAttention(_SelfAttention):
    """Causal multi-head self-attention with learned relative-position embeddings (Music Transformer).

    `rel_emb` (n_heads, max_rel_dist, d_head) holds E[h, r] for distance r = i - j. `impl` ("naive",
    "skew", "efficient", "triton" = the fused GPU kernel of `musictx.kernels`, "auto" = triton for CUDA
    inputs when triton is installed, else efficient) and `block_size` (query block of the efficient kernel)
    are plain attributes and may be changed on a live module. With impl="efficient", a single new token
    (a decoding step) uses `attend_relative_one_query`, and inputs of at most `block_size` tokens the skew
    path: same result, same memory, less repacking.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        max_rel_dist: int,
        dropout: float = 0.0,
        impl: str = "efficient",
        block_size: int = BLOCK_SIZE,
    ):
        super().__init__(d_model, n_heads, dropout)
        if impl not in IMPLS:
            raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
        self.max_rel_dist, self.impl, self.block_size = max_rel_dist, impl, block_size
        self.rel_emb = nn.Parameter(torch.randn(n_heads, max_rel_dist, self.d_head) * 0.02)

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        p = self.dropout if self.training else 0.0
        impl = self._kernel(q)
        if impl in ("efficient", "triton") and k.shape[2] > self.max_rel_dist > 1:
            # these kernels give distances past their table no term: with clipped distances they take
            # E - E[M - 1] (M - 1 rows) and skip the far keys' relative work; see `shifted_table`
            rel_emb = shifted_table(self.rel_emb)
        else:
            rel_emb = clipped_table(self.rel_emb, k.shape[2])  # (H, max(M, Tk), D)
        if impl == "one_query":
            return attend_relative_one_query(q, k, v, rel_emb)
        if impl in ("naive", "skew"):
            return attend_naive(q, k, v, rel_emb, p) if impl == "naive" else attend_skew(q, k, v, rel_emb, p)
        if impl == "triton":
            kernel = triton_kernel()
            if kernel is None:
                raise RuntimeError("attn_impl='triton' needs the triton package: pip install 'musictx[gpu]'")
            return kernel(q, k, v, rel_emb, p)  # its own tiles, not the efficient kernel's block size
        return attend_efficient(q, k, v, rel_emb, p, self.block_size)

    def _kernel(self, q: Tensor) -> str:
        """The kernel for these queries: `impl`, with "auto" resolved and the efficient impl's short
        cases (a decoding step: "one_query"; a single query block: "skew", same result, less repacking)."""
        impl = self.impl
        if impl == "auto":
            impl = "triton" if q.is_cuda and triton_kernel() is not None else "efficient"
        if impl == "efficient":
            if q.shape[2] == 1 and not (self.training and self.dropout > 0):
                return "one_query"
            if q.shape[2] <= self.block_size:
                return "skew"
        if impl not in IMPLS:
            raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
        return impl

    def _position_logits(self, q_rows: Tensor, rows: Tensor, t_k: int) -> Tensor:
        return relative_logits_rows(q_rows, clipped_table(self.rel_emb, t_k), rows, t_k)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_rel_dist={self.max_rel_dist}, impl={self.impl}"


class PlainSelfAttention(_SelfAttention):
    """Causal multi-head self-attention via F.scaled_dot_product_attention (no position information)."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        p = self.dropout if self.training else 0.0
        t_q, t_k = q.shape[2], k.shape[2]
        if t_q == t_k:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        # is_causal aligns the mask top-left; cached queries are the *last* t_q positions
        mask = causal_allowed(t_q, t_k, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
