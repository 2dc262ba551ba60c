"""The attention kernels on an accelerator (issue 22, docs/gpu.md): one layer, forward + backward, per length.

    python -m bench attention_gpu [--lengths 1024,2048,4096,8192] [--impls triton,efficient,skew,flex,sdpa]
        [--dtype bf16] [--device cuda] [--json kernels.json]

A cell (impl, L) is one layer at the paper's size (qkv and output projections + kernel; d_model 512, 8 heads,
max_rel_dist L / 2), batch 1, under autocast in ``--dtype``. It runs ``--warmup`` steps (flex compiles
there), then ``--repeats`` timed steps: the median ms of forward + backward, and the peak of memory
allocated during a step beyond what the layer and its input hold. flex is FlexAttention with the
relative term in a ``score_mod`` (the production pattern for this maths); sdpa is plain causal attention
without relative positions, the floor. Cells are interleaved over ``--rounds`` rounds and the table shows
medians, ratios to SDPA taken within a round. A cell that runs out of memory or fails says so in its
row, and the table goes on: on new hardware the table is the report of what works.

On CUDA the time comes from CUDA events and the peak from ``torch.cuda.max_memory_allocated``; on CPU
(``--device cpu``, how the tests run it at a tiny size) from the wall clock and the profiler's allocator
events. The efficient kernel is the one `RelativeSelfAttention(impl="efficient")` runs; triton needs CUDA.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from musictx.console.args import COUNT, OneLineParser, number, number_list

IMPLS = ("triton", "efficient", "skew", "flex", "sdpa")
MIB = 2**20


def build_layer(impl: str, d_model: int, n_heads: int, length: int, device: str):
    """One attention layer as the model builds it (flex: the benchmark's FlexAttention twin)."""
    from bench.attention_cases import build_layer as cpu_layer
    from bench.attention_cases import flex_layer

    if impl == "flex":
        return flex_layer(d_model, n_heads, length, length // 2, device)
    return cpu_layer(impl, d_model, n_heads, length, length // 2, block_size=64)


def _peak_bytes(step, device: str) -> int:
    """Peak of memory allocated while step() runs, beyond what was allocated before it."""
    import torch

    if device == "cpu":
        from bench.attention_cases import peak_tensor_bytes

        return peak_tensor_bytes(step)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def _step_ms(step, device: str) -> float:
    import torch

    if device == "cpu":
        t0 = time.perf_counter()
        step()
        return 1000 * (time.perf_counter() - t0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def run_cell(impl: str, length: int, args) -> dict:
    """{"ms", "peak_mib"} of one cell, or {"error": ...} (out of memory, or whatever broke)."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    try:
        layer = build_layer(impl, args.d_model, args.n_heads, length, args.device).to(args.device)
        x = torch.randn(1, length, args.d_model, device=args.device, requires_grad=True)
        grad = torch.randn(1, length, args.d_model, device=args.device)

        def step():
            with torch.autocast(args.device, dtype=dtype, enabled=dtype != torch.float32):
                y = layer(x)
            y.float().backward(grad)
            x.grad = None
            layer.zero_grad(set_to_none=True)

        for _ in range(args.warmup):
            step()
        times = [_step_ms(step, args.device) for _ in range(args.repeats)]
        return {"ms": statistics.median(times), "peak_mib": _peak_bytes(step, args.device) / MIB}
    except torch.OutOfMemoryError:
        return {"error": "out of memory"}
    except Exception as err:  # a kernel that breaks on this hardware is a row of the report
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"}
    finally:
        if args.device == "cuda":
            torch.cuda.empty_cache()


def summarise(rounds: list[dict], impl: str, length: int) -> dict:
    """Medians over rounds, and of each round's ratio to SDPA at the same length."""
    ok = [(r[(impl, length)], r.get(("sdpa", length), {})) for r in rounds if "error" not in r[(impl, length)]]
    if not ok:
        return {"error": rounds[-1][(impl, length)]["error"]}
    out = {k: statistics.median(c[k] for c, _ in ok) for k in ("ms", "peak_mib")}
    for k in ("ms", "peak_mib"):
        ratios = [c[k] / base[k] for c, base in ok if base.get(k)]
        out[k + "_x"] = statistics.median(ratios) if ratios else None
    return out


def format_table(rows: dict) -> str:
    lines = ["| L | impl | fwd+bwd ms | vs SDPA | peak MiB | vs SDPA |", "|---:|---|---:|---:|---:|---:|"]
    for (impl, length), s in rows.items():
        if "error" in s:
            lines.append(f"| {length} | {impl} | {s['error']} | | | |")
            continue
        x = {k: "-" if s[k + "_x"] is None else f"{s[k + '_x']:.2f}x" for k in ("ms", "peak_mib")}
        lines.append(f"| {length} | {impl} | {s['ms']:.2f} | {x['ms']} | {s['peak_mib']:.0f} | {x['peak_mib']} |")
    return "\n".join(lines)


def device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    from bench.attention import cpu_name

    return cpu_name()


def _parse(argv):
    p = OneLineParser(prog="python -m bench attention_gpu", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=number_list(), default="1024,2048,4096,8192")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {IMPLS}")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"], help="autocast dtype")
    p.add_argument("--rounds", type=COUNT, default=3)
    p.add_argument("--warmup", type=number(int, low=0), default=2)
    p.add_argument("--repeats", type=COUNT, default=5)
    p.add_argument("--d-model", type=COUNT, default=512)
    p.add_argument("--n-heads", type=COUNT, default=8)
    p.add_argument("--json", help="also write the rows here (after every round)")
    p.add_argument("--max-seconds", type=number(float, low=0), default=0.0,
                   help="start no cell after this many seconds (its row says so); 0: no limit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run on a GPU machine, or pass --device cpu")
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    if set(impls) - set(IMPLS):
        sys.exit(f"unknown impls {sorted(set(impls) - set(IMPLS))}; choose from {IMPLS}")
    lengths = [int(s) for s in args.lengths.split(",") if s.strip()]
    print(f"# One attention layer (projections + kernel), forward + backward, batch 1, d_model {args.d_model}, "
          f"{args.n_heads} heads, max_rel_dist L/2, autocast {args.dtype}; torch {torch.__version__} on "
          f"{device_name(args.device)}; {args.rounds} interleaved rounds, median of {args.repeats} steps after "
          f"{args.warmup} warm-up steps", flush=True)
    cases = [(impl, n) for n in lengths for impl in impls]
    # flex compiles at each length (tens of seconds each): every other cell of a round runs first, so a
    # --max-seconds cut costs flex rows, not the kernels' own
    run_order = sorted(cases, key=lambda c: c[0] == "flex")
    rounds, t0 = [], time.monotonic()

    def cell(case) -> dict:
        if args.max_seconds and time.monotonic() - t0 > args.max_seconds:
            return {"error": f"not run: past --max-seconds {args.max_seconds:g}"}
        return run_cell(*case, args)

    for r in range(args.rounds):
        done_cells = {case: cell(case) for case in run_order}
        rounds.append({case: done_cells[case] for case in cases})
        print(f"  round {r + 1}: " + "; ".join(f"{i} L={n}: {v}" for (i, n), v in rounds[-1].items()),
              file=sys.stderr, flush=True)
        done = [x for x in rounds if not all("not run" in str(v.get("error", "")) for v in x.values())]
        rows = {case: summarise(done or rounds, *case) for case in cases}
        if args.json:
            write_rows(args, rows, len(done), time.monotonic() - t0)
    print(format_table(rows))
    return rows


def write_rows(args, rows: dict, rounds: int, seconds: float) -> None:
    import torch

    with open(args.json, "w") as f:
        json.dump({"device": device_name(args.device), "dtype": args.dtype, "torch": torch.__version__,
                   "d_model": args.d_model, "n_heads": args.n_heads, "rounds": rounds, "repeats": args.repeats,
                   "seconds": round(seconds, 1), "table": format_table(rows),
                   "rows": [{"impl": i, "L": n, **s} for (i, n), s in rows.items()]}, f, indent=1)


if __name__ == "__main__":
    main()
