"""Generation speed: ``python -m musictx.bench generate [--threads 2] [--batch-sizes 1,8] ...``.

The base Music Transformer (6 layers, d_model 512, 8 heads, FFN 1024, max_seq_len 2048, vocabulary 390)
with RANDOM weights (speed does not depend on them; no EOS is given, so every sample runs to the end)
generates ``--new-tokens`` ids after a random ``--seed-tokens`` prompt, temperature 1, top_p 0.95:

- cache: `musictx.sampling.generate` as ``musictx-generate`` runs it (the models' KV caches).
  tokens/s = B * new tokens / wall time, prompt included; ms/token over the first and last 128 steps
  (one step makes B tokens). The median of ``--repeats`` runs, as the machine is shared and noisy.
- no cache: the whole window recomputed every step. Too slow to run in full, so it is timed over
  ``--uncached-tokens`` steps at ``--uncached-points`` lengths spread over the run, and the full run's
  time is EXTRAPOLATED by integrating the per-step time, linearly interpolated between those lengths.

Threads are explicit (``--threads``, default 2, this machine's core count) and OMP_WAIT_POLICY=PASSIVE,
so idle OpenMP workers sleep instead of spinning against other processes.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

def build_net(attn_impl: str):
    import torch

    from musictx.models import MusicTransformer

    torch.manual_seed(0)
    return MusicTransformer(390, d_model=512, n_layers=6, n_heads=8, d_ff=1024, dropout=0.0, max_seq_len=2048,
                            attn_impl=attn_impl).eval()


def timed_generate(net, batch: int, prompt_len: int, new_tokens: int, use_cache: bool):
    """(wall seconds, per-step timestamps relative to the start) of one `generate` call."""
    import torch

    from musictx.sampling import generate

    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 388, (batch, prompt_len), generator=gen)
    stamps: list[float] = []

    def record(next_ids):  # called once per generated step: a clock, never a stop
        stamps.append(time.perf_counter())
        return torch.zeros_like(next_ids, dtype=torch.bool)

    t0 = time.perf_counter()
    out = generate(net, prompt, new_tokens, temperature=1.0, top_p=0.95, use_cache=use_cache, generator=gen,
                   stop_fn=record, pad_id=389)
    wall = time.perf_counter() - t0
    assert out.shape == (batch, prompt_len + new_tokens)
    return wall, [s - t0 for s in stamps]


def cached_row(net, batch: int, args) -> dict:
    """The median run (by wall time) of ``args.repeats`` cached generations."""
    runs = sorted((timed_generate(net, batch, args.seed_tokens, args.new_tokens, True)
                   for _ in range(args.repeats)), key=lambda run: run[0])
    wall, stamps = runs[len(runs) // 2]
    steps = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]  # one forward + sample each
    n = min(128, len(steps))
    first, last = 1000 * sum(steps[:n]) / n, 1000 * sum(steps[-n:]) / n
    return {"tokens_per_s": batch * args.new_tokens / wall, "wall": wall, "first": first, "last": last,
            "measured": args.new_tokens, "prefill_s": stamps[0]}


def interleaved_steps(net, batch: int, args, n: int = 128) -> tuple[float, float]:
    """ms per cached step with the cache holding the prompt (as at the first step) and holding prompt +
    new - n ids (as in the last n steps), the two timed in alternation so that both see the same load."""
    import torch

    n = min(n, args.new_tokens)
    gen = torch.Generator().manual_seed(2)
    lengths = (args.seed_tokens, args.seed_tokens + args.new_tokens - n)
    with torch.inference_mode():
        states = []
        for length in lengths:
            state = net.init_cache()
            net(torch.randint(0, 388, (batch, length), generator=gen), cache=state)
            states.append(state)
        nxt = torch.randint(0, 388, (batch, 1), generator=gen)
        totals = [0.0, 0.0]
        for _ in range(n):
            for i, state in enumerate(states):
                t0 = time.perf_counter()
                net(nxt, cache=state)
                totals[i] += time.perf_counter() - t0
    return 1000 * totals[0] / n, 1000 * totals[1] / n


def uncached_row(net, batch: int, args) -> dict:
    """Per-step time at a few window lengths; the full run's time integrated from them."""
    n, points = args.uncached_tokens, max(2, args.uncached_points)
    lo, hi = args.seed_tokens, args.seed_tokens + args.new_tokens - n
    lengths = [round(lo + (hi - lo) * i / (points - 1)) for i in range(points)]
    per_step = []
    for length in lengths:
        wall, _ = timed_generate(net, batch, length, n, use_cache=False)
        per_step.append(wall / n)  # n full forwards (the first over the prompt) and n draws
    # Step t (window of seed + t ids) costs per_step interpolated at that window length.
    total = sum(_interp(args.seed_tokens + t, lengths, per_step) for t in range(args.new_tokens))
    return {"tokens_per_s": batch * args.new_tokens / total, "wall": total, "first": 1000 * per_step[0],
            "last": 1000 * per_step[-1], "measured": n * points, "lengths": lengths}


def _interp(x: float, xs: list[int], ys: list[float]) -> float:
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=True):
        if x <= x1 or x1 == xs[-1]:
            return y0 + (y1 - y0) * (x - x0) / max(x1 - x0, 1)
    return ys[-1]


def table(rows: list[tuple[int, str, dict]], args) -> str:
    head = ("| batch | path | tokens measured | wall s | tokens/s | ms/token first 128 | ms/token last 128 | "
            "last/first | speedup vs no cache |")
    lines = [head, "|" + "---|" * 9]
    base = {b: r["tokens_per_s"] for b, name, r in rows if name.startswith("no cache")}
    for batch, name, r in rows:
        speed = f"{r['tokens_per_s'] / base[batch]:.0f}x" if batch in base and not name.startswith("no") else ""
        wall = f"{r['wall']:.1f}" + (" (extrapolated)" if name.startswith("no cache") else "")
        lines.append(f"| {batch} | {name} | {r['measured']} | {wall} | {r['tokens_per_s']:.1f} | {r['first']:.2f} | "
                     f"{r['last']:.2f} | {r['last'] / r['first']:.2f} | {speed} |")
    return "\n".join(lines)


def goal_lines(rows: list[tuple[int, str, dict]]) -> list[str]:
    by = {(b, name): r for b, name, r in rows}
    cached, nocache = by.get((1, "cache")), by.get((1, "no cache (recompute)"))
    out = []
    if cached:
        speed, ratio = cached["tokens_per_s"], cached["last"] / cached["first"]
        out.append(f"- batch 1 with cache: {speed:.1f} tokens/s (goal >= 100): {_verdict(speed >= 100)}")
        out.append(f"- ms/token last 128 / first 128: {ratio:.2f} (goal <= 1.5): {_verdict(ratio <= 1.5)}")
    if cached and nocache:
        speedup = cached["tokens_per_s"] / nocache["tokens_per_s"]
        out.append(f"- speedup over recomputation at batch 1: {speedup:.1f}x (goal >= 30x): {_verdict(speedup >= 30)}")
    return out


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m musictx.bench generate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--new-tokens", type=int, default=1024)
    p.add_argument("--seed-tokens", type=int, default=256)
    p.add_argument("--batch-sizes", default="1,8", help="comma-separated, e.g. 1,8")
    p.add_argument("--repeats", type=int, default=3, help="cached runs per row; the median is shown (default 3)")
    p.add_argument("--uncached-tokens", type=int, default=16, help="steps timed per length without the cache")
    p.add_argument("--uncached-points", type=int, default=3, help="window lengths timed without the cache")
    p.add_argument("--no-uncached", action="store_true", help="skip the (slow) recomputation path")
    p.add_argument("--attn-impl", default="efficient", help="the net's attention kernel (prompt, uncached path)")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    net = build_net(args.attn_impl)
    batches = [int(b) for b in args.batch_sizes.split(",") if b]
    n_params = sum(q.numel() for q in net.parameters())
    print(f"Music Transformer 6 x 512, 8 heads, FFN 1024, random weights, {n_params:,} parameters; "
          f"{args.seed_tokens}-token prompt + {args.new_tokens} new tokens; threads={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, torch {torch.__version__}, "
          f"attn_impl={args.attn_impl}; cached rows: median of {args.repeats} runs; load average before: {_load()}")
    rows = []
    interleaved = {}
    for batch in batches:
        rows.append((batch, "cache", cached_row(net, batch, args)))
        interleaved[batch] = interleaved_steps(net, batch, args)
        if not args.no_uncached:
            r = uncached_row(net, batch, args)
            rows.append((batch, "no cache (recompute)", r))
        print(f"  batch {batch} done", flush=True)
    print()
    print(table(rows, args))
    print()
    if not args.no_uncached:
        print(f"No-cache rows: {args.uncached_tokens} steps timed at each window length "
              f"{rows[-1][2]['lengths']}; wall s and tokens/s over all {args.new_tokens} steps are extrapolated "
              "by integrating the per-step time, interpolated linearly between those lengths. Their ms/token "
              "columns are the per-step times at the first and last length.")
    print("Cached forward steps timed in alternation at the first and the last 128 cache lengths (net only, "
          "no sampling; robust to load changing during a run):")
    for batch, (first, last) in interleaved.items():
        print(f"- batch {batch}: {first:.2f} ms/step at {args.seed_tokens}+ cached ids, {last:.2f} ms/step at "
              f"{args.seed_tokens + args.new_tokens - min(128, args.new_tokens)}+: last/first {last / first:.2f}")
    print("\n".join(goal_lines(rows)))
    print(f"load average after: {_load()} (other processes share these cores: compare rows of one run only)")


if __name__ == "__main__":
    main()
