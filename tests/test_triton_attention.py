"""The fused Triton kernel against the naive reference, on CPU through Triton's interpreter.

Triton builds its kernels, and its own library functions (tl.sum, tl.rand, ...), for the CPU interpreter only
when TRITON_INTERPRET=1 is set before `import triton`. When this module is imported first, it sets the
variable and runs the tests here; when something imported triton earlier in the session (lightning does,
in test_data.py), one test re-runs this file in a fresh Python process with the variable set. Shapes are
tiny: the interpreter runs every tile op in numpy.
"""

import math
import os
import subprocess
import sys

import pytest
import torch

IN_PROCESS = "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") == "1"
if IN_PROCESS:
    os.environ["TRITON_INTERPRET"] = "1"  # stays set: this process's triton is the interpreter's from now on
pytest.importorskip("triton", reason="triton is not installed (pip install 'musictx[gpu]')")
import triton.language as tl  # noqa: E402

import musictx.kernels.triton_attention as ta  # noqa: E402
from musictx.models.attention import (  # noqa: E402
    RelativeSelfAttention,
    attend_naive,
    causal_allowed,
    relative_table,
)
from musictx.models.kv_cache import KVCache  # noqa: E402

interpreted = pytest.mark.skipif(not IN_PROCESS, reason="triton was imported before TRITON_INTERPRET=1 was set; "
                                 "test_in_a_fresh_process runs these tests")


@pytest.mark.skipif(IN_PROCESS, reason="the tests of this file run in this process")
def test_in_a_fresh_process():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _inputs(B, H, t_q, t_k, D, n_rel, seed=0):
    """float64 q, k, v, E and an output gradient."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(B, H, t_q, D), (B, H, t_k, D), (B, H, t_k, D), (H, n_rel, D), (B, H, t_q, D)]
    return [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]


def _grads(fn, xs, grad_out):
    xs = [x.detach().requires_grad_() for x in xs]
    out = fn(*xs)
    return [out, *torch.autograd.grad(out, xs, grad_out)]


def _assert_close_to_reference(got, want, atol, rtol):
    for name, g, w in zip(["out", "dq", "dk", "dv", "dE"], got, want, strict=True):
        torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol, msg=lambda m, name=name: f"{name}: {m}")


# (Tq, Tk, D, M, block_fwd, block_bwd): ragged tiles, a head size padded to 16 and tiles M or more behind
# (the "far" loops) with M < L; M >= L with forward and backward tiles apart; cached queries (Tq < Tk), M = 1
CASES = [(37, 37, 12, 10, 16, 16), (21, 21, 16, 40, 32, 16), (5, 29, 16, 1, 16, 16)]


@interpreted
@pytest.mark.parametrize("t_q,t_k,D,n_rel,block_fwd,block_bwd", CASES)
def test_matches_naive_in_outputs_and_gradients(t_q, t_k, D, n_rel, block_fwd, block_bwd):
    q, k, v, e, grad_out = _inputs(1, 2, t_q, t_k, D, n_rel)
    want = _grads(attend_naive, (q, k, v, e), grad_out)
    fused = lambda q, k, v, e: ta.attend_triton(q, k, v, e, 0.0, block_fwd, block_bwd)  # noqa: E731
    got = _grads(fused, [x.float() for x in (q, k, v, e)], grad_out.float())
    _assert_close_to_reference(got, want, atol=1e-5, rtol=1e-4)  # fp32 kernel vs fp64 reference


@interpreted
def test_half_inputs_with_fp32_embeddings():
    """As under fp16 autocast: q, k, v in half, E a float32 parameter; statistics stay fp32 inside."""
    q, k, v, e, grad_out = _inputs(1, 2, 20, 20, 16, 9, seed=1)
    want = _grads(attend_naive, (q, k, v, e), grad_out)
    fused = lambda q, k, v, e: ta.attend_triton(q, k, v, e, 0.0, 16, 16)  # noqa: E731
    got = _grads(fused, [q.half(), k.half(), v.half(), e.float()], grad_out.half())
    assert got[0].dtype == torch.float16 and got[4].dtype == torch.float32
    _assert_close_to_reference(got, want, atol=2e-2, rtol=2e-2)


if ta.triton is not None:

    @ta.triton.jit
    def _keep_mask_kernel(OUT, seed, t_q, t_k, p_drop, BQ: tl.constexpr, BK: tl.constexpr):
        bh = tl.program_id(0)
        rows, cols = tl.arange(0, BQ), tl.arange(0, BK)
        keep = ta._keep(seed, bh, rows, cols, t_k, p_drop)
        mask = (rows[:, None] < t_q) & (cols[None, :] < t_k)
        tl.store(OUT + bh * t_q * t_k + rows[:, None] * t_k + cols[None, :], keep.to(tl.float32), mask=mask)


@interpreted
def test_dropout_matches_masked_reference():
    """In-kernel dropout = softmax -> keep / (1 - p) -> @ v with the kernel's own masks, gradients too."""
    B, H, t_q, t_k, D, n_rel, p, seed = 1, 2, 19, 23, 16, 7, 0.3, 2**40 + 5
    q, k, v, e, grad_out = _inputs(B, H, t_q, t_k, D, n_rel, seed=2)
    keep = torch.empty(B, H, t_q, t_k)
    _keep_mask_kernel[(B * H,)](keep, seed, t_q, t_k, p, BQ=32, BK=32)
    assert 0.5 < keep.mean() < 0.9

    def reference(q, k, v, e):
        table = relative_table(e, t_q, t_k)
        logits = (q @ k.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, table)) / math.sqrt(D)
        probs = logits.masked_fill(~causal_allowed(t_q, t_k), float("-inf")).softmax(-1)
        return (probs * keep.double() / (1 - p)) @ v

    want = _grads(reference, (q, k, v, e), grad_out)
    fused = lambda q, k, v, e: ta.TritonRelativeAttention.apply(q, k, v, e, p, torch.tensor([seed]), 16, 16)  # noqa: E731
    got = _grads(fused, [x.float() for x in (q, k, v, e)], grad_out.float())
    _assert_close_to_reference(got, want, atol=1e-5, rtol=1e-4)


def _module(impl, seed=0):
    torch.manual_seed(seed)
    attn = RelativeSelfAttention(32, 2, 11, impl=impl, block_size=8)
    with torch.no_grad():
        attn.rel_emb.normal_()  # as large as the content term
    return attn


@interpreted
def test_module_impl_triton_matches_naive_and_its_cache():
    attn = _module("triton")
    x = torch.randn(1, 26, 32, requires_grad=True)
    out = attn(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *attn.parameters()])
    attn.impl = "naive"
    ref = attn(x)
    ref_grads = torch.autograd.grad(ref.square().sum(), [x, *attn.parameters()])
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    for g, g_ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, g_ref, atol=1e-4, rtol=1e-4)
    attn.impl = "triton"
    cache, chunks = KVCache(), []
    with torch.no_grad():
        for a, b in ((0, 20), (20, 21), (21, 26)):  # a prompt, one decoding step, a few tokens
            chunks.append(attn(x[:, a:b], cache))
    torch.testing.assert_close(torch.cat(chunks, dim=1), ref.detach(), atol=1e-5, rtol=1e-4)


@interpreted
def test_auto_is_the_efficient_kernel_on_cpu():
    attn = _module("auto")
    x = torch.randn(1, 26, 32)
    out = attn(x)
    attn.impl = "efficient"
    assert torch.equal(out, attn(x))


@interpreted
def test_bad_block_is_rejected():
    q, k, v, e, _ = _inputs(1, 1, 4, 4, 16, 2)
    with pytest.raises(ValueError, match="power of two"):
        ta.attend_triton(q.float(), k.float(), v.float(), e.float(), block_fwd=24)


def test_the_module_picks_the_triton_kernel_imported_alone():
    """`RelativeSelfAttention(impl="triton")` with no other import runs the Triton kernel: it imports it on
    first use (the kernel's autograd Function is applied) and matches the naive kernel."""
    code = """
import sys, torch
from musictx.models.attention import RelativeSelfAttention
attn = RelativeSelfAttention(d_model=32, n_heads=2, max_rel_dist=16, impl="triton")
assert "musictx.kernels.triton_attention" not in sys.modules
x = torch.randn(1, 20, 32)
attn(x)
assert sys.modules["musictx.kernels.triton_attention"].interpreting()
x.requires_grad_(True)
out = attn(x)
def graph(fn, seen):
    if fn is not None and fn not in seen:
        seen.add(fn)
        for nxt, _ in fn.next_functions:
            graph(nxt, seen)
    return {type(f).__name__ for f in seen}
nodes = graph(out.grad_fn, set())
assert "TritonRelativeAttentionBackward" in nodes, nodes
attn.impl = "naive"
torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-4)
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
