"""Relative self-attention: every kernel against the naive reference, gradients, causality, KV cache."""

import math

import pytest
import torch

from musictx.models.attention import (
    IMPLS,
    PlainSelfAttention,
    RelativeSelfAttention,
    attend_naive,
    attend_skew,
    clipped_table,
    naive_logits,
)
from musictx.models.efficient_attention import attend_efficient, dropout_keep_mask
from musictx.models.kv_cache import KVCache

# "triton" runs on CPU only under Triton's interpreter: tests/test_triton_attention.py; "auto" is efficient on CPU
CPU_IMPLS = tuple(impl for impl in IMPLS if impl != "triton")
KERNELS = {
    "naive": attend_naive,
    "skew": attend_skew,
    "efficient": lambda q, k, v, e, p=0.0: attend_efficient(q, k, v, e, p, block_size=4),
}
# (B, H, T, D, max_rel_dist, block_size): T not divisible by the block, M < T, M >= T, M == 1, one block
MODULE_CASES = [
    (2, 2, 13, 4, 5, 4),
    (1, 3, 16, 4, 16, 4),
    (2, 2, 11, 3, 30, 4),
    (1, 2, 9, 4, 1, 2),
    (2, 1, 7, 4, 3, 16),
    (1, 2, 1, 4, 4, 4),
]


def _loop_reference(q, k, v, rel_emb):
    """Relative attention written out pair by pair, as in the paper's definition."""
    B, H, t_q, D = q.shape
    t_k, n_rel = k.shape[2], rel_emb.shape[1]
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for a in range(t_q):
                i = t_k - t_q + a
                logits = torch.full((t_k,), float("-inf"), dtype=q.dtype)
                for j in range(i + 1):
                    rel = q[b, h, a] @ rel_emb[h, i - j] if i - j < n_rel else 0.0
                    logits[j] = (q[b, h, a] @ k[b, h, j] + rel) / math.sqrt(D)
                out[b, h, a] = logits.softmax(0) @ v[b, h]
    return out


def _qkve(B, H, t_q, t_k, D, n_rel, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(B, H, t_q, D), (B, H, t_k, D), (B, H, t_k, D), (H, n_rel, D)]
    return [torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True) for s in shapes]


def _module(d_model, n_heads, n_rel, block_size, seed=0, **kw):
    torch.manual_seed(seed)
    attn = RelativeSelfAttention(d_model, n_heads, n_rel, block_size=block_size, **kw).double()
    with torch.no_grad():
        attn.rel_emb.normal_()  # make the relative term as large as the content term
    return attn


@pytest.mark.parametrize("t_q,t_k,n_rel", [(6, 6, 3), (6, 6, 10), (3, 8, 4), (1, 5, 2)])
def test_naive_matches_pairwise_definition(t_q, t_k, n_rel):
    q, k, v, e = _qkve(2, 2, t_q, t_k, 3, n_rel)
    torch.testing.assert_close(attend_naive(q, k, v, e), _loop_reference(q, k, v, e))


@pytest.mark.parametrize("impl", ["skew", "efficient"])
@pytest.mark.parametrize("t_q,t_k,n_rel", [(13, 13, 5), (13, 13, 20), (5, 14, 6), (1, 9, 3), (9, 9, 1)])
def test_kernels_match_naive_with_grads(impl, t_q, t_k, n_rel):
    q, k, v, e = _qkve(2, 3, t_q, t_k, 4, n_rel)
    grad_out = torch.randn(2, 3, t_q, 4, dtype=torch.float64)
    ref = attend_naive(q, k, v, e)
    ref_grads = torch.autograd.grad(ref, (q, k, v, e), grad_out)
    out = KERNELS[impl](q, k, v, e)
    grads = torch.autograd.grad(out, (q, k, v, e), grad_out)
    torch.testing.assert_close(out, ref)
    for name, g, g_ref in zip("qkvE", grads, ref_grads, strict=True):
        torch.testing.assert_close(g, g_ref, msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("B,H,T,D,n_rel,block", MODULE_CASES)
def test_switching_impl_on_one_module_changes_nothing(B, H, T, D, n_rel, block):
    """Outputs and gradients of input, projections and E agree across impls on the same instance."""
    attn = _module(H * D, H, n_rel, block)
    x = torch.randn(B, T, H * D, dtype=torch.float64)
    grad_out = torch.randn(B, T, H * D, dtype=torch.float64)
    results = {}
    for impl in ("naive", "skew", "efficient"):
        attn.impl = impl
        xi = x.clone().requires_grad_()
        out = attn(xi)
        grads = torch.autograd.grad(out, [xi, *attn.parameters()], grad_out)
        results[impl] = (out, *grads)
    for impl in ("skew", "efficient"):
        for got, want in zip(results[impl], results["naive"], strict=True):
            torch.testing.assert_close(got, want)


def test_float32_efficient_close_to_naive_with_many_blocks():
    torch.manual_seed(1)
    attn = RelativeSelfAttention(64, 4, 40, block_size=16)
    x = torch.randn(2, 100, 64, requires_grad=True)
    out = attn(x)
    (gx,) = torch.autograd.grad(out.square().sum(), x)
    attn.impl = "naive"
    out_ref = attn(x)
    (gx_ref,) = torch.autograd.grad(out_ref.square().sum(), x)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(gx, gx_ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("p", [0.0, 0.4])
def test_efficient_gradcheck(p):
    """Double-precision gradcheck; with dropout the fixed seed makes the function deterministic."""
    q, k, v, e = _qkve(1, 2, 7, 9, 3, 4)
    seed = torch.tensor(1234)
    fn = lambda q, k, v, e: attend_efficient(q, k, v, e, p, block_size=3, seed=seed)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v, e))


def test_efficient_dropout_matches_masked_reference():
    """The in-kernel dropout equals softmax -> mask/(1-p) -> @ v with the masks the kernel says it drew."""
    B, H, t_q, t_k, D, n_rel, block, p, seed = 2, 2, 7, 10, 3, 4, 3, 0.3, torch.tensor(99)
    q, k, v, e = _qkve(B, H, t_q, t_k, D, n_rel)
    out = attend_efficient(q, k, v, e, p, block_size=block, seed=seed)
    keep = dropout_keep_mask(seed, p, H, B, t_q, t_k, block, dtype=torch.float64)  # head-major
    keep = keep.view(H, B, t_q, t_k).transpose(0, 1)
    table_logits = _logits_reference(q, k, e)
    ref = (table_logits.softmax(-1) * keep / (1 - p)) @ v
    torch.testing.assert_close(out, ref)
    assert (keep == 0).any() and (keep == 1).any()


@pytest.fixture
def one_thread():
    """Head groups are a one-thread layout: with more threads the kernel runs all heads at once."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("group_bytes", [1, 2000])  # one head per group; two heads (B = 2) per group
def test_efficient_in_head_groups_matches_naive_and_its_dropout_mask(monkeypatch, one_thread, group_bytes):
    """Long inputs run head group by head group (each block's logits stay in L2): outputs, every
    gradient, and the dropout stream (drawn group by group, replayed the same way in backward) agree."""
    import musictx.models.efficient_attention as eff

    monkeypatch.setattr(eff, "GROUP_BYTES", group_bytes)
    B, H, t_q, t_k, D, n_rel, block = 2, 3, 9, 12, 4, 5, 4
    assert eff.group_heads(H, B, t_q, t_k, block, 8, torch.device("cpu")) == (1 if group_bytes == 1 else 2)
    q, k, v, e = _qkve(B, H, t_q, t_k, D, n_rel)
    grad_out = torch.randn(B, H, t_q, D, dtype=torch.float64)
    got = [attend_efficient(q, k, v, e, 0.0, block)]
    got += torch.autograd.grad(got[0], (q, k, v, e), grad_out)
    want = [attend_naive(q, k, v, e)]
    want += torch.autograd.grad(want[0], (q, k, v, e), grad_out)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    p, seed = 0.3, torch.tensor(5)
    keep = dropout_keep_mask(seed, p, H, B, t_q, t_k, block, dtype=torch.float64).view(H, B, t_q, t_k).transpose(0, 1)
    ref = (_logits_reference(q, k, e).softmax(-1) * keep / (1 - p)) @ v
    torch.testing.assert_close(attend_efficient(q, k, v, e, p, block, seed=seed), ref)
    assert torch.autograd.gradcheck(lambda *x: attend_efficient(*x, p, block, seed=seed), (q, k, v, e))


def test_head_groups_keep_a_block_of_logits_near_l2_on_one_thread(one_thread):
    from musictx.models.efficient_attention import _head_groups, group_heads

    cpu = torch.device("cpu")
    assert group_heads(8, 1, 2048, 2048, 64, 4, cpu) == 2  # 2 heads x 64 queries x 2048 keys x 4 B = 1 MiB
    assert _head_groups(8, 2) == [(0, 2), (2, 4), (4, 6), (6, 8)] and _head_groups(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert group_heads(8, 1, 8192, 8192, 64, 4, cpu) == 1  # at least one head
    assert group_heads(8, 1, 100, 100, 64, 4, cpu) == 8  # short inputs: one group
    torch.set_num_threads(2)  # several threads: one group (small parallel regions cost more than misses)
    assert group_heads(8, 1, 2048, 2048, 64, 4, cpu) == 8


def test_backward_keeps_forwards_head_groups_when_the_thread_count_changes(monkeypatch, one_thread):
    """The dropout stream is replayed group by group: a backward run on another thread count must use the
    groups its forward used, or the gradients would belong to other masks."""
    q, k, v, e = _qkve(1, 4, 64, 64, 4, 32)
    seed = torch.tensor(3)
    import musictx.models.efficient_attention as eff

    monkeypatch.setattr(eff, "GROUP_BYTES", 10_000)  # one head per group on one thread
    assert eff.group_heads(4, 1, 64, 64, 16, 8, torch.device("cpu")) == 1
    grad_out = torch.randn(1, 4, 64, 4, dtype=torch.float64)
    out = attend_efficient(q, k, v, e, 0.3, 16, seed=seed)
    want = torch.autograd.grad(out, (q, k, v, e), grad_out, retain_graph=True)
    torch.set_num_threads(2)  # the next backward would group differently if it decided again
    got = torch.autograd.grad(out, (q, k, v, e), grad_out)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _logits_reference(q, k, e):
    """Masked, scaled relative logits by the naive route (for building references)."""
    from musictx.models.attention import causal_allowed

    t_q, t_k = q.shape[2], k.shape[2]
    return naive_logits(q, k, e).masked_fill(~causal_allowed(t_q, t_k), float("-inf"))


def test_module_dropout_trains_and_is_off_in_eval():
    attn = _module(16, 2, 6, 4, dropout=0.5)
    x = torch.randn(2, 11, 16, dtype=torch.float64, requires_grad=True)
    attn.train()
    a, b = attn(x), attn(x)
    assert not torch.allclose(a, b)  # fresh masks per call
    a.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(attn.rel_emb.grad).all()
    attn.eval()
    eval_out = attn(x)
    attn.impl = "naive"
    torch.testing.assert_close(eval_out, attn(x))


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_causality(impl):
    attn = _module(12, 3, 4, 4)
    attn.impl = impl
    x = torch.randn(2, 10, 12, dtype=torch.float64)
    out = attn(x)
    for t in (0, 4, 8):
        x2 = x.clone()
        x2[:, t + 1] += torch.randn(2, 12, dtype=torch.float64)
        out2 = attn(x2)
        torch.testing.assert_close(out2[:, : t + 1], out[:, : t + 1])
        assert not torch.allclose(out2[:, t + 1], out[:, t + 1])


def _cached_outputs(attn, x, chunks):
    cache, outs, pos = KVCache(), [], 0
    for n in chunks:
        outs.append(attn(x[:, pos : pos + n], cache))
        pos += n
    assert cache.length == pos == x.shape[1]
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("n_rel", [3, 40])
def test_cache_matches_full_forward(impl, n_rel):
    attn = _module(16, 2, n_rel, 4).eval()
    attn.impl = impl
    x = torch.randn(2, 15, 16, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        torch.testing.assert_close(_cached_outputs(attn, x, [6] + [1] * 9), full)
        torch.testing.assert_close(_cached_outputs(attn, x, [1, 5, 2, 7]), full)


def test_plain_attention_cache_and_causality():
    torch.manual_seed(0)
    attn = PlainSelfAttention(16, 4).double().eval()
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        torch.testing.assert_close(_cached_outputs(attn, x, [5] + [1] * 7), full)
        torch.testing.assert_close(_cached_outputs(attn, x, [3, 4, 5]), full)
        x2 = x.clone()
        x2[:, 6] += 1.0
        torch.testing.assert_close(attn(x2)[:, :6], full[:, :6])


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_zero_relative_table_reduces_to_plain_attention(impl):
    rel = _module(16, 4, 5, 4)
    rel.impl = impl
    plain = PlainSelfAttention(16, 4).double()
    plain.load_state_dict({k: v for k, v in rel.state_dict().items() if k != "rel_emb"})
    with torch.no_grad():
        rel.rel_emb.zero_()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    torch.testing.assert_close(rel(x), plain(x))


def test_unknown_impl_is_rejected():
    with pytest.raises(ValueError):
        RelativeSelfAttention(8, 2, 4, impl="fast")
    attn = RelativeSelfAttention(8, 2, 4)
    attn.impl = "fast"
    with pytest.raises(ValueError):
        attn(torch.randn(1, 3, 8))


# ----- attention probabilities of chosen query rows (the attention-arc picture reads these) --------------
@pytest.mark.parametrize("t, n_rel, rows", [(23, 6, [0, 5, 22]), (40, 64, [39, 17, 3, 17]), (9, 1, [8])])
def test_attention_probs_equal_naive_reference(t, n_rel, rows):
    torch.manual_seed(3)
    attn = RelativeSelfAttention(12, 3, n_rel, block_size=4).double().eval()
    x = torch.randn(2, t, 12, dtype=torch.float64)
    got = attn.attention_probs(x, rows)  # (B, H, R, T)
    q, k, _ = attn.qkv(x).view(2, t, 3, 3, 4).permute(2, 0, 3, 1, 4).unbind(0)
    want = _logits_reference(q, k, clipped_table(attn.rel_emb, t)).softmax(-1)[:, :, rows]
    torch.testing.assert_close(got, want)
    assert got.shape == (2, 3, len(rows), t)


def test_attention_probs_are_the_weights_the_efficient_forward_uses():
    """probs @ v through the output projection gives the layer's own output (efficient kernel, many blocks)."""
    torch.manual_seed(4)
    attn = RelativeSelfAttention(16, 2, 20, block_size=8).double().eval()
    x = torch.randn(1, 50, 16, dtype=torch.float64)
    rows = torch.tensor([49, 30, 8])
    probs = attn.attention_probs(x, rows)  # (1, H, R, T)
    v = attn.qkv(x).view(1, 50, 3, 2, 8)[:, :, 2].transpose(1, 2)  # (1, H, T, D)
    mixed = (probs @ v).transpose(1, 2).reshape(1, len(rows), 16)
    torch.testing.assert_close(attn.proj(mixed), attn(x)[:, rows])
    assert float(probs[0, :, 2, 9:].abs().max()) == 0.0  # row 8 sees no later key


def test_plain_attention_probs_match_sdpa_output():
    torch.manual_seed(5)
    attn = PlainSelfAttention(16, 4).double().eval()
    x = torch.randn(2, 30, 16, dtype=torch.float64)
    rows = torch.tensor([29, 0, 12])
    probs = attn.attention_probs(x, rows)
    v = attn.qkv(x).view(2, 30, 3, 4, 4)[:, :, 2].transpose(1, 2)
    torch.testing.assert_close(attn.proj((probs @ v).transpose(1, 2).reshape(2, 3, 16)), attn(x)[:, rows])


# ----- mixed precision: the efficient kernel under CPU autocast against the fp32 naive reference ---------------
def _under_autocast(kernel, leaves, grad_out, dtype):
    """As in a mixed-precision layer: q, k, v arrive in `dtype` (outputs of autocast matmuls), E is an fp32
    parameter. Returns the output, the gradients of the fp32 leaves, and the dtypes of the kernel's own
    gradients for q, k, v and E."""
    xs = [x.detach().clone().requires_grad_() for x in leaves]
    with torch.autocast("cpu", dtype=dtype):
        low = [x.to(dtype) for x in xs[:3]]
        for x in low:
            x.retain_grad()
        out = kernel(*low, xs[3])
    out.backward(grad_out)
    return out, [x.grad for x in xs], [x.grad.dtype for x in (*low, xs[3])]


def _relative_error(got, want):
    return float((got.detach().double() - want).norm() / want.norm())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("t,block,n_rel", [(70, 32, 35), (150, 32, 64), (300, 64, 150)])
def test_efficient_under_autocast_is_as_accurate_as_skew(dtype, t, block, n_rel):
    """Outputs and the gradients of q, k, v and E against the naive kernel in fp64: the efficient kernel's
    errors (fp32 statistics and accumulators) stay within 1.5x the skew path's under the same autocast."""
    gen = torch.Generator().manual_seed(t)
    leaves = [torch.randn(s, generator=gen) for s in [(2, 2, t, 32)] * 3 + [(2, n_rel, 32)]]
    grad_out = torch.randn(2, 2, t, 32, generator=gen)
    ref64 = [x.double().requires_grad_() for x in leaves]
    ref = attend_naive(*ref64)
    want = [ref.detach(), *torch.autograd.grad(ref, ref64, grad_out.double())]
    errors, dtypes = {}, {}
    efficient = lambda q, k, v, e: attend_efficient(q, k, v, e, 0.0, block)  # noqa: E731
    for name, kernel in (("skew", attend_skew), ("efficient", efficient)):
        out, grads, dtypes[name] = _under_autocast(kernel, leaves, grad_out, dtype)
        assert out.dtype == dtype, name  # answers in the autocast dtype
        errors[name] = [_relative_error(g, w) for g, w in zip([out, *grads], want, strict=True)]
    assert dtypes["efficient"] == [dtype] * 3 + [torch.float32]  # dq, dk, dv in the inputs' dtype, dE fp32
    for what, eff, skew in zip(["out", "dq", "dk", "dv", "dE"], errors["efficient"], errors["skew"], strict=True):
        assert eff <= 1.5 * skew and eff < 2 * torch.finfo(dtype).eps, f"{what}: efficient {eff:.2e}, skew {skew:.2e}"
