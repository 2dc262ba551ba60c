"""Fused causal relative attention for GPUs in Triton: one forward kernel, two backward kernels.

Same function and conventions as `musictx.models.attention`: q (B, H, Tq, D), k and v (B, H, Tk, D) with
Tk >= Tq, the queries being the last Tq positions; rel_emb E (H, M, D); logits (q.k + S_rel) / sqrt(D) with
S_rel[i, j] = q_i . E[i - j] for 0 <= i - j < M and no term beyond; causal softmax; optional dropout on the
attention probabilities.

Design (flash-attention style; written for this model, not copied):
  - Grid of (query tile, batch * head) programs for forward and dQ, (key tile, batch * head) for dK/dV.
    Only the output, each row's log-sum-exp (fp32) and the inputs are kept: O(L * D) memory; every
    probability tile is recomputed in backward. Running max, sum, log-sum-exp and all accumulators
    (out, dq, dk, dv, dE) are fp32 whatever the input dtype; matmul inputs stay in q's dtype.
  - Relative term of a (BM queries) x (BN keys) tile: its distances i - j span lo .. lo + BM + BN - 2 with
    lo = i0 - j0 - (BN - 1). The kernel loads that window of E (BW = next_pow2(BM + BN - 1) rows, rows
    outside [0, M) masked to zero, which gives "no term beyond M" for free), computes
    qe = q_tile @ E_window^T (BM, BW) with one tl.dot, then skews it in registers with
    tl.gather(qe, a - b + BN - 1, axis=1): S_rel[a, b] = qe[a, a - b + BN - 1]. Backward un-skews dS the
    same way (another gather, rows a - w + BN - 1 outside [0, BN) set to zero) into dqe (BM, BW), then
    dq += dqe @ E_window and dE[window] += dqe^T @ q_tile.
  - Key tiles that are M or more behind every query of a tile have no relative term and no causal mask:
    each loop is split into a "far" part (one tl.dot per tile, like plain flash attention) and a "near"
    part (content dot + window dot + gather + mask). At M = L/2 about 3/4 of the causal tiles are near.
    (The model clips long distances to E[M-1] and hands this kernel E[:M-1] - E[M-1], which gives the
    same softmax, so its far tiles stay free: `musictx.models.attention.shifted_table`.)
  - dE is summed over batch and query tiles with fp32 atomic adds into an (H, M, D) buffer, so dE on a
    GPU is not bitwise reproducible run to run (dq, dk, dv are: no atomics there).
  - Dropout is in the kernels: keep(b, h, query row, key) = tl.rand(seed + b*H + h, row * Tk + key) >= p,
    drawn again in backward instead of stored. The random stream is Triton's Philox, not torch's, so the
    masks differ from the other impls' for the same torch seed.
Launches: forward 1 kernel (+ 2 allocations); backward 2 kernels + the row-dot delta = rowsum(dO * O) and
zeroing dE in torch (about 6 launches). Block sizes and warps are educated guesses, never tuned on a GPU.
`TRITON_INTERPRET=1` (set before this module is imported) runs the same kernels on CPU tensors; that is
how tests/test_triton_attention.py checks them. Importing this module never needs triton.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # the rest of musictx works without triton; attend_triton then raises
    triton = None


def triton_available() -> bool:
    """True when triton imports (it does not say whether a GPU is there)."""
    return triton is not None


def interpreting() -> bool:
    """True when the kernels were built for Triton's CPU interpreter (TRITON_INTERPRET=1 at import)."""
    return triton is not None and type(_fwd_kernel).__name__ == "InterpretedFunction"


if triton is not None:

    @triton.jit
    def _head_ptr(ptr, bh, n_heads, stride_b, stride_h):
        """Base pointer of (batch, head) = divmod(bh, n_heads) in a strided (B, H, T, D) tensor."""
        return ptr + (bh // n_heads).to(tl.int64) * stride_b + (bh % n_heads).to(tl.int64) * stride_h

    @triton.jit
    def _head_inputs(Q, K, V, E, bh, n_heads, sqb, sqh, skb, skh, svb, svh, seh):
        """Q, K, V of (batch, head) = divmod(bh, n_heads) and E of that head: every kernel's first step."""
        head = (bh % n_heads).to(tl.int64)
        return (_head_ptr(Q, bh, n_heads, sqb, sqh), _head_ptr(K, bh, n_heads, skb, skh),
                _head_ptr(V, bh, n_heads, svb, svh), E + head * seh)

    @triton.jit
    def _load_rows(ptr, rows, n_rows, stride_t, offs_d, head_dim):
        """(len(rows), BD) tile; rows >= n_rows and columns >= head_dim read as zero."""
        mask = (rows[:, None] < n_rows) & (offs_d[None, :] < head_dim)
        return tl.load(ptr + rows[:, None] * stride_t + offs_d[None, :], mask=mask, other=0.0)

    @triton.jit
    def _rel_window(E, lo, n_rel, stride_r, offs_w, offs_d, head_dim, dtype):
        """(BW, BD) rows E[lo + w] of one head, zero where lo + w is outside [0, M)."""
        r = lo + offs_w
        mask = ((r >= 0) & (r < n_rel))[:, None] & (offs_d[None, :] < head_dim)
        return tl.load(E + r[:, None] * stride_r + offs_d[None, :], mask=mask, other=0.0).to(dtype)

    @triton.jit
    def _keep(seed, bh, rows, cols, t_k, p_drop):
        """Dropout keep-mask (len(rows), len(cols)) of query rows x keys; a pure function of its inputs."""
        return tl.rand(seed + bh, rows[:, None] * t_k + cols[None, :]) >= p_drop

    @triton.jit
    def _scores(q, k, E, lo, qpos, cols, skew, n_rel, ser, offs_w, offs_d, head_dim, scale,
                NEAR: tl.constexpr, PREC: tl.constexpr):
        """Scaled logits (BM, BN) of a tile; NEAR adds the relative term and the causal mask."""
        s = tl.dot(q, tl.trans(k), input_precision=PREC)
        if NEAR:
            ew = _rel_window(E, lo, n_rel, ser, offs_w, offs_d, head_dim, q.dtype)  # (BW, BD)
            qe = tl.dot(q, tl.trans(ew), input_precision=PREC)  # (BM, BW): q_a . E[lo + w]
            s += tl.gather(qe, skew, 1)  # diagonal re-indexing: distance of (a, b) is lo + skew[a, b]
            s = tl.where(cols[None, :] <= qpos[:, None], s, float("-inf"))
        return s * scale

    @triton.jit
    def _fwd_loop(acc, m_i, l_i, q, K, V, E, j_lo, j_hi, i0, rows, skew, skt, svt, ser, t_k, n_rel, head_dim,
                  scale, p_drop, seed, bh, BN: tl.constexpr, BD: tl.constexpr, BW: tl.constexpr,
                  NEAR: tl.constexpr, DROPOUT: tl.constexpr, PREC: tl.constexpr):
        """Online softmax over the key tiles j_lo .. j_hi of one query tile."""
        offs_n, offs_d, offs_w = tl.arange(0, BN), tl.arange(0, BD), tl.arange(0, BW)
        qpos = i0 + tl.arange(0, q.shape[0])
        for j0 in range(j_lo, j_hi, BN):
            cols = j0 + offs_n
            k = _load_rows(K, cols, t_k, skt, offs_d, head_dim)
            s = _scores(q, k, E, i0 - j0 - (BN - 1), qpos, cols, skew, n_rel, ser, offs_w, offs_d, head_dim,
                        scale, NEAR, PREC)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            if DROPOUT:
                p = tl.where(_keep(seed, bh, rows, cols, t_k, p_drop), p / (1.0 - p_drop), 0.0)
            v = _load_rows(V, cols, t_k, svt, offs_d, head_dim)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
            m_i = m_new
        return acc, m_i, l_i

    @triton.jit
    def _fwd_kernel(Q, K, V, E, OUT, LSE, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, seh, ser,
                    n_heads, t_q, t_k, n_rel, head_dim, scale, p_drop, SEED,
                    BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BW: tl.constexpr,
                    DROPOUT: tl.constexpr, PREC: tl.constexpr):
        pid, bh = tl.program_id(0), tl.program_id(1)
        seed = tl.load(SEED)  # a tensor, not an int argument: see attend_triton
        # Inductor hands Python floats over as fp64 (eager Triton as fp32): fp64 here would promote the fp32
        # accumulators inside the loops, which Triton refuses
        scale, p_drop = tl.cast(scale, tl.float32), tl.cast(p_drop, tl.float32)
        Q, K, V, E = _head_inputs(Q, K, V, E, bh, n_heads, sqb, sqh, skb, skh, svb, svh, seh)
        rows, offs_d = pid * BM + tl.arange(0, BM), tl.arange(0, BD)
        skew = tl.arange(0, BM)[:, None] - tl.arange(0, BN)[None, :] + (BN - 1)  # (BM, BN) window column
        i0 = t_k - t_q + pid * BM  # absolute position of the tile's first query
        q = _load_rows(Q, rows, t_q, sqt, offs_d, head_dim)
        acc = tl.zeros((BM, BD), tl.float32)
        m_i, l_i = tl.full((BM,), -1.0e30, tl.float32), tl.zeros((BM,), tl.float32)
        j_far = tl.maximum(i0 - n_rel + 1, 0) // BN * BN  # tiles before j_far: every pair is >= M apart
        j_hi = tl.minimum(i0 + BM, t_k)
        acc, m_i, l_i = _fwd_loop(acc, m_i, l_i, q, K, V, E, 0, j_far, i0, rows, skew, skt, svt, ser, t_k, n_rel,
                                  head_dim, scale, p_drop, seed, bh, BN, BD, BW, False, DROPOUT, PREC)
        acc, m_i, l_i = _fwd_loop(acc, m_i, l_i, q, K, V, E, j_far, j_hi, i0, rows, skew, skt, svt, ser, t_k, n_rel,
                                  head_dim, scale, p_drop, seed, bh, BN, BD, BW, True, DROPOUT, PREC)
        base = bh.to(tl.int64) * t_q
        tl.store(LSE + base + rows, m_i + tl.log(l_i), mask=rows < t_q)
        out = (acc / l_i[:, None]).to(OUT.dtype.element_ty)
        mask = (rows[:, None] < t_q) & (offs_d[None, :] < head_dim)
        tl.store(OUT + base * head_dim + rows[:, None] * head_dim + offs_d[None, :], out, mask=mask)

    @triton.jit
    def _probs_and_dscores(q, k, v, do, lse, delta, E, lo, qpos, rows, cols, skew, t_k, n_rel, ser, head_dim,
                           scale, p_drop, seed, bh, BW: tl.constexpr, NEAR: tl.constexpr,
                           DROPOUT: tl.constexpr, PREC: tl.constexpr):
        """Recomputed probabilities after dropout (BM, BN) and dlogits dS = P * (dP - rowsum(dO * O))."""
        offs_d, offs_w = tl.arange(0, q.shape[1]), tl.arange(0, BW)
        s = _scores(q, k, E, lo, qpos, cols, skew, n_rel, ser, offs_w, offs_d, head_dim, scale, NEAR, PREC)
        p = tl.exp(s - lse[:, None])  # padded rows have lse = +inf: p = 0
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        p_dropped = p
        if DROPOUT:
            keep = _keep(seed, bh, rows, cols, t_k, p_drop)
            p_dropped = tl.where(keep, p / (1.0 - p_drop), 0.0)
            dp = tl.where(keep, dp / (1.0 - p_drop), 0.0)
        return p_dropped, p * (dp - delta[:, None])

    @triton.jit
    def _bwd_kv_loop(dk, dv, k, v, Q, DO, LSE, DELTA, E, a_lo, a_hi, j0, cols, skew, sqt, ser, t_q, t_k, n_rel,
                     head_dim, scale, p_drop, seed, bh, BM: tl.constexpr, BW: tl.constexpr,
                     NEAR: tl.constexpr, DROPOUT: tl.constexpr, PREC: tl.constexpr):
        """Accumulate dk, dv of one key tile over the query tiles a_lo .. a_hi."""
        offs_m, offs_d = tl.arange(0, BM), tl.arange(0, k.shape[1])
        for a0 in range(a_lo, a_hi, BM):
            rows = a0 + offs_m
            q = _load_rows(Q, rows, t_q, sqt, offs_d, head_dim)
            do = _load_rows(DO, rows, t_q, head_dim, offs_d, head_dim)
            lse = tl.load(LSE + rows, mask=rows < t_q, other=float("inf"))
            delta = tl.load(DELTA + rows, mask=rows < t_q, other=0.0)
            i0 = t_k - t_q + a0
            p, ds = _probs_and_dscores(q, k, v, do, lse, delta, E, i0 - j0 - (k.shape[0] - 1), i0 + offs_m,
                                       rows, cols, skew, t_k, n_rel, ser, head_dim, scale, p_drop, seed, bh,
                                       BW, NEAR, DROPOUT, PREC)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PREC)
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PREC)
        return dk, dv

    @triton.jit
    def _bwd_kv_kernel(Q, K, V, E, DO, LSE, DELTA, DK, DV, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, seh, ser,
                       n_heads, t_q, t_k, n_rel, head_dim, scale, p_drop, SEED,
                       BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BW: tl.constexpr,
                       DROPOUT: tl.constexpr, PREC: tl.constexpr):
        pid, bh = tl.program_id(0), tl.program_id(1)
        seed = tl.load(SEED)  # a tensor, not an int argument: see attend_triton
        # Inductor hands Python floats over as fp64 (eager Triton as fp32): fp64 here would promote the fp32
        # accumulators inside the loops, which Triton refuses
        scale, p_drop = tl.cast(scale, tl.float32), tl.cast(p_drop, tl.float32)
        Q, K, V, E = _head_inputs(Q, K, V, E, bh, n_heads, sqb, sqh, skb, skh, svb, svh, seh)
        DO += bh.to(tl.int64) * t_q * head_dim
        LSE += bh.to(tl.int64) * t_q
        DELTA += bh.to(tl.int64) * t_q
        j0, offs_d = pid * BN, tl.arange(0, BD)
        cols = j0 + tl.arange(0, BN)
        skew = tl.arange(0, BM)[:, None] - tl.arange(0, BN)[None, :] + (BN - 1)
        k, v = _load_rows(K, cols, t_k, skt, offs_d, head_dim), _load_rows(V, cols, t_k, svt, offs_d, head_dim)
        dk, dv = tl.zeros((BN, BD), tl.float32), tl.zeros((BN, BD), tl.float32)
        off = t_k - t_q
        a_lo = tl.maximum(j0 - off, 0) // BM * BM  # first query tile that sees this key tile
        need = tl.maximum(j0 + BN - 1 + n_rel - off, 0)  # first query row >= M past every key of the tile
        a_far = tl.minimum(tl.maximum((need + BM - 1) // BM * BM, a_lo), t_q)
        dk, dv = _bwd_kv_loop(dk, dv, k, v, Q, DO, LSE, DELTA, E, a_lo, a_far, j0, cols, skew, sqt, ser, t_q, t_k,
                              n_rel, head_dim, scale, p_drop, seed, bh, BM, BW, True, DROPOUT, PREC)
        dk, dv = _bwd_kv_loop(dk, dv, k, v, Q, DO, LSE, DELTA, E, a_far, t_q, j0, cols, skew, sqt, ser, t_q, t_k,
                              n_rel, head_dim, scale, p_drop, seed, bh, BM, BW, False, DROPOUT, PREC)
        mask = (cols[:, None] < t_k) & (offs_d[None, :] < head_dim)
        out_offs = bh.to(tl.int64) * t_k * head_dim + cols[:, None] * head_dim + offs_d[None, :]
        tl.store(DK + out_offs, (dk * scale).to(DK.dtype.element_ty), mask=mask)
        tl.store(DV + out_offs, dv.to(DV.dtype.element_ty), mask=mask)

    @triton.jit
    def _bwd_q_loop(dq, q, do, lse, delta, K, V, E, DE, j_lo, j_hi, i0, rows, skew, skt, svt, ser, t_k, n_rel,
                    head_dim, scale, p_drop, seed, bh, BN: tl.constexpr, BW: tl.constexpr,
                    NEAR: tl.constexpr, DROPOUT: tl.constexpr, PREC: tl.constexpr):
        """Accumulate dq of one query tile over the key tiles j_lo .. j_hi; NEAR tiles also add to dE."""
        offs_n, offs_d, offs_w = tl.arange(0, BN), tl.arange(0, q.shape[1]), tl.arange(0, BW)
        qpos = i0 + tl.arange(0, q.shape[0])
        unskew = tl.arange(0, q.shape[0])[:, None] - offs_w[None, :] + (BN - 1)  # (BM, BW): key of window col
        on_tile = (unskew >= 0) & (unskew < BN)
        for j0 in range(j_lo, j_hi, BN):
            cols = j0 + offs_n
            k, v = _load_rows(K, cols, t_k, skt, offs_d, head_dim), _load_rows(V, cols, t_k, svt, offs_d, head_dim)
            lo = i0 - j0 - (BN - 1)
            _, ds = _probs_and_dscores(q, k, v, do, lse, delta, E, lo, qpos, rows, cols, skew, t_k, n_rel, ser,
                                       head_dim, scale, p_drop, seed, bh, BW, NEAR, DROPOUT, PREC)
            dq += tl.dot(ds.to(k.dtype), k, input_precision=PREC)
            if NEAR:
                dqe = tl.where(on_tile, tl.gather(ds, tl.where(on_tile, unskew, 0), 1), 0.0).to(q.dtype)
                ew = _rel_window(E, lo, n_rel, ser, offs_w, offs_d, head_dim, q.dtype)
                dq += tl.dot(dqe, ew, input_precision=PREC)
                de = tl.dot(tl.trans(dqe), q, input_precision=PREC) * scale  # (BW, BD)
                r = lo + offs_w
                mask = ((r >= 0) & (r < n_rel))[:, None] & (offs_d[None, :] < head_dim)
                tl.atomic_add(DE + r[:, None] * head_dim + offs_d[None, :], de, mask=mask)
        return dq

    @triton.jit
    def _bwd_q_kernel(Q, K, V, E, DO, LSE, DELTA, DQ, DE, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, seh, ser,
                      n_heads, t_q, t_k, n_rel, head_dim, scale, p_drop, SEED,
                      BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BW: tl.constexpr,
                      DROPOUT: tl.constexpr, PREC: tl.constexpr):
        pid, bh = tl.program_id(0), tl.program_id(1)
        seed = tl.load(SEED)  # a tensor, not an int argument: see attend_triton
        # Inductor hands Python floats over as fp64 (eager Triton as fp32): fp64 here would promote the fp32
        # accumulators inside the loops, which Triton refuses
        scale, p_drop = tl.cast(scale, tl.float32), tl.cast(p_drop, tl.float32)
        Q, K, V, E = _head_inputs(Q, K, V, E, bh, n_heads, sqb, sqh, skb, skh, svb, svh, seh)
        DE += (bh % n_heads).to(tl.int64) * n_rel * head_dim
        base = bh.to(tl.int64) * t_q
        rows, offs_d = pid * BM + tl.arange(0, BM), tl.arange(0, BD)
        skew = tl.arange(0, BM)[:, None] - tl.arange(0, BN)[None, :] + (BN - 1)
        q = _load_rows(Q, rows, t_q, sqt, offs_d, head_dim)
        do = _load_rows(DO + base * head_dim, rows, t_q, head_dim, offs_d, head_dim)
        lse = tl.load(LSE + base + rows, mask=rows < t_q, other=float("inf"))
        delta = tl.load(DELTA + base + rows, mask=rows < t_q, other=0.0)
        i0 = t_k - t_q + pid * BM
        j_far = tl.maximum(i0 - n_rel + 1, 0) // BN * BN
        j_hi = tl.minimum(i0 + BM, t_k)
        dq = tl.zeros((BM, BD), tl.float32)
        dq = _bwd_q_loop(dq, q, do, lse, delta, K, V, E, DE, 0, j_far, i0, rows, skew, skt, svt, ser, t_k, n_rel,
                         head_dim, scale, p_drop, seed, bh, BN, BW, False, DROPOUT, PREC)
        dq = _bwd_q_loop(dq, q, do, lse, delta, K, V, E, DE, j_far, j_hi, i0, rows, skew, skt, svt, ser, t_k, n_rel,
                         head_dim, scale, p_drop, seed, bh, BN, BW, True, DROPOUT, PREC)
        mask = (rows[:, None] < t_q) & (offs_d[None, :] < head_dim)
        tl.store(DQ + base * head_dim + rows[:, None] * head_dim + offs_d[None, :],
                 (dq * scale).to(DQ.dtype.element_ty), mask=mask)


def _meta(head_dim: int, block: int, dropout_p: float, dtype: torch.dtype) -> dict:
    """Compile-time constants: tile sizes (powers of two >= 16, as tl.dot needs), dropout, matmul precision.

    8 warps: compiled for sm_90 at D = 64, forward tiles of 64 and backward tiles of 32 then fit in the
    registers without spilling (4 warps spill in the forward and dQ kernels; backward tiles of 64 spill).
    """
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    tf32 = dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32  # as torch's own fp32 matmuls
    return dict(BM=block, BN=block, BD=max(16, triton.next_power_of_2(head_dim)),
                BW=triton.next_power_of_2(2 * block - 1), DROPOUT=dropout_p > 0,
                PREC="tf32" if tf32 else "ieee", num_warps=8)


def _strides(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor) -> tuple[int, ...]:
    return (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *rel_emb.stride()[:2])


def _unit_last(x: Tensor) -> Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


class TritonRelativeAttention(torch.autograd.Function):
    """apply(q, k, v, rel_emb, dropout_p, seed, block_fwd, block_bwd) -> (B, H, Tq, D) in q's dtype.

    Saves q, k, v, E, the output, the fp32 log-sum-exp (B, H, Tq) and the dropout seed (1,). q, k, v may be
    strided views (the head split of the qkv projection is not copied); their last dimension must be contiguous.
    """

    @staticmethod
    def forward(ctx, q, k, v, rel_emb, dropout_p: float, seed: Tensor, block_fwd: int, block_bwd: int):
        q, k, v, rel_emb = (_unit_last(x) for x in (q, k, v, rel_emb))
        B, H, t_q, D = q.shape
        t_k, n_rel = k.shape[2], rel_emb.shape[1]
        out = q.new_empty(B, H, t_q, D)
        lse = torch.empty(B, H, t_q, dtype=torch.float32, device=q.device)
        meta = _meta(D, block_fwd, dropout_p, q.dtype)
        _fwd_kernel[(triton.cdiv(t_q, block_fwd), B * H)](
            q, k, v, rel_emb, out, lse, *_strides(q, k, v, rel_emb), H, t_q, t_k, n_rel, D,
            1.0 / math.sqrt(D), dropout_p, seed, **meta)
        ctx.save_for_backward(q, k, v, rel_emb, out, lse, seed)
        ctx.opts = (dropout_p, block_bwd)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, rel_emb, out, lse, seed = ctx.saved_tensors
        dropout_p, block = ctx.opts
        B, H, t_q, D = q.shape
        t_k, n_rel = k.shape[2], rel_emb.shape[1]
        dout = dout.to(q.dtype).contiguous()
        delta = (dout.float() * out.float()).sum(-1)  # (B, H, Tq) rowsum(dO * O), fp32
        dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
        de = torch.zeros(H, n_rel, D, dtype=torch.float32, device=q.device)
        meta = _meta(D, block, dropout_p, q.dtype)
        common = (*_strides(q, k, v, rel_emb), H, t_q, t_k, n_rel, D, 1.0 / math.sqrt(D), dropout_p, seed)
        _bwd_kv_kernel[(triton.cdiv(t_k, block), B * H)](q, k, v, rel_emb, dout, lse, delta, dk, dv, *common,
                                                         **meta)
        _bwd_q_kernel[(triton.cdiv(t_q, block), B * H)](q, k, v, rel_emb, dout, lse, delta, dq, de, *common,
                                                        **meta)
        return dq, dk, dv, de.to(rel_emb.dtype), None, None, None, None


def attend_triton(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0,
                  block_fwd: int = 64, block_bwd: int = 32) -> Tensor:
    """Fused relative attention (see the module docstring); q on a CUDA device, or on CPU under
    TRITON_INTERPRET=1. k and v are cast to q's dtype (under autocast they already are); E may stay fp32."""
    if triton is None:
        raise RuntimeError("attn_impl='triton' needs the triton package: pip install 'musictx[gpu]'")
    if not q.is_cuda and not interpreting():
        raise RuntimeError("attn_impl='triton' runs on CUDA tensors (or on CPU with TRITON_INTERPRET=1 set "
                           "before import); use attn_impl='auto' to fall back to the efficient kernel")
    # The seed is a one-element int64 tensor on q's device that the kernels load, not an int argument: a new
    # seed is then never a new compile, torch.compile keeps the draw in its graph (no .item() graph break),
    # and Inductor never sees a Python int above 2**31 (torch 2.11 failed on one: 'int' has no 'xreplace').
    seed = (torch.randint(0, 2**62, (1,), device=q.device) if dropout_p > 0
            else torch.zeros(1, dtype=torch.int64, device=q.device))
    k, v = k.to(q.dtype), v.to(q.dtype)
    return TritonRelativeAttention.apply(q, k, v, rel_emb, dropout_p, seed, block_fwd, block_bwd)
