"""Benchmark one causal self-attention layer (forward + backward): relative kernels against plain SDPA.

    python -m musictx.bench.attention --lengths 256,512,1024,2048 --repeats 5 --threads 1

Each (impl, L) case runs in a fresh subprocess so one case's allocator state and peak cannot leak into
the next. Peak memory is the peak of live tensor bytes allocated during one forward+backward, beyond
what was live before it (inputs, parameters), read from the torch profiler's allocator events; the
process's peak-RSS growth over the first (unprofiled) step is printed next to it as a cross-check; it
also counts allocator slack and one-time library buffers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

IMPLS = ("naive", "skew", "efficient", "sdpa")
# Longest L each impl is run at by default: naive holds an (H, L, L, D) table, skew full L x L logits.
DEFAULT_MAX_LEN = {"naive": 1024, "skew": 2048, "efficient": 4096, "sdpa": 4096}
MIB = 2**20


def _build_layer(impl: str, d_model: int, n_heads: int, length: int, max_rel_dist: int, block_size: int):
    from musictx.models.attention import PlainSelfAttention, RelativeSelfAttention

    if impl == "sdpa":
        return PlainSelfAttention(d_model, n_heads)
    rel = max_rel_dist if max_rel_dist > 0 else length
    return RelativeSelfAttention(d_model, n_heads, rel, impl=impl, block_size=block_size)


def _peak_tensor_bytes(step) -> int:
    """Run step() under the profiler; return the peak of allocated-minus-freed CPU tensor bytes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def run_case(impl: str, length: int, args) -> dict:
    """Time and measure one case in this process (the worker side)."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layer = _build_layer(impl, args.d_model, args.n_heads, length, args.max_rel_dist, args.block_size)
    x = torch.randn(1, length, args.d_model, requires_grad=True)
    grad = torch.randn(1, length, args.d_model)

    def step():
        layer(x).backward(grad)
        x.grad = None
        layer.zero_grad(set_to_none=True)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    step()  # first step, unprofiled: also the warm-up
    rss_delta = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    peak = _peak_tensor_bytes(step)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times), "peak_mib": peak / MIB,
            "rss_mib": rss_delta / 1024}


def _spawn(impl: str, length: int, args) -> dict | None:
    cmd = [sys.executable, "-m", "musictx.bench.attention", "--worker", impl, str(length)]
    cmd += ["--threads", str(args.threads), "--repeats", str(args.repeats), "--d-model", str(args.d_model)]
    cmd += ["--n-heads", str(args.n_heads), "--max-rel-dist", str(args.max_rel_dist)]
    cmd += ["--block-size", str(args.block_size)]
    threads = str(args.threads)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"  {impl} L={length}: timed out after {args.timeout}s", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"  {impl} L={length}: failed (rc {done.returncode})\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}" if b else "-"


def format_table(results: dict) -> str:
    """Markdown table from {(impl, L): result or None}; ratios are against sdpa at the same L."""
    lines = [
        "| impl | L | median ms | min ms | peak MiB | RSS growth MiB | time / sdpa (median) "
        "| time / sdpa (min) | memory / sdpa |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (impl, length), res in results.items():
        if res is None:
            lines.append(f"| {impl} | {length} | failed | - | - | - | - | - | - |")
            continue
        base = results.get(("sdpa", length)) or {}
        lines.append(
            f"| {impl} | {length} | {res['ms']:.1f} | {res['min_ms']:.1f} | {res['peak_mib']:.1f} "
            f"| {res['rss_mib']:.1f} | {_ratio(res['ms'], base.get('ms'))} "
            f"| {_ratio(res['min_ms'], base.get('min_ms'))} | {_ratio(res['peak_mib'], base.get('peak_mib'))} |"
        )
    return "\n".join(lines)


def _best_of(runs: list[dict | None]) -> dict | None:
    """Merge rounds of one case: the round with the lowest median, the lowest min over all rounds."""
    runs = [r for r in runs if r is not None]
    if not runs:
        return None
    best = dict(min(runs, key=lambda r: r["ms"]))
    best["min_ms"] = min(r["min_ms"] for r in runs)
    return best


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m musictx.bench.attention", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", default="256,512,1024,2048,4096", help="comma-separated sequence lengths")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {IMPLS}")
    p.add_argument("--repeats", type=int, default=5, help="timed forward+backward runs per case")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads in each case")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--n-heads", type=int, default=8)
    p.add_argument("--max-rel-dist", type=int, default=0, help="0 means L (every distance has a term)")
    p.add_argument("--block-size", type=int, default=64, help="query block of the efficient kernel")
    p.add_argument("--all-lengths", action="store_true", help=f"ignore the per-impl caps {DEFAULT_MAX_LEN}")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the whole case list this many times (fresh subprocesses each time) and keep each "
                   "case's best round: on a shared machine other jobs only ever add time")
    p.add_argument("--timeout", type=int, default=900, help="seconds per case")
    p.add_argument("--worker", nargs=2, metavar=("IMPL", "L"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a Markdown table."""
    args = _parse(argv)
    if args.worker:
        print(json.dumps(run_case(args.worker[0], int(args.worker[1]), args)))
        return
    import torch

    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = set(impls) - set(IMPLS)
    if unknown:
        raise SystemExit(f"unknown impls {sorted(unknown)}; choose from {IMPLS}")
    lengths = [int(s) for s in args.lengths.split(",") if s.strip()]
    rel = "L" if args.max_rel_dist <= 0 else args.max_rel_dist
    print(f"# One attention layer, forward+backward, batch 1, d_model {args.d_model}, {args.n_heads} heads, "
          f"fp32, CPU, torch {torch.__version__}")
    print(f"# torch threads {args.threads} per case (OMP_WAIT_POLICY=PASSIVE), one fresh subprocess per case, "
          f"median and min of {args.repeats} after 2 warm-up steps, best of {args.rounds} round(s); "
          f"max_rel_dist {rel}; efficient block {args.block_size}")
    print("# peak MiB: peak live tensor bytes during one step (torch profiler allocator events), beyond "
          "inputs and parameters; RSS growth: ru_maxrss delta over the first step\n")
    cases = [(impl, n) for n in lengths for impl in impls if n <= DEFAULT_MAX_LEN[impl] or args.all_lengths]
    runs = {case: [] for case in cases}
    for _ in range(args.rounds):  # rounds interleave the cases, so a burst of load hits one round only
        for impl, length in cases:
            runs[(impl, length)].append(_spawn(impl, length, args))
            print(f"  done {impl} L={length}: {runs[(impl, length)][-1]}", file=sys.stderr, flush=True)
    print(format_table({case: _best_of(r) for case, r in runs.items()}))


if __name__ == "__main__":
    main()
