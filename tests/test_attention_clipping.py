"""Relative attention past its table (distances clip to the last row, in every kernel and in cached decoding),
and what the kernels import: the efficient one with the model alone, triton named where it is missing. The
kernels against the naive reference: `tests/test_attention.py`."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from musictx.models.attention import clipped_table
from tests.test_attention import CPU_IMPLS, _cached_outputs, _module


# ----- distances past the table are clipped to its last row (Shaw et al.), not given no term ----------------
def _clipped_pairwise(x, attn):
    """The module's output written out pair by pair with E[min(i - j, M - 1)] (independent of clipped_table)."""
    B, T, _ = x.shape
    q, k, v = attn.qkv(x).view(B, T, 3, attn.n_heads, attn.d_head).permute(2, 0, 3, 1, 4).unbind(0)
    n_rel = attn.rel_emb.shape[1]
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(0, n_rel - 1)  # (T, T)
    table = attn.rel_emb[:, dist]  # (H, T, T, D)
    logits = (q @ k.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, table)) / math.sqrt(attn.d_head)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    y = logits.masked_fill(future, float("-inf")).softmax(-1) @ v  # (B, H, T, D)
    return attn.proj(y.transpose(1, 2).reshape(B, T, -1))


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("T, n_rel, block", [(13, 5, 4), (9, 1, 2), (20, 7, 16)])
def test_distances_past_the_table_use_its_last_row(impl, T, n_rel, block):
    attn = _module(8, 2, n_rel, block)
    attn.impl = impl
    x = torch.randn(2, T, 8, dtype=torch.float64)
    torch.testing.assert_close(attn(x), _clipped_pairwise(x, attn))
    (grad,) = torch.autograd.grad(attn(x).square().sum(), [attn.rel_emb])
    want = torch.autograd.grad(_clipped_pairwise(x, attn).square().sum(), [attn.rel_emb])[0]
    torch.testing.assert_close(grad, want)
    assert grad[:, -1].abs().sum() > 0  # the far keys train the last row


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_cached_decoding_past_the_table_clips_too(impl):
    attn = _module(8, 2, 3, 4).eval()
    attn.impl = impl
    x = torch.randn(1, 12, 8, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(_cached_outputs(attn, x, [5] + [1] * 7), _clipped_pairwise(x, attn))


def test_clipped_table_is_the_table_itself_when_it_covers_the_keys():
    e = torch.randn(2, 6, 3)
    assert clipped_table(e, 6) is e
    longer = clipped_table(e, 9)
    assert longer.shape == (2, 9, 3) and torch.equal(longer[:, 6:], e[:, 5:6].expand(2, 3, 3))


def test_long_keys_reach_the_kernel_as_a_shifted_table_of_m_minus_1_rows(monkeypatch):
    """Past the table the efficient kernel gets E[:M-1] - E[M-1] (softmax ignores the per-row q . E[M-1]),
    not the clipped (H, Tk, D) table: its relative window stops at M - 1. Output and dE stay the clipped
    definition's; with keys inside the table it gets E itself."""
    import musictx.models.attention as attention_module

    tables = []
    real = attention_module.attend_efficient

    def spy(q, k, v, rel_emb, *args):
        tables.append(rel_emb.detach().clone())
        return real(q, k, v, rel_emb, *args)

    monkeypatch.setattr(attention_module, "attend_efficient", spy)
    attn = _module(8, 2, 5, 4)
    x = torch.randn(2, 13, 8, dtype=torch.float64)
    torch.testing.assert_close(attn(x), _clipped_pairwise(x, attn))
    e = attn.rel_emb.detach()
    torch.testing.assert_close(tables[-1], e[:, :4] - e[:, 4:])
    (grad,) = torch.autograd.grad(attn(x).square().sum(), [attn.rel_emb])
    want = torch.autograd.grad(_clipped_pairwise(x, attn).square().sum(), [attn.rel_emb])[0]
    torch.testing.assert_close(grad, want)
    attn(x[:, :5])  # 5 keys, M = 5: nothing is clipped
    assert tables[-1].shape == (2, 5, 4) and torch.equal(tables[-1], e)


def test_the_efficient_kernel_runs_with_the_model_alone():
    """Imported alone, as a user reading the model imports it, impl "efficient" runs the blockwise op (forward
    and its hand-written backward), imports nothing of `musictx.kernels` or triton, and its first call
    imports few new modules (no compile machinery)."""
    code = """
import sys, torch
from musictx.models.attention import RelativeSelfAttention
attn = RelativeSelfAttention(d_model=16, n_heads=2, max_rel_dist=64, impl="efficient", block_size=8)
x = torch.randn(2, 40, 16, requires_grad=True)
before = set(sys.modules)
attn(x).sum().backward()
new = sorted(set(sys.modules) - before)
assert not [m for m in sys.modules if m.startswith(("musictx.kernels", "triton"))], new
assert len(new) <= 50, new
with torch.profiler.profile() as prof:  # imports much of its own: after the count
    attn(x).sum().backward()
names = {e.name for e in prof.events()}
assert {"musictx::relative_attention_v4", "musictx::relative_attention_v4_backward"} <= names, names
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_triton_without_the_package_is_named_in_the_error(monkeypatch):
    import musictx.models.attention as attention_module

    monkeypatch.setattr(attention_module, "triton_kernel", lambda: None)
    attn = _module(8, 2, 4, 4, impl="triton")
    with pytest.raises(RuntimeError, match="attn_impl='triton' needs the triton package"):
        attn(torch.randn(1, 9, 8, dtype=torch.float64))
