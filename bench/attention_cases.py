"""One cell of the attention benchmark, measured in the process that runs it (a fresh one per cell).

A cell is one layer (projections + kernel + output projection) at one length. "cold" is the first
step of a fresh process: its wall time and the growth of the process's peak RSS (ru_maxrss) over it,
one-time costs included (lazy imports, allocator growth, for flex the compiler). "warm" is the median
of later steps, and the peak of live tensor bytes of one step from the profiler's allocator events.
"""

from __future__ import annotations

import resource
import statistics
import time

MIB = 2**20
FWD_ONLY = ("flex",)  # FlexAttention's backward does not run on CPU


def flex_layer(d_model: int, n_heads: int, length: int, max_rel_dist: int, device: str = "cpu"):
    """Relative attention through FlexAttention: the relative logits q . E[min(i - j, M - 1)] (the model's
    clipped table) gathered in a score_mod from a precomputed (B, H, L, M) table of q . E, causal block
    mask built for ``device``. Compiled, as flex runs on CPU only through inductor (and fast on GPU only so)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from musictx.models.attention import RelativeSelfAttention

    class FlexRelative(RelativeSelfAttention):
        def __init__(self):
            super().__init__(d_model, n_heads, max_rel_dist)
            self.mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, length, length, device=device)
            self.flex = torch.compile(flex_attention, fullgraph=True)

        def attend(self, q, k, v):
            n_rel = self.rel_emb.shape[1]
            qe = (q @ self.rel_emb.transpose(-1, -2)) * self.d_head**-0.5  # (B, H, L, M), scaled like q.k

            def relative(score, b, h, i, j):
                return score + qe[b, h, i, (i - j).clamp(0, n_rel - 1)]

            return self.flex(q, k, v, score_mod=relative, block_mask=self.mask)

    return FlexRelative()


def build_layer(impl: str, d_model: int, n_heads: int, length: int, max_rel_dist: int, block_size: int):
    from musictx.models.attention import PlainSelfAttention, RelativeSelfAttention

    if impl == "sdpa":
        return PlainSelfAttention(d_model, n_heads)
    if impl == "flex":
        return flex_layer(d_model, n_heads, length, max_rel_dist)
    return RelativeSelfAttention(d_model, n_heads, max_rel_dist, impl=impl, block_size=block_size)


def peak_tensor_bytes(step) -> int:
    """Run step() under the profiler; return the peak of allocated-minus-freed CPU tensor bytes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def _timed(step, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def run_cell(impl: str, length: int, d_model: int, n_heads: int, max_rel_dist: int, block_size: int,
             threads: int, repeats: int) -> dict:
    """Measure one cell in this process: cold step, warm steps, forward alone, profiled peak."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layer = build_layer(impl, d_model, n_heads, length, max_rel_dist, block_size)
    fwd_only = impl in FWD_ONLY
    x = torch.randn(1, length, d_model, requires_grad=not fwd_only)
    grad = torch.randn(1, length, d_model)

    def step():
        if fwd_only:
            with torch.no_grad():
                layer(x)
            return
        layer(x).backward(grad)
        x.grad = None
        layer.zero_grad(set_to_none=True)

    def forward():
        with torch.no_grad():
            layer(x)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    t0 = time.perf_counter()
    step()
    cold_s = time.perf_counter() - t0
    rss_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    warm_ms = _timed(step, repeats)
    fwd_ms = warm_ms if fwd_only else _timed(forward, repeats)
    peak = peak_tensor_bytes(step)
    return {"cold_s": cold_s, "cold_rss_mib": rss_mib, "warm_ms": warm_ms, "fwd_ms": fwd_ms,
            "peak_mib": peak / MIB, "fwd_only": fwd_only}
