"""Benchmark one causal self-attention layer (forward + backward): relative kernels against plain SDPA.

    python -m bench attention [--lengths 1024,2048,4096,8192] [--rounds 3] [--threads 1]

Every cell (impl, L) runs in a fresh subprocess (`attention_cases.run_cell`), so that one cell's
allocator state, lazy imports and peak cannot leak into the next. Cells are interleaved: each round
runs every L and impl once, and the table shows per-cell medians over the rounds, with each ratio to
SDPA taken within a round first (a burst of load from other processes then hits both sides of it).
Columns: cold = the first step of the fresh process (wall time, and peak-RSS growth over it: what a
user's first call costs); warm = median step time after it, forward alone, and the peak of live tensor
bytes of one step (profiler allocator events). naive and skew hold L x L tensors and are skipped where
they would not fit in the memory available; flex (FlexAttention with a relative score_mod, compiled)
runs forward only: its backward does not run on CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from musictx.console.args import COUNT, OneLineParser, number, number_list

IMPLS = ("naive", "skew", "efficient", "sdpa", "flex")
GIB = 2**30


def _mem_available() -> int:
    """Bytes the kernel says can be allocated without swapping (MemAvailable)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def skip_reason(impl: str, length: int, args) -> str | None:
    """Why a cell is not run, or None. Estimates count the L x L tensors each path holds at its peak."""
    d_head = args.d_model // args.n_heads
    square = args.n_heads * length * length * 4  # one fp32 (H, L, L) tensor
    need = {"naive": 4 * square * d_head, "skew": 8 * square}.get(impl, 0)  # naive: (H, L, L, D) tables
    if need and need > args.memory_fraction * _mem_available():
        return (f"needs ~{need / GIB:.0f} GiB, over {args.memory_fraction:.0%} of the "
                f"{_mem_available() / GIB:.0f} GiB available")
    if impl == "flex" and shutil.which(os.environ.get("CXX", "g++")) is None:
        return "FlexAttention runs on CPU only compiled, and no C++ compiler is installed"
    return None


def _spawn(impl: str, length: int, args) -> dict:
    cmd = [sys.executable, "-m", "bench.attention", "--worker", impl, str(length)]
    cmd += ["--threads", str(args.threads), "--repeats", str(args.repeats), "--d-model", str(args.d_model)]
    cmd += ["--n-heads", str(args.n_heads), "--max-rel-dist", str(args.max_rel_dist)]
    cmd += ["--block-size", str(args.block_size)]
    threads = str(args.threads)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"rc {done.returncode}: {last[:120]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(rounds: list[dict], impl: str, length: int) -> dict:
    """Medians over rounds of one cell's numbers and of its within-round ratios to SDPA."""
    cells = [(r[(impl, length)], r.get(("sdpa", length), {})) for r in rounds]
    ok = [(c, base) for c, base in cells if "error" not in c]
    if not ok:
        return {"error": cells[-1][0]["error"]}
    keys = ("cold_s", "cold_rss_mib", "warm_ms", "fwd_ms", "peak_mib")
    out = {k: _median([c[k] for c, _ in ok]) for k in keys}
    for k in keys:
        out[k + "_x"] = _median([c[k] / base[k] if base.get(k) else None for c, base in ok])
    out["fwd_only"], out["rounds"] = ok[0][0]["fwd_only"], len(ok)
    return out


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_table(rows: dict) -> str:
    """Markdown table from {(impl, L): summary}; "x" columns are ratios to SDPA at the same L."""
    lines = ["| L | impl | cold s | cold peak RSS MiB | vs SDPA | warm ms | vs SDPA | fwd ms | vs SDPA "
             "| warm peak live MiB | vs SDPA |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (impl, length), s in rows.items():
        if "error" in s or "skipped" in s:
            lines.append(f"| {length} | {impl} | {s.get('skipped') or 'failed: ' + s['error']} "
                         "| | | | | | | | |")
            continue
        name = f"{impl} (fwd only)" if s["fwd_only"] else impl
        # a forward-only step is compared with SDPA's forward alone, not with its forward + backward
        x = {k: None if s["fwd_only"] else s[k + "_x"] for k in ("cold_rss_mib", "warm_ms", "peak_mib")}
        lines.append(
            f"| {length} | {name} | {s['cold_s']:.2f} | {s['cold_rss_mib']:.0f} | {_x(x['cold_rss_mib'])} "
            f"| {s['warm_ms']:.0f} | {_x(x['warm_ms'])} | {s['fwd_ms']:.0f} | {_x(s['fwd_ms_x'])} "
            f"| {s['peak_mib']:.1f} | {_x(x['peak_mib'])} |")
    return "\n".join(lines)


def goal_lines(rows: dict) -> list[str]:
    """The issue's targets for the efficient kernel, read off the table."""
    def get(length, key):
        s = rows.get(("efficient", length), {})
        return s.get(key)

    out = []
    for length, key, limit, what in ((2048, "cold_rss_mib_x", 1.6, "cold peak RSS"),
                                     (8192, "cold_rss_mib_x", 2.0, "cold peak RSS"),
                                     (2048, "warm_ms_x", 1.3, "warm time")):
        value = get(length, key)
        if value is not None:
            out.append(f"- efficient {what} at L={length}: {value:.2f}x SDPA (goal <= {limit}x): "
                       f"{'met' if value <= limit else 'MISSED'}")
    big, small = get(8192, "cold_rss_mib"), get(4096, "cold_rss_mib")
    if big and small:
        out.append(f"- efficient cold peak RSS growth 8192 / 4096: {big / small:.2f} (goal <= 2.2): "
                   f"{'met' if big / small <= 2.2 else 'MISSED'}")
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        flags = open("/proc/cpuinfo").read()
        isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
        return f"{names[0]} ({len(names)} logical CPUs, {isa})"
    except (OSError, IndexError):
        return "unknown CPU"


def _parse(argv):
    p = OneLineParser(prog="python -m bench attention", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=number_list(), default="1024,2048,4096,8192",
                   help="comma-separated sequence lengths")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {IMPLS}")
    p.add_argument("--rounds", type=COUNT, default=3, help="interleaved rounds; the table shows medians")
    p.add_argument("--repeats", type=COUNT, default=3, help="warm steps timed per cell and round")
    p.add_argument("--threads", type=COUNT, default=1, help="torch intra-op threads in each cell")
    p.add_argument("--d-model", type=COUNT, default=512)
    p.add_argument("--n-heads", type=COUNT, default=8)
    p.add_argument("--max-rel-dist", type=number(int, low=0), default=0, help="0 means L // 2, the model's default")
    p.add_argument("--block-size", type=COUNT, default=64, help="query block of the efficient kernel")
    p.add_argument("--memory-fraction", type=number(float, above=0), default=0.6,
                   help="skip naive/skew cells whose estimated peak exceeds this share of MemAvailable")
    p.add_argument("--timeout", type=COUNT, default=900, help="seconds per cell")
    p.add_argument("--worker", nargs=2, metavar=("IMPL", "L"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a Markdown table."""
    args = _parse(argv)
    if args.worker:
        from bench.attention_cases import run_cell

        length = int(args.worker[1])
        rel = args.max_rel_dist if args.max_rel_dist > 0 else length // 2
        print(json.dumps(run_cell(args.worker[0], length, args.d_model, args.n_heads, rel, args.block_size,
                                  args.threads, args.repeats)))
        return
    import torch

    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    if set(impls) - set(IMPLS):
        raise SystemExit(f"unknown impls {sorted(set(impls) - set(IMPLS))}; choose from {IMPLS}")
    lengths = [int(s) for s in args.lengths.split(",") if s.strip()]
    print(f"# One attention layer (qkv and output projections + kernel), forward+backward, batch 1, d_model "
          f"{args.d_model}, {args.n_heads} heads, fp32, max_rel_dist {args.max_rel_dist or 'L/2'}, efficient "
          f"block {args.block_size}; torch {torch.__version__} on {cpu_name()}")
    print(f"# {args.threads} torch thread(s) per cell, OMP_WAIT_POLICY=PASSIVE; a fresh process per cell; "
          f"{args.rounds} interleaved round(s), medians; warm: median of {args.repeats} steps; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    cases = [(impl, n) for n in lengths for impl in impls]
    skipped = {case: skip_reason(*case, args) for case in cases}
    rounds = []
    for r in range(args.rounds):
        done = {}
        for case in cases:
            if skipped[case] is None:
                done[case] = _spawn(*case, args)
                print(f"  round {r + 1}: {case[0]} L={case[1]}: {done[case]}", file=sys.stderr, flush=True)
        rounds.append(done)
    rows = {case: {"skipped": f"skipped: {skipped[case]}"} if skipped[case] else summarise(rounds, *case)
            for case in cases}
    print(format_table(rows))
    print("\n".join(["", *goal_lines(rows)]))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
