"""The efficient kernel's registration and memory: eager calls import no compile machinery, the ops still
trace whole under torch.compile (and autocast), and backward reuses forward's repacked q, k and v."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from bench.attention_cases import peak_tensor_bytes
from musictx.models.attention import attend_naive
from musictx.models.efficient_attention import attend_efficient

# Modules of the compile stack that a process which never compiles must not import.
COMPILE_STACK = ("torch._dynamo", "torch._inductor", "sympy", "torch.fx.experimental.symbolic_shapes")

FIRST_CALLS = """
import json, sys, torch
from musictx.models import MusicTransformer
import musictx.models.efficient_attention as eff

calls = []
real = eff.forward_blocks
eff.forward_blocks = lambda *a: calls.append(1) or real(*a)  # proves the kernel itself ran
torch.manual_seed(0)
net = MusicTransformer(64, d_model=32, n_layers=2, n_heads=2, d_ff=64, max_seq_len=128, attn_block_size=16)
ids = torch.randint(0, 64, (2, 48))
before = set(sys.modules)
net(ids).mean().backward()  # 48 tokens > one block of 16: the efficient kernel, forward and backward
with torch.no_grad():
    state = net.eval().init_cache()
    net(ids[:, :40], cache=state)  # prompt (efficient kernel), then one cached step
    net(ids[:, 40:41], cache=state)
print(json.dumps({"calls": len(calls), "new": sorted(set(sys.modules) - before),
                  "at_import": [m for m in before if m.split(".")[0] in ("sympy",) or m.startswith("torch._dynamo")]}))
"""


def test_first_eager_calls_import_no_compile_machinery():
    """A fresh process: first training step and first cached generation import (almost) nothing."""
    done = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, timeout=300,
                          check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["calls"] == 2 * 2  # two layers, in the training forward and in the prompt
    assert report["at_import"] == []
    stack = [m for m in report["new"] if m.startswith(COMPILE_STACK)]
    assert stack == [], stack
    # custom_op's _disable_dynamo wrapper imported ~900 modules on the first call
    assert len(report["new"]) < 30, report["new"]


def test_backward_reuses_the_forward_copies_of_q_k_v():
    """Backward's peak of live bytes, in units of one of q, k, v: its gradients (3) + the head-major dout
    (1) + about one of block scratch. Repacking q, k, v and out again, as before, peaked at 11.5."""
    torch.manual_seed(0)
    B, H, T, D, M, block = 1, 4, 512, 32, 64, 16
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    rel = torch.randn(H, M, D, requires_grad=True)
    grad = torch.randn(B, H, T, D)
    out = attend_efficient(q, k, v, rel, 0.0, block)
    size = q.numel() * q.element_size()
    peak = peak_tensor_bytes(lambda: out.backward(grad)) / size
    assert peak < 6.5, f"backward peaked at {peak:.2f} x the size of q"
    expected = attend_naive(*(x.detach().requires_grad_() for x in (q, k, v, rel)))
    torch.testing.assert_close(out, expected.detach(), rtol=1e-4, atol=1e-5)


def test_unused_output_needs_no_backward():
    """With materialised gradients off, a graph that never uses the output passes None, not zeros."""
    q, k, v = (torch.randn(1, 2, 20, 8, requires_grad=True) for _ in range(3))
    rel = torch.randn(2, 10, 8, requires_grad=True)
    outs = torch.ops.musictx.relative_attention_v4.default(q, k, v, rel, 0.0, None, 8)
    assert not any(x.requires_grad for x in outs[1:])  # the repacked inputs (q with -lse): no gradient
    (outs[0].sum() + q.sum()).backward()
    assert q.grad is not None and rel.grad is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_fullgraph_matches_eager(dtype):
    """torch.compile(fullgraph=True) traces the ops (fakes and the autograd formula) as one graph; under
    autocast too. aot_eager runs the traced forward and backward graphs without a C++ compiler."""
    torch.manual_seed(0)
    leaves = [torch.randn(2, 2, 40, 8, requires_grad=True) for _ in range(3)]
    leaves.append(torch.randn(2, 25, 8, requires_grad=True))
    grad = torch.randn(2, 2, 40, 8)

    def step(q, k, v, rel):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            return attend_efficient(q @ torch.eye(8), k, v, rel, 0.0, 16)  # autocast makes q bf16

    results = []
    for fn in (step, torch.compile(step, fullgraph=True, backend="aot_eager")):
        out = fn(*leaves)
        out.backward(grad.to(out.dtype))
        results.append([out.detach(), *(x.grad for x in leaves)])
        for x in leaves:
            x.grad = None
    assert results[0][0].dtype == dtype
    for eager, compiled in zip(*results, strict=True):
        torch.testing.assert_close(compiled, eager)
    torch._dynamo.reset()
