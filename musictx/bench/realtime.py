"""Real-time factor of a trained model: ``python -m musictx.bench realtime [--model piano]``.

Continues the bundled seed motif (`musictx/assets/motif.mid`) with ``musictx-generate``'s own code path
(KV cache, top_p 0.95, grammar guard) and reports seconds of NEW music per second of wall time, per
batch size: a batch of B samples makes B times the music of one. Median of ``--repeats`` runs, threads
explicit (default 1), OMP_WAIT_POLICY=PASSIVE unless the environment sets it. At batch 1 a decoding step is
dozens of tiny ops: with passive waits a second thread is woken for each of them and two threads take
about twice as long as one.
"""

from __future__ import annotations

import argparse
import os
import time

from musictx.paths import BUNDLED_MOTIF  # no torch

# OpenMP reads this once, when torch loads it: so before anything imports torch (the other musictx imports
# are made inside the functions for that reason)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _metrical_run(net, tokenizer, batch: int, seconds: float, seed: int) -> tuple[float, float, int]:
    """(wall s, new music s, new tokens) of one metrical run: whole bars, the seed's tempo and meter."""
    from musictx.generation.continue_metrical import sample_bars
    from musictx.generation.metrical_seed import bars_for, metrical_seed
    from musictx.generation.sampling_options import SamplingOptions

    prompt = metrical_seed(tokenizer, BUNDLED_MOTIF)
    bars = bars_for(prompt, seconds, None)
    t0 = time.perf_counter()
    pieces = sample_bars(net, tokenizer, prompt, SamplingOptions(seed=seed), num_samples=batch, bars=bars)
    return time.perf_counter() - t0, batch * bars * prompt.bar_seconds(), sum(len(p) for p in pieces)


def measure(net, tokenizer, batch: int, seconds: float, repeats: int, seed: int = 0) -> dict:
    """Median wall time of generating ``seconds`` of music per sample, ``batch`` samples at once."""
    if tokenizer.kind != "performance":
        runs = [_metrical_run(net, tokenizer, batch, seconds, seed) for _ in range(repeats)]
        wall, music, tokens = sorted(runs)[len(runs) // 2]
        return {"batch": batch, "wall_s": wall, "music_s": music, "tokens": tokens, "x_real_time": music / wall,
                "tokens_per_s": tokens / wall, "spread": (min(r[0] for r in runs), max(r[0] for r in runs))}
    from musictx.generation.continue_seed import sample_continuations
    from musictx.generation.sampling_options import SamplingOptions
    from musictx.generation.seeds import seed_from_midi

    prompt = seed_from_midi(tokenizer, BUNDLED_MOTIF)
    sampling = SamplingOptions(seed=seed)  # the shipped sampling settings (nucleus 0.95, the guard)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pieces = sample_continuations(net, tokenizer, prompt, sampling, num_samples=batch, length_seconds=seconds,
                                      max_tokens=100_000)
        wall = time.perf_counter() - t0
        music = sum(tokenizer.split_time_shifts(p)[2] for p in pieces) * tokenizer.config.time_step
        runs.append((wall, music, sum(len(p) for p in pieces)))
    wall, music, tokens = sorted(runs)[len(runs) // 2]
    return {"batch": batch, "wall_s": wall, "music_s": music, "tokens": tokens, "x_real_time": music / wall,
            "tokens_per_s": tokens / wall, "spread": (min(r[0] for r in runs), max(r[0] for r in runs))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m musictx.bench realtime", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="piano", help="shipped name, model folder or .ckpt (default piano)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: see above)")
    p.add_argument("--batch-sizes", default="1,4")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds of new music per sample")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)

    import torch

    from musictx.checkpoints.model_store import load_model

    torch.set_num_threads(args.threads)
    net, tokenizer, meta = load_model(args.model)
    n_params = sum(q.numel() for q in net.parameters())
    print(f"model {args.model} ({meta['source']}, {n_params:,} parameters), seed {BUNDLED_MOTIF.name}, "
          f"{args.seconds:g} s new music per sample, threads={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, median of {args.repeats}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    rows = [measure(net, tokenizer, int(b), args.seconds, args.repeats) for b in args.batch_sizes.split(",") if b]
    print("\n| batch | new tokens | music s | wall s (min-max) | tokens/s | x real time |")
    print("|---:|---:|---:|---|---:|---:|")
    for r in rows:
        print(f"| {r['batch']} | {r['tokens']} | {r['music_s']:.1f} | {r['wall_s']:.2f} ({r['spread'][0]:.2f}-"
              f"{r['spread'][1]:.2f}) | {r['tokens_per_s']:.0f} | {r['x_real_time']:.1f}x |")
    one = next((r for r in rows if r["batch"] == 1), None)
    if one:
        print(f"\nGoal: >= 20x real time at batch 1 -> {one['x_real_time']:.1f}x "
              f"({'met' if one['x_real_time'] >= 20 else 'missed'})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
