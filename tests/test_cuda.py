"""The GPU path on real CUDA (marked ``gpu``: skipped without a GPU and left out of the default run;
``bash scripts/gpu_pop.sh`` runs them first on the lent machine). Each kernel against the naive one in
float64 on the CPU, in fp32 and under bf16 autocast; a bf16-mixed training step of the Music Transformer
whose attention runs the custom op on the GPU; KV-cached greedy decoding on CUDA against the CPU's ids;
the triton kernel against the efficient one at L = 2048 in bf16; the efficient and triton kernels' peak
memory against skew's; torch.compile training with each of them (last: compiling takes the longest)."""

from __future__ import annotations

import pytest
import torch

from musictx.models import MusicTransformer
from musictx.models.attention import attend_naive, attend_skew
from musictx.models.efficient_attention import attend_efficient

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bash scripts/gpu_pop.sh)")]


def _triton(q, k, v, e):
    from musictx.kernels.triton_attention import attend_triton

    return attend_triton(q, k, v, e, 0.0)


KERNELS = {"skew": attend_skew, "efficient": lambda q, k, v, e: attend_efficient(q, k, v, e, 0.0, block_size=64),
           "triton": _triton}


def _inputs(B=2, H=4, T=300, D=64, M=128, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=torch.float64) for s in
            ((B, H, T, D), (B, H, T, D), (B, H, T, D), (H, M, D), (B, H, T, D))]


def _grads(fn, xs, grad_out, autocast: torch.dtype | None = None):
    xs = [x.detach().requires_grad_() for x in xs]
    with torch.autocast(xs[0].device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
        out = fn(*xs)
    return [out, *torch.autograd.grad(out, xs, grad_out.to(out.dtype))]


def _rel_err(got, want):
    return float((got.double().cpu() - want).norm() / want.norm())


@pytest.mark.parametrize("impl", list(KERNELS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernels_on_cuda_match_the_fp64_reference(impl, dtype):
    q, k, v, e, grad_out = _inputs()
    want = _grads(attend_naive, (q, k, v, e), grad_out)
    cuda = [x.to("cuda", torch.float32) for x in (q, k, v, e, grad_out)]
    if dtype == torch.bfloat16:  # as autocast hands them over: q, k, v in bf16, the table fp32
        cuda[:3] = [x.bfloat16() for x in cuda[:3]]
        cuda[4] = cuda[4].bfloat16()
    got = _grads(KERNELS[impl], cuda[:4], cuda[4], autocast=torch.bfloat16 if dtype == torch.bfloat16 else None)
    assert all(g.is_cuda for g in got)
    bound = 2e-3 if dtype == torch.float32 else 3e-2
    for name, g, w in zip(["out", "dq", "dk", "dv", "dE"], got, want, strict=True):
        assert _rel_err(g, w) < bound, (impl, name, _rel_err(g, w))


def _assert_trains(net, ids, steps: int) -> None:
    """``steps`` AdamW steps of next-token loss under bf16 autocast on ``ids`` (B, T + 1): every loss finite,
    the last at least 0.5 nats below the first."""
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0] - 0.5, losses


def test_a_bf16_mixed_training_step_runs_the_custom_op_on_cuda():
    torch.manual_seed(0)
    net = MusicTransformer(390, n_layers=2, d_model=128, n_heads=4, d_ff=256, max_seq_len=512,
                           attn_impl="efficient").cuda()
    ids = torch.randint(0, 388, (4, 513), device="cuda")
    # the op's name is a CPU-side event (CUDA events are kernel names): record both
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        _assert_trains(net, ids, steps=20)
    names = {e.name for e in prof.events()}
    assert any("relative_attention" in n for n in names), sorted(names)[:20]


def test_cached_greedy_decoding_on_cuda_gives_the_cpu_ids():
    from musictx.decoding.sampling import generate
    from musictx.decoding.sampling_options import SamplingOptions

    torch.manual_seed(0)
    net = MusicTransformer(390, n_layers=2, d_model=64, n_heads=4, d_ff=128, max_seq_len=256).eval()
    prompt = torch.randint(0, 388, (2, 40))
    greedy = SamplingOptions(temperature=0.0, keep_seed=0, hooks={"recall_guidance": {"strength": 0.0}})
    cpu = generate(net, None, prompt, greedy, max_new_tokens=48)
    gpu = generate(net.cuda(), None, prompt.cuda(), greedy, max_new_tokens=48)
    assert torch.equal(gpu.cpu()[:, :60], cpu[:, :60])


def _long_inputs(T=2048, B=2, H=8, D=64, seed=0):
    """bf16 q, k, v, an fp32 table of T // 2 distances and a bf16 output gradient, on CUDA."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, g = (torch.randn(B, H, T, D, device="cuda", generator=gen, dtype=torch.bfloat16) for _ in range(4))
    e = torch.randn(H, T // 2, D, device="cuda", generator=gen) * 0.5
    return q, k, v, e, g


def test_triton_matches_the_efficient_kernel_at_2048_in_bf16():
    q, k, v, e, g = _long_inputs()
    eff = _grads(lambda *xs: attend_efficient(*xs, 0.0, block_size=128), (q, k, v, e), g, torch.bfloat16)
    tri = _grads(_triton, (q, k, v, e), g, torch.bfloat16)
    for name, a, b in zip(["out", "dq", "dk", "dv", "dE"], tri, eff, strict=True):
        err = float((a.float() - b.float()).norm() / b.float().norm())
        print(f"triton vs efficient, L=2048 bf16, {name}: {err:.2e}")
        assert err < 3e-2, (name, err)


def _peak_mib(fn, xs, grad_out) -> float:
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    _grads(fn, xs, grad_out, torch.bfloat16)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def test_the_efficient_and_triton_kernels_use_a_fraction_of_skews_memory():
    q, k, v, e, g = _long_inputs(T=4096)
    peaks = {name: _peak_mib(fn, (q, k, v, e), g) for name, fn in
             [("skew", attend_skew), ("efficient", lambda *xs: attend_efficient(*xs, 0.0, block_size=128)),
              ("triton", _triton)]}
    print("peak MiB beyond the inputs, forward + backward, B 2, H 8, L 4096, D 64, bf16:", peaks)
    # skew holds (B, H, L, L) scores: 2 * 8 * 4096^2 * >= 2 bytes = 512 MiB per copy; the others O(L)
    assert peaks["skew"] > 1000
    assert peaks["efficient"] < peaks["skew"] / 4 and peaks["triton"] < peaks["skew"] / 4, peaks


@pytest.mark.parametrize("impl", ["efficient", "triton"])
def test_torch_compile_trains_the_music_transformer_on_cuda(impl):
    torch.manual_seed(0)
    net = MusicTransformer(390, n_layers=2, d_model=128, n_heads=4, d_ff=256, max_seq_len=512, dropout=0.1,
                           attn_impl=impl).cuda()
    ids = torch.randint(0, 388, (4, 513), device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        eager = net.eval()(ids[:, :-1]).float()
    net.compile()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        compiled = net(ids[:, :-1]).float()
    assert float((compiled - eager).norm() / eager.norm()) < 3e-2
    _assert_trains(net.train(), ids, steps=15)
