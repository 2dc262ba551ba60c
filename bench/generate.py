"""Generation speed of the shipped model: ``python -m bench generate [--model piano] [--threads 1] ...``.

The shipped model (``--model``, default piano, through `load_model`) continues the first ``--seed-tokens``
ids of the bundled motif by ``--new-tokens`` ids, temperature 1, top_p 0.95, no EOS (every sample runs
to the end), with `musictx.decoding.sampling.generate` as ``musictx-generate`` runs it:

- cache, fast path: the models' KV caches and the decoding engine's step (`musictx.decoding.FastDecoder`,
  the default).
- cache, reference path: the same inside `musictx.decoding.reference_steps`: decoding steps through the
  general forward. The two are run in alternation, ``--repeats`` times each, so that
  both see the same load; the table shows medians, and "vs reference" is the median of the per-run
  ratios. Their logits differ by float rounding only (the fast path lays its operands out for one-row
  products), so both should sample the same ids for the same seed: the bench checks it.
  tokens/s = B * new tokens / wall time, prompt included; x real time = seconds of new music (all B
  samples) per second of wall time; ms/token over the first and last 128 steps (one step makes B tokens).
- no cache: the whole window recomputed every step. Too slow to run in full, so it is timed over
  ``--uncached-tokens`` steps at ``--uncached-points`` lengths spread over the run, and the full run's
  time is EXTRAPOLATED by integrating the per-step time, linearly interpolated between those lengths.

- ``--baseline DIR``: also time the generation code of another checkout (DIR holds its ``musictx``
  package, e.g. a ``git worktree`` of the commit a goal was set against) against this one, on this
  model's weights, prompt and seed: ``--baseline-pairs`` pairs of fresh processes, the two in alternating
  order, each the median of ``--baseline-runs`` generations after an untimed one (steady state: the first
  call's costs are not decoding speed), at each of ``--batch-sizes``. It needs a checkout with
  ``musictx.checkpoints.model_store`` (41423e0 or later).

Threads are explicit (``--threads``) and OMP_WAIT_POLICY=PASSIVE, so idle OpenMP workers sleep instead
of spinning against other processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from musictx.console.args import COUNT, OneLineParser, number_list

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
PATHS = {"cache, reference path": False, "cache, fast path": True}  # name -> fast decoding steps


def motif_ids(tokenizer):
    """The bundled motif's ids, and the seconds of one bar of it (None for Performance events, whose time
    shifts carry seconds themselves); read once per bench run."""
    from musictx.paths import BUNDLED_MOTIF

    if hasattr(tokenizer, "encode_score"):  # metrical tokens: whole bars, seconds from the seed's bar length
        from musictx.tasks.metrical_seeds import metrical_seed

        seed = metrical_seed(tokenizer, BUNDLED_MOTIF)
        return seed.ids, seed.bar_seconds()
    from musictx.tasks.seeds import seed_from_midi

    return seed_from_midi(tokenizer, BUNDLED_MOTIF).ids, None


def motif_prompt(motif, batch: int, length: int):
    """(batch, <= length) ids: the start of the bundled motif's ids ``motif``, the same for every sample."""
    import torch

    ids = torch.as_tensor(motif[:length], dtype=torch.long)
    return ids.expand(batch, -1).contiguous()


def timed_generate(net, prompt, new_tokens: int, use_cache: bool, pad_id: int):
    """(wall seconds, per-step timestamps relative to the start, new ids (B, new_tokens)) of one call."""
    from musictx.decoding.hook import OnStep
    from musictx.decoding.sampling import SpecialIds, generate

    stamps: list[float] = []
    ids, opts = SpecialIds(pad_id=pad_id), bench_options(use_cache)
    # the engine alone: no hook but the clock (the progress hook's kind: once per step, never a stop)
    clock = [OnStep(lambda *_: stamps.append(time.perf_counter()))]
    t0 = time.perf_counter()
    out = generate(net, ids, prompt, opts, clock, max_new_tokens=new_tokens)
    wall = time.perf_counter() - t0
    assert out.shape == (prompt.shape[0], prompt.shape[1] + new_tokens)
    return wall, [s - t0 for s in stamps], out[:, prompt.shape[1]:]


def bench_options(use_cache: bool = True):
    """The draws timed: temperature 1, top_p 0.95, seed 1, no recall guidance (its second branch is not
    decoding speed); no EOS id is given to the sampler, so every sample runs to the end."""
    from musictx.decoding.sampling_options import SamplingOptions

    return SamplingOptions(temperature=1.0, top_p=0.95, seed=1, use_cache=use_cache,
                           hooks={"recall_guidance": {"strength": 0.0}})


def music_seconds(tokenizer, new_ids, bar_seconds: float | None) -> float:
    """Seconds of music in the new ids of all samples: their time shifts (Performance events), or their bar
    lines at the motif's bar length ``bar_seconds`` (metrical tokens)."""
    if bar_seconds is not None:
        return float((new_ids == tokenizer.bar_id).sum()) * bar_seconds
    return sum(tokenizer.split_time_shifts(row)[2] for row in new_ids.tolist()) * tokenizer.config.time_step


def _run_stats(wall: float, stamps: list[float], batch: int, args, music: float) -> dict:
    steps = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]  # one forward + sample each
    n = max(1, min(128, len(steps)))
    return {"tokens_per_s": batch * args.new_tokens / wall, "wall": wall, "x_real_time": music / wall,
            "first": 1000 * sum(steps[:n]) / n, "last": 1000 * sum(steps[-n:]) / n, "measured": args.new_tokens}


def cached_rows(net, tokenizer, motif, batch: int, args) -> list[tuple[int, str, dict]]:
    """Both cached paths, run in alternation ``args.repeats`` times: their median runs (by wall time),
    each with the median ratio of its tokens/s to the reference run next to it. ``motif``: `motif_ids`."""
    from musictx.decoding import reference_steps

    prompt = motif_prompt(motif[0], batch, args.seed_tokens)
    runs: dict[str, list[dict]] = {name: [] for name in PATHS}
    ids: dict[str, list] = {name: [] for name in PATHS}
    for _ in range(args.repeats):
        for name, fast in PATHS.items():
            with nullcontext() if fast else reference_steps():
                wall, stamps, new = timed_generate(net, prompt, args.new_tokens, True, tokenizer.pad_id)
            runs[name].append(_run_stats(wall, stamps, batch, args, music_seconds(tokenizer, new, motif[1])))
            ids[name].append(new)
    same = all(a.equal(b) for a, b in zip(*ids.values(), strict=True))
    rows = []
    reference = runs["cache, reference path"]
    for name, rs in runs.items():
        row = dict(sorted(rs, key=lambda r: r["wall"])[len(rs) // 2])
        row["vs_reference"] = statistics.median(r["tokens_per_s"] / b["tokens_per_s"]
                                                for r, b in zip(rs, reference, strict=True))
        row["same_ids"] = same
        rows.append((batch, name, row))
    return rows


def uncached_row(net, tokenizer, batch: int, args) -> dict:
    """Per-step time at a few window lengths; the full run's time integrated from them."""
    import torch

    n, points = args.uncached_tokens, max(2, args.uncached_points)
    lo, hi = args.seed_tokens, args.seed_tokens + args.new_tokens - n
    lengths = [round(lo + (hi - lo) * i / (points - 1)) for i in range(points)]
    per_step = []
    for length in lengths:
        prompt = torch.randint(0, tokenizer.pad_id, (batch, length), generator=torch.Generator().manual_seed(2))
        wall, _, _ = timed_generate(net, prompt, n, False, tokenizer.pad_id)
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


def table(rows: list[tuple[int, str, dict]]) -> str:
    head = ("| batch | path | tokens measured | wall s | tokens/s | x real time | ms/token first 128 | "
            "ms/token last 128 | vs reference path | vs no cache |")
    lines = [head, "|" + "---|" * 10]
    base = {b: r["tokens_per_s"] for b, name, r in rows if name.startswith("no cache")}
    for batch, name, r in rows:
        cached = name.startswith("cache")
        speed = f"{r['tokens_per_s'] / base[batch]:.0f}x" if batch in base and cached else ""
        wall = f"{r['wall']:.1f}" + ("" if cached else " (extrapolated)")
        real = f"{r['x_real_time']:.1f}x" if cached else ""
        ref = f"{r['vs_reference']:.2f}x" if cached else ""
        lines.append(f"| {batch} | {name} | {r['measured']} | {wall} | {r['tokens_per_s']:.1f} | {real} "
                     f"| {r['first']:.2f} | {r['last']:.2f} | {ref} | {speed} |")
    return "\n".join(lines)


def goal_lines(rows: list[tuple[int, str, dict]]) -> list[str]:
    by = {(b, name): r for b, name, r in rows}
    fast, nocache = by.get((1, "cache, fast path")), by.get((1, "no cache (recompute)"))
    out = []
    if fast:
        out.append(f"- batch 1, fast path: {fast['vs_reference']:.2f}x the reference path's tokens/s (goal >= 2x): "
                   f"{_verdict(fast['vs_reference'] >= 2)}")
        out.append(f"- batch 1, fast path: {fast['x_real_time']:.1f}x real time (goal >= 20x): "
                   f"{_verdict(fast['x_real_time'] >= 20)}")
        out.append(f"- same sampled ids on both paths for the same seed: {_verdict(fast['same_ids'])}")
    if fast and nocache:
        speedup = fast["tokens_per_s"] / nocache["tokens_per_s"]
        out.append(f"- speedup over recomputation at batch 1: {speedup:.1f}x (goal >= 30x): {_verdict(speedup >= 30)}")
    return out


def step_floor(net, cached: int = 500, steps: int = 200, rounds: int = 7) -> str:
    """One decoding step of ``net`` against the same architecture at a quarter of the width (1/16 of the
    weights, random), ``cached`` ids in the cache, interleaved rounds: how much of a step is per-op cost
    that does not depend on the data a step reads."""
    import torch

    from musictx.checkpoints.net_specs import build_net
    from musictx.decoding import FastDecoder

    config = net.get_config()
    small = {**config, "d_model": config["d_model"] // 4, "d_ff": config["d_ff"] // 4}
    nets = {"this model": net.eval(), "a quarter of its width": build_net({"name": net.name, "config": small}).eval()}
    ms: dict[str, list[float]] = {k: [] for k in nets}
    ids = torch.tensor([5])
    with torch.inference_mode():
        decoders = {k: FastDecoder(n) for k, n in nets.items()}
        states = {k: n(torch.randint(0, 300, (1, cached)), cache=decoders[k].init_cache())[1] for k, n in nets.items()}
        for _ in range(rounds):
            for k in nets:
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    decoders[k].step(ids, states[k])
                    times.append(time.perf_counter() - t0)
                    for layer in states[k].layers:  # back to `cached` ids: every step sees the same context
                        layer.n = cached
                ms[k].append(1000 * statistics.median(times))
    big, small_ms = (statistics.median(v) for v in ms.values())
    return (f"- one batch-1 step with {cached} cached ids: {big:.2f} ms; the same net at a quarter of the width "
            f"(1/16 of the weights): {small_ms:.2f} ms, so ~{small_ms / big:.0%} of a step is per-op cost "
            f"({rounds} interleaved rounds of {steps} steps, medians)")


# Run in a fresh process with PYTHONPATH set to a checkout: only the API that checkouts since 41423e0 share,
# and either signature of `generate` (keywords before the options object, or the options object).
_CHILD = """
import inspect, json, os, statistics, sys, time
from types import SimpleNamespace
import torch
from musictx.checkpoints.model_store import load_model
from musictx.decoding.sampling import generate
from musictx.tasks.seeds import seed_from_midi
a = json.loads(sys.argv[1])
if "opts" in inspect.signature(generate).parameters:
    from musictx.decoding.sampling_options import SamplingOptions
    try:  # generate reads only the decoding settings; the hooks' options moved into groups in 2026-11
        opts = SamplingOptions(temperature=1.0, top_p=0.95, seed=1, hooks={"recall_guidance": {"strength": 0.0}})
    except TypeError:
        opts = SamplingOptions(temperature=1.0, top_p=0.95, seed=1, recall_guidance=0.0)
    def sample(net, prompt, pad_id):
        return generate(net, SimpleNamespace(pad_id=pad_id, eos_id=None), prompt, opts, max_new_tokens=a["new_tokens"])
else:
    def sample(net, prompt, pad_id):
        return generate(net, prompt, a["new_tokens"], temperature=1.0, top_p=0.95, use_cache=True,
                        generator=torch.Generator().manual_seed(1), pad_id=pad_id)
torch.set_num_threads(a["threads"])
net, tok, _ = load_model(a["model_dir"])
seed = torch.as_tensor(seed_from_midi(tok, a["motif"]).ids[: a["seed_tokens"]], dtype=torch.long)
rows = {}
for batch in a["batches"]:
    prompt, walls, cpus = seed.expand(batch, -1).contiguous(), [], []
    for run in range(a["runs"] + 1):  # the first, untimed, pays the first-call costs (imports, allocations)
        t0, c0 = time.perf_counter(), time.process_time()
        out = sample(net, prompt, tok.pad_id)
        walls += [time.perf_counter() - t0] if run else []
        cpus += [time.process_time() - c0] if run else []
    new = out[:, prompt.shape[1]:].tolist()
    music = sum(tok.split_time_shifts(r)[2] for r in new) * tok.config.time_step
    wall = statistics.median(walls)
    rows[batch] = {"tokens_per_s": batch * a["new_tokens"] / wall, "x_real_time": music / wall, "ids": new,
                   "cpu_tokens_per_s": batch * a["new_tokens"] / statistics.median(cpus)}
print(json.dumps({"rows": rows, "package": os.path.dirname(os.path.dirname(sys.modules["musictx"].__file__))}))
"""


def _child_run(root: Path, request: dict) -> dict:
    """The child's JSON line, run with ``root``'s musictx package first on the path (and ``root`` as the
    working directory, which ``python -c`` puts first of all)."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(request)], env=env, cwd=root,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench generate --baseline: the run with {root} failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def baseline_lines(baseline: Path, model_dir: Path, batches: list[int], args) -> list[str]:
    """This checkout's generation against ``baseline``'s: per batch size, the median per-pair ratio of
    tokens/s (and x real time, the same ratio as both make the same music)."""
    import musictx
    from musictx.paths import BUNDLED_MOTIF

    here = Path(musictx.__file__).resolve().parent.parent
    if not (baseline / "musictx" / "checkpoints" / "model_store.py").is_file():
        raise SystemExit(f"bench generate --baseline: {baseline} holds no musictx/checkpoints/model_store.py "
                         "(a checkout of 41423e0 or later is needed)")
    request = {"threads": args.threads, "model_dir": str(model_dir), "motif": str(BUNDLED_MOTIF), "batches": batches,
               "seed_tokens": args.seed_tokens, "new_tokens": args.new_tokens, "runs": args.baseline_runs}
    pairs = []
    for i in range(args.baseline_pairs):
        order = [("this", here), ("baseline", baseline)][:: 1 if i % 2 == 0 else -1]
        runs = {name: _child_run(root, request) for name, root in order}
        pairs.append({name: run["rows"] for name, run in runs.items()})
        speeds = ", ".join(f"batch {b}: this {runs['this']['rows'][str(b)]['tokens_per_s']:.0f}, baseline "
                           f"{runs['baseline']['rows'][str(b)]['tokens_per_s']:.0f}" for b in batches)
        print(f"  baseline pair {i + 1} ({runs['baseline']['package']}), tokens/s: {speeds}", flush=True)
    lines = []
    for b in (str(b) for b in batches):
        ratios = [p["this"][b]["tokens_per_s"] / p["baseline"][b]["tokens_per_s"] for p in pairs]
        cpu = statistics.median(p["this"][b]["cpu_tokens_per_s"] / p["baseline"][b]["cpu_tokens_per_s"] for p in pairs)
        real = statistics.median(p["this"][b]["x_real_time"] for p in pairs)
        same = all(p["this"][b]["ids"] == p["baseline"][b]["ids"] for p in pairs)
        ratio = statistics.median(ratios)
        goal = f"; goal >= 2x, against the code it was set on (41423e0): {_verdict(ratio >= 2)}" if b == "1" else ""
        lines.append(f"- batch {b}, this code against {baseline}: {ratio:.2f}x its tokens/s, median of {len(ratios)} "
                     f"pairs of processes ({min(ratios):.2f}-{max(ratios):.2f}x), {cpu:.2f}x per CPU second; "
                     f"this code {real:.1f}x real time; "
                     f"same sampled ids: {_verdict(same)}{goal}")
    return lines


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def parse_args(argv=None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m bench generate", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="piano", help="shipped name, model folder or .ckpt (default piano)")
    p.add_argument("--threads", type=COUNT, default=1, help="torch intra-op threads (default 1)")
    p.add_argument("--new-tokens", type=COUNT, default=512)
    p.add_argument("--seed-tokens", type=COUNT, default=256, help="prompt: at most this many ids of the motif")
    p.add_argument("--batch-sizes", type=number_list(), default="1,4", help="comma-separated, e.g. 1,4")
    p.add_argument("--repeats", type=COUNT, default=5, help="runs of each cached path, alternating (default 5)")
    p.add_argument("--uncached-tokens", type=COUNT, default=16, help="steps timed per length without the cache")
    p.add_argument("--uncached-points", type=COUNT, default=3, help="window lengths timed without the cache")
    p.add_argument("--no-uncached", action="store_true", help="skip the (slow) recomputation path")
    p.add_argument("--floor", action="store_true", help="also time a step against a quarter-width twin")
    p.add_argument("--baseline", type=Path, help="a checkout (its root) whose generation code to time against")
    p.add_argument("--baseline-pairs", type=COUNT, default=10, help="pairs of processes with --baseline")
    p.add_argument("--baseline-runs", type=COUNT, default=5, help="generations per process with --baseline")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    from musictx.checkpoints.model_store import load_model

    torch.set_num_threads(args.threads)
    net, tokenizer, meta = load_model(args.model)
    batches = [int(b) for b in args.batch_sizes.split(",") if b]
    n_params = sum(q.numel() for q in net.parameters())
    motif = motif_ids(tokenizer)
    prompt_len = min(len(motif[0]), args.seed_tokens)
    print(f"model {args.model} ({meta['source']}, {n_params:,} parameters, context {net.max_seq_len}); "
          f"{prompt_len}-token motif prompt + {args.new_tokens} new tokens; threads={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, torch {torch.__version__}; cached rows: "
          f"median of {args.repeats} alternating runs per path; load average before: {_load()}")
    rows = []
    for batch in batches:
        rows += cached_rows(net, tokenizer, motif, batch, args)
        if not args.no_uncached:
            rows.append((batch, "no cache (recompute)", uncached_row(net, tokenizer, batch, args)))
        print(f"  batch {batch} done", flush=True)
    print()
    print(table(rows))
    print()
    if not args.no_uncached:
        print(f"No-cache rows: {args.uncached_tokens} steps timed at each window length "
              f"{rows[-1][2]['lengths']}; wall s and tokens/s over all {args.new_tokens} steps are extrapolated "
              "by integrating the per-step time, interpolated linearly between those lengths. Their ms/token "
              "columns are the per-step times at the first and last length.")
    print("\n".join(goal_lines(rows)))
    if args.floor and hasattr(net, "init_cache") and "d_ff" in net.get_config():
        print(step_floor(net))
    if args.baseline is not None:
        if not Path(meta["path"]).is_dir():
            raise SystemExit(f"bench generate --baseline: needs a model folder (a shipped name or a folder), "
                             f"not {meta['path']}")
        print("\n".join(baseline_lines(args.baseline.resolve(), Path(meta["path"]), batches, args)))
    print(f"load average after: {_load()} (other processes share these cores: compare rows of one run only)")


if __name__ == "__main__":
    main()
