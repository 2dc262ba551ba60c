"""The memory-efficient relative-attention kernel: query blocks, logits recomputed in backward.

Same function and conventions as `musictx.models.attention`: q (B, H, Tq, D), k and v (B, H, Tk, D) with
Tk >= Tq (the queries are the last Tq positions), E (H, M, D); distances of M or more get no relative term
(the model clips them by handing in E - E[M - 1]: `musictx.models.attention.shifted_table`), so a query
block's relative matmul covers only its window of M + block - 1 keys. The kernel keeps only the output and
each row's log-sum-exp; backward recomputes every block's logits. No Tq x Tk tensor is ever held.

Per query block, forward is two matmuls for the logits (content over all earlier keys, relative over the
window, lined up by a strided skew), softmax's fused row-wise kernel (each row stays in cache, instead of four
passes over the block), and one matmul for the output; backward is seven matmuls.

Precision: all arithmetic runs in fp32 (fp64 for fp64 inputs) whatever dtypes arrive, so under bf16 or fp16
autocast the row statistics (max, log-sum-exp) and the dq, dk, dv, dE accumulators are fp32. q, k, v are cast
once, when they are repacked head-major (a copy made anyway); the output and the gradients go back in their
inputs' dtypes. Its matmuls run in fp32 under autocast too; on a GPU the Triton kernel is the fast path.

torch.compile: the forward and backward are `torch.library` ops with fake (shape-only) versions and a
registered autograd formula, so compiled graphs keep the kernel as one opaque call, with no graph breaks
around it. Eager calls import none of the compile machinery. The forward op also returns its repacked q, k
and v, which backward reuses instead of repacking them again.

Dropout: one torch.Generator per call, seeded from a seed *tensor* (drawn from torch's RNG inside the graph);
the blocks draw their keep-masks from it in order, and backward replays that stream rather than storing them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Internally batch is folded into heads, head-major: q (HB, Tq, D), k and v (HB, Tk, D), so that a block
# of queries viewed as (H, B*nb, D) meets the per-head distance table in one batched matmul.


def _compute_dtype(x: Tensor) -> torch.dtype:
    return torch.promote_types(x.dtype, torch.float32)  # fp32, or fp64 for fp64 inputs


def _take(buf: Tensor, *shape: int) -> Tensor:
    """A contiguous (shape) view at the start of a flat scratch buffer.

    Every query block reuses the same few scratch buffers: fresh multi-MiB tensors per block are
    returned to the OS by glibc and page-faulted back in on the next block, which on CPU cost more
    than the matmuls themselves.
    """
    return buf[: math.prod(shape)].view(shape)


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
    kT = kT[:, : q_k.shape[2], :end]  # kT's last row is ones: used only by the augmented q of backward
    if j0 == 0:
        torch.baddbmm(rel, q_k, kT, out=logits)
    else:
        torch.bmm(q_k, kT, out=logits)
        logits[:, :, j0:] += rel
    masked = torch.ones(nb, nb, dtype=torch.bool, device=qs.device).triu_(1)
    logits[:, :, start:].masked_fill_(masked, float("-inf"))
    return logits


def _block_attend(qs, kT, vT, tableT, start, end, n_rel, drop, scratch) -> tuple[Tensor, Tensor]:
    """Output (HB, nb, D) and log-sum-exp (HB, nb) of one query block; `drop` = (keep mask, p) or None.
    kT and vT are the (HB, D+1, Tk) views that backward needs."""
    logits = _block_logits(qs, kT, qs, tableT, start, end, n_rel, scratch)
    row_max = logits.amax(dim=-1)
    # softmax's fused kernel works row by row in cache; the relative term's scratch is free again
    probs = torch.ops.aten._softmax.out(logits, -1, False, out=_take(scratch["qe"], *logits.shape))
    # log-sum-exp = max - log(largest probability): the largest probability is 1 / sum(exp(x - max))
    lse = probs.amax(dim=-1).log_().neg_().add_(row_max)
    if drop is not None:
        probs.mul_(drop[0])
    out = torch.bmm(probs, vT[:, : qs.shape[2], :end].transpose(1, 2))  # (HB, nb, D)
    if drop is not None:
        out.mul_(1 / (1 - drop[1]))  # on the (nb, D) output, not the (nb, end) probabilities
    return out, lse


def _block_grads(saved, q_aug, d_aug, start, end, drop, grads, scratch) -> Tensor:
    """Accumulate one query block's dk, dv, dtable into `grads`; return its dqs (HB, nb, D).

    q_aug = [q, -lse] and d_aug = [dout, -row_dot] (HB, nb, D+1): against kT's and vT's extra row of
    ones, q_aug @ kT gives logits - lse and d_aug @ vT gives dP - row_dot straight out of the matmuls.
    """
    kT, vT, tableT, n_rel = saved
    dk, dv, dtable = grads
    HB, nb, D = q_aug.shape[0], q_aug.shape[1], q_aug.shape[2] - 1
    H = tableT.shape[0]
    qs, dout = q_aug[..., :D], d_aug[..., :D]
    probs = _block_logits(q_aug, kT, qs, tableT, start, end, n_rel, scratch).exp_()
    # dlogits go to the (now free) qe scratch with nb-1 leading zeros per head: see the inverse skew
    slab = nb - 1 + nb * end
    buf = _take(scratch["qe"], HB, slab)
    dlogits = buf[:, nb - 1 :].view(HB, nb, end)
    if drop is None:
        torch.bmm(d_aug, vT[:, :, :end], out=dlogits)
        dv[:, :end].baddbmm_(probs.transpose(1, 2), dout)
        dlogits.mul_(probs)  # softmax backward: P * (dP - rowsum(P * dP))
    else:
        keep = drop[0].mul_(1 / (1 - drop[1]))
        torch.bmm(dout, vT[:, :D, :end], out=dlogits).mul_(keep).add_(d_aug[..., D:])
        dlogits.mul_(probs)
        dv[:, :end].baddbmm_(probs.mul_(keep).transpose(1, 2), dout)
    dqs = torch.bmm(dlogits, kT[:, :D, :end].transpose(1, 2))  # (HB, nb, D)
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
    qs = qs.reshape(H, -1, D)  # (H, B*nb, D)
    dqs.view(H, -1, D).baddbmm_(dqe, tableT[:, :, rows].transpose(1, 2))
    dtable[:, rows].baddbmm_(dqe.transpose(1, 2), qs)
    return dqs


def _fold_heads(x: Tensor, dtype: torch.dtype, scale: float = 1.0, extra: int = 0) -> Tensor:
    """(B, H, T, D) -> scale * x as (H*B, T, D + extra) in `dtype`, head-major: the one copy where
    low-precision inputs are widened (scaled after the cast, so no extra rounding). The `extra`
    columns are left for the caller to fill."""
    B, H, T, D = x.shape
    out = torch.empty(H, B, T, D + extra, dtype=dtype, device=x.device)
    body = out[..., :D]
    body.copy_(x.transpose(0, 1))
    if scale != 1.0:
        body.mul_(scale)
    return out.view(H * B, T, D + extra)


def _fold_heads_t(x: Tensor, dtype: torch.dtype) -> Tensor:
    """(B, H, T, D) -> (H*B, D+1, T) in `dtype`: x plus a last column of ones, stored (H*B, T, D+1) and
    returned transposed. The one copy of k (and of v) that forward and backward share. Copying rows
    whole is several times faster than transposing them, and BLAS reads either layout at the same
    speed; the ones let backward's matmuls subtract a per-row constant for free (see `_block_grads`)."""
    folded = _fold_heads(x, dtype, extra=1)
    folded[..., -1] = 1.0
    return folded.transpose(1, 2)


def _head_major(x: Tensor, dtype: torch.dtype) -> Tensor:
    """(B, H, T, D) -> (H*B, T, D) in `dtype`: a view when x is a head-major transpose (the kernel's
    own output), else a copy."""
    B, H, T, D = x.shape
    return x.transpose(0, 1).reshape(H * B, T, D).to(dtype)


def _unfold_heads(x: Tensor, B: int, dtype: torch.dtype) -> Tensor:
    """(H*B, T, D) -> (B, H, T, D) in `dtype`: a transposed view of a head-major tensor."""
    HB, T, D = x.shape
    return x.to(dtype).view(HB // B, B, T, D).transpose(0, 1)


# On one CPU thread, a query block's logits for a group of heads are kept near this many bytes: the
# block's elementwise passes (mask, softmax, exp, the dP product) then run in the core's L2 (1 MiB on
# Zen 4) instead of L3. With more threads every op is a parallel region, and three times as many
# smaller ones cost more than the cache misses they save (measured), so all heads run at once there.
GROUP_BYTES = 1 << 20


def group_heads(n_heads: int, batch: int, t_q: int, t_k: int, block_size: int, itemsize: int,
                device: torch.device) -> int:
    """How many heads the blocks run over at once (whole heads, at least one). Decided once per forward
    and handed to its backward, which must replay the dropout stream in the same order."""
    if device.type != "cpu" or torch.get_num_threads() > 1:
        return n_heads
    per_head = batch * min(block_size, t_q) * t_k * itemsize
    return max(1, min(n_heads, GROUP_BYTES // per_head))


def _head_groups(n_heads: int, size: int) -> list[tuple[int, int]]:
    """(first head, last head + 1) of each group of `size` heads."""
    return [(h, min(h + size, n_heads)) for h in range(0, n_heads, size)]


def _query_blocks(t_q: int, t_k: int, block_size: int):
    """Yield (query slice, absolute start, absolute end) per block; queries are the last t_q of t_k."""
    for a0 in range(0, t_q, block_size):
        a1 = min(a0 + block_size, t_q)
        yield slice(a0, a1), t_k - t_q + a0, t_k - t_q + a1


# ----- dropout: one generator per call, replayed in backward ---------------------------------------
def _keep_stream(seed: Tensor | None, p: float, device: torch.device) -> torch.Generator | None:
    if p == 0:
        return None
    if seed is None:
        raise ValueError("dropout_p > 0 needs a seed tensor")
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


def _draw_keep(gen: torch.Generator | None, p: float, out: Tensor):
    """(out filled with the next 0/1 keep-mask of the stream, p), or None without dropout."""
    if gen is None:
        return None
    return torch.rand(out.shape, generator=gen, out=out, dtype=out.dtype, device=out.device).ge_(p), p


def dropout_keep_mask(seed: Tensor, p: float, n_heads: int, batch: int, t_q: int, t_k: int, block_size: int,
                      dtype: torch.dtype = torch.float32) -> Tensor:
    """The (H*B, Tq, Tk) 0/1 keep-mask the kernel applies for `seed` (rows head-major, as inside the
    kernel; keys past each query block's end are 0), drawn in the kernel's order: head group by head
    group (as on this thread count), block by block. `dtype` is the kernel's compute dtype. For tests."""
    gen = _keep_stream(seed, p, torch.device("cpu"))
    keep = torch.zeros(n_heads * batch, t_q, t_k, dtype=dtype)
    size = group_heads(n_heads, batch, t_q, t_k, block_size, dtype.itemsize, torch.device("cpu"))
    for h0, h1 in _head_groups(n_heads, size):
        for blk, _, end in _query_blocks(t_q, t_k, block_size):
            shape = ((h1 - h0) * batch, blk.stop - blk.start, end)
            keep[h0 * batch : h1 * batch, blk, :end] = _draw_keep(gen, p, torch.empty(shape, dtype=dtype))[0]
    return keep


def _scratch(like: Tensor, t_k: int, block_size: int, dropout: bool) -> dict:
    HB, t_q = like.shape[:2]
    numel = HB * min(block_size, t_q) * t_k + HB * block_size  # + leading zeros of the dlogits slab
    return {name: like.new_empty(numel) for name in ("logits", "qe", "keep")[: 3 if dropout else 2]}


def _keep_buffer(scratch: dict, gen, p: float, HB: int, blk: slice, end: int):
    return None if gen is None else _draw_keep(gen, p, _take(scratch["keep"], HB, blk.stop - blk.start, end))


# ----- forward and backward over all blocks (the ops' bodies) -------------------------------------
def forward_blocks(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float, seed: Tensor | None,
                   block_size: int) -> tuple[Tensor, ...]:
    """Output (B, H, Tq, D) in q's dtype, then in the compute dtype the repacked inputs that backward
    reuses: q_aug (H*B, Tq, D+1), q scaled by 1/sqrt(D) with each row's -log-sum-exp as its last column,
    kT and vT (H*B, D+1, Tk)."""
    B, H, t_q, D = q.shape
    t_k, n_rel, dtype = k.shape[2], rel_emb.shape[1], _compute_dtype(q)
    q_aug = _fold_heads(q, dtype, 1.0 / math.sqrt(D), extra=1)  # scale once: every logit is linear in q
    qs = q_aug[..., :D]
    kT, vT = _fold_heads_t(k, dtype), _fold_heads_t(v, dtype)
    tableT = _distance_table(rel_emb.to(dtype), block_size).transpose(1, 2).contiguous()  # (H, D, M+bs-1)
    out = q_aug.new_empty(H * B, t_q, D)
    groups = _head_groups(H, group_heads(H, B, t_q, t_k, block_size, dtype.itemsize, q.device))
    scratch = _scratch(out[: groups[0][1] * B], t_k, block_size, dropout_p > 0)  # the first group is the largest
    gen = _keep_stream(seed, dropout_p, q.device)
    for h0, h1 in groups:
        rows, table = slice(h0 * B, h1 * B), tableT[h0:h1]
        for blk, start, end in _query_blocks(t_q, t_k, block_size):
            drop = _keep_buffer(scratch, gen, dropout_p, (h1 - h0) * B, blk, end)
            out[rows, blk], lse = _block_attend(qs[rows, blk], kT[rows], vT[rows], table, start, end, n_rel, drop,
                                                scratch)
            q_aug[rows, blk, D] = lse.neg_()
    return _unfold_heads(out, B, q.dtype), q_aug, kT, vT


def backward_blocks(dout: Tensor, q_aug: Tensor, kT: Tensor, vT: Tensor, rel_emb: Tensor, out: Tensor,
                    dropout_p: float, seed: Tensor | None, block_size: int, heads: int) -> tuple[Tensor, ...]:
    """dq, dk, dv (B, H, T, D) and dE (H, M, D), all in the compute dtype (the caller casts them back).

    Works on forward's own repacked copies of q, k and v and on a view of its output: the only copy
    of a T x D tensor made here is dout's, into the head-major layout."""
    B, HB, t_q, D, t_k = dout.shape[0], q_aug.shape[0], q_aug.shape[1], dout.shape[3], kT.shape[2]
    H, n_rel, dtype = HB // B, rel_emb.shape[1], q_aug.dtype
    tableT = _distance_table(rel_emb.to(dtype), block_size).transpose(1, 2).contiguous()
    # [dout, -rowsum(P * dP)] (HB, Tq, D+1) for every block at once
    d_aug = _fold_heads(dout, dtype, extra=1)
    d_aug[..., D] = (d_aug[..., :D] * _head_major(out, dtype)).sum(-1).neg_()
    dtable = tableT.new_zeros(H, tableT.shape[2], D)  # (H, M + bs - 1, D)
    dqs, dk, dv = q_aug.new_empty(HB, t_q, D), q_aug.new_zeros(HB, t_k, D), q_aug.new_zeros(HB, t_k, D)
    groups = _head_groups(H, heads)  # forward's groups, whatever the thread count is now
    scratch = _scratch(dqs[: groups[0][1] * B], t_k, block_size, dropout_p > 0)
    gen = _keep_stream(seed, dropout_p, q_aug.device)
    for h0, h1 in groups:  # the same groups and blocks as forward: the same dropout stream
        rows = slice(h0 * B, h1 * B)
        saved, grads = (kT[rows], vT[rows], tableT[h0:h1], n_rel), (dk[rows], dv[rows], dtable[h0:h1])
        for blk, start, end in _query_blocks(t_q, t_k, block_size):
            drop = _keep_buffer(scratch, gen, dropout_p, (h1 - h0) * B, blk, end)
            dqs[rows, blk] = _block_grads(saved, q_aug[rows, blk], d_aug[rows, blk], start, end, drop, grads,
                                          scratch)
    del scratch, d_aug  # free them before the outputs below are allocated
    drel = dtable[:, block_size - 1 :].flip(1)  # drop the zero-pad rows; flip copies
    dq = _unfold_heads(dqs.mul_(1.0 / math.sqrt(D)), B, dtype)
    return dq, _unfold_heads(dk, B, dtype), _unfold_heads(dv, B, dtype), drel


# ----- the ops: opaque to torch.compile, differentiable through a registered backward ---------------
# Registered with the low-level Library API rather than `torch.library.custom_op`, which wraps every kernel in
# `torch._disable_dynamo`: its first call imports all of torch._dynamo in processes that never compile anything
# (generation, the app, the benches). The names carry a version: torch.compile's on-disk caches key a graph by
# the op's name, not its Python code, so a changed schema under the old name would replay stale backwards.
_LIB = torch.library.Library("musictx", "FRAGMENT")  # module-level: the registrations live as long as it
_LIB.define("relative_attention_v4(Tensor q, Tensor k, Tensor v, Tensor rel_emb, float dropout_p, Tensor? seed, "
            "int block_size) -> (Tensor, Tensor, Tensor, Tensor)")
_LIB.define("relative_attention_v4_backward(Tensor dout, Tensor q_aug, Tensor kT, Tensor vT, Tensor rel_emb, "
            "Tensor out, float dropout_p, Tensor? seed, int block_size, int heads) -> (Tensor, Tensor, Tensor, Tensor)")


def _attention_impl(q, k, v, rel_emb, dropout_p, seed, block_size):
    # autocast stays on below the op's dispatch; the body picks its own precision
    with torch.autocast(q.device.type, enabled=False):
        return forward_blocks(q, k, v, rel_emb, dropout_p, seed, block_size)


def _attention_backward_impl(dout, q_aug, kT, vT, rel_emb, out, dropout_p, seed, block_size, heads):
    with torch.autocast(q_aug.device.type, enabled=False):
        return backward_blocks(dout, q_aug, kT, vT, rel_emb, out, dropout_p, seed, block_size, heads)


_LIB.impl("relative_attention_v4", _attention_impl, "CompositeExplicitAutograd")
_LIB.impl("relative_attention_v4_backward", _attention_backward_impl, "CompositeExplicitAutograd")


@torch.library.register_fake("musictx::relative_attention_v4", lib=_LIB)
def _(q, k, v, rel_emb, dropout_p, seed, block_size):
    B, H, t_q, D = q.shape
    t_k, dtype = k.shape[2], _compute_dtype(q)
    out = q.new_empty(H, B, t_q, D).transpose(0, 1)  # the real output's head-major strides
    kT, vT = (q.new_empty(H * B, t_k, D + 1, dtype=dtype).transpose(1, 2) for _ in range(2))
    return out, q.new_empty(H * B, t_q, D + 1, dtype=dtype), kT, vT


@torch.library.register_fake("musictx::relative_attention_v4_backward", lib=_LIB)
def _(dout, q_aug, kT, vT, rel_emb, out, dropout_p, seed, block_size, heads):
    B, H, t_q, D = dout.shape
    t_k = kT.shape[2]

    def like(t):
        return q_aug.new_empty(H, B, t, D).transpose(0, 1)

    return like(t_q), like(t_k), like(t_k), q_aug.new_empty(rel_emb.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, rel_emb, dropout_p, seed, block_size = inputs
    out, q_aug, kT, vT = output
    # forward's own repacked q, k, v and its output, not the inputs: backward then copies none of them
    ctx.save_for_backward(q_aug, kT, vT, rel_emb, out, seed)
    B, H, t_q, _ = q.shape  # forward just ran, in this thread: the same grouping as it used
    heads = group_heads(H, B, t_q, k.shape[2], block_size, q_aug.dtype.itemsize, q.device)
    ctx.opts = (dropout_p, block_size, heads, (q.dtype, k.dtype, v.dtype, rel_emb.dtype))
    ctx.mark_non_differentiable(q_aug, kT, vT)
    ctx.set_materialize_grads(False)  # else autograd allocates zero gradients for the three extras


def _backward(ctx, dout, *_extras):
    if dout is None:  # the output itself was not used
        return (None,) * 7
    q_aug, kT, vT, rel_emb, out, seed = ctx.saved_tensors
    dropout_p, block_size, heads, dtypes = ctx.opts
    grads = torch.ops.musictx.relative_attention_v4_backward.default(dout, q_aug, kT, vT, rel_emb, out, dropout_p,
                                                                     seed, block_size, heads)
    return *(g.to(dtype) for g, dtype in zip(grads, dtypes, strict=True)), None, None, None


torch.library.register_autograd("musictx::relative_attention_v4", _backward, setup_context=_setup_context, lib=_LIB)


def attend_efficient(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0,
                     block_size: int = 64, seed: Tensor | None = None) -> Tensor:
    """Memory-efficient relative attention (B, H, Tq, D) in q's dtype; see the module docstring.

    With dropout the keep-masks come from `seed` (an int64 tensor), drawn from torch's RNG when None.
    """
    if dropout_p > 0 and seed is None:
        seed = torch.randint(2**62, (), dtype=torch.int64)  # a tensor: no .item() in compiled graphs
    return torch.ops.musictx.relative_attention_v4.default(q, k, v, rel_emb, dropout_p, seed, block_size)[0]
