"""Real-time factor of a trained model: ``python -m bench realtime [--model piano]``.

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

from musictx.console.args import COUNT, SECONDS, OneLineParser, number_list
from musictx.paths import BUNDLED_MOTIF  # no torch

# OpenMP reads this once, when torch loads it: so before anything imports torch (the other musictx imports
# are made inside the functions for that reason)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def one_run(net, tokenizer, batch: int, seconds: float, sampling) -> tuple[float, float, int]:
    """(wall s, new music s, new tokens) of one continuation of the motif, ``batch`` samples at once: whole
    bars at the seed's tempo and meter for a metrical model."""
    if tokenizer.kind != "performance":
        from musictx.tasks.continue_metrical import sample_bars
        from musictx.tasks.metrical_seeds import bars_for, metrical_seed

        prompt = metrical_seed(tokenizer, BUNDLED_MOTIF)
        bars = bars_for(prompt, seconds, None)
        t0 = time.perf_counter()
        pieces = sample_bars(net, tokenizer, prompt, sampling, num_samples=batch, bars=bars)
        return time.perf_counter() - t0, batch * bars * prompt.bar_seconds(), sum(len(p) for p in pieces)
    from musictx.tasks.continue_seed import sample_continuations
    from musictx.tasks.seeds import seed_from_midi

    prompt = seed_from_midi(tokenizer, BUNDLED_MOTIF)
    t0 = time.perf_counter()
    pieces = sample_continuations(net, tokenizer, prompt, sampling, num_samples=batch, length_seconds=seconds,
                                  max_tokens=100_000)
    wall = time.perf_counter() - t0
    music = sum(tokenizer.split_time_shifts(p)[2] for p in pieces) * tokenizer.config.time_step
    return wall, music, sum(len(p) for p in pieces)


def sampling_of(settings: list[str], seed: int = 0):
    """The shipped sampling settings (`SamplingOptions` defaults) with ``NAME=VALUE`` overrides, a hook's
    written as on the command line (``hooks.bass_lean.strength=0``); values read as YAML: 0, 1.5, null, true."""
    from dataclasses import fields

    import yaml

    from musictx.decoding.errors import GenerateError
    from musictx.decoding.sampling_options import SamplingOptions

    known = {f.name for f in fields(SamplingOptions)}
    given: dict = {"seed": seed}
    for item in settings:
        name, _, value = item.partition("=")
        *parents, last = name.split(".")
        if name.split(".")[0] not in known:
            raise SystemExit(f"--set {item}: SamplingOptions has no option {name!r}; it has {sorted(known)}")
        place = given
        for part in parents:
            place = place.setdefault(part, {})
        place[last] = yaml.safe_load(value)
    try:
        sampling = SamplingOptions.from_mapping(given)
        sampling.check_sampling()
    except (GenerateError, TypeError) as err:
        raise SystemExit(f"--set {' '.join(settings)}: {err}") from None
    return sampling


def _row(batch: int, runs: list[tuple[float, float, int]]) -> dict:
    wall, music, tokens = sorted(runs)[len(runs) // 2]
    return {"batch": batch, "wall_s": wall, "music_s": music, "tokens": tokens, "x_real_time": music / wall,
            "tokens_per_s": tokens / wall, "spread": (min(r[0] for r in runs), max(r[0] for r in runs))}


def measure(arms: list[tuple], batch: int, seconds: float, repeats: int) -> list[dict]:
    """Median wall time of generating ``seconds`` of music per sample, ``batch`` samples at once, for each
    arm (net, tokenizer, sampling); their runs interleaved (A B A B ...) so that a noisy machine slows each
    alike."""
    runs: list[list] = [[] for _ in arms]
    for _ in range(repeats):
        for k, (net, tokenizer, sampling) in enumerate(arms):
            runs[k].append(one_run(net, tokenizer, batch, seconds, sampling))
    return [_row(batch, r) for r in runs]


def print_table(names: list[str], rows: list[list[dict]]) -> None:
    """The markdown table of `measure`'s rows (one per batch size, one entry per arm), each pair's ratio, and
    the batch-1 goal."""
    print("\n| batch | settings | new tokens | music s | wall s (min-max) | tokens/s | x real time |")
    print("|---:|---|---:|---:|---|---:|---:|")
    for pair in rows:
        for name, r in zip(names, pair, strict=False):
            print(f"| {r['batch']} | {name} | {r['tokens']} | {r['music_s']:.1f} | {r['wall_s']:.2f} "
                  f"({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | {r['tokens_per_s']:.0f} | {r['x_real_time']:.1f}x |")
        if len(pair) == 2:
            print(f"| {pair[0]['batch']} | ratio | | | | {pair[1]['tokens_per_s'] / pair[0]['tokens_per_s']:.2f}x "
                  f"the first's tokens/s | {pair[1]['x_real_time'] / pair[0]['x_real_time']:.2f}x the first's |")
    one = next((pair[0] for pair in rows if pair[0]["batch"] == 1), None)
    if one:
        print(f"\nGoal (issues 64, 65): >= 5x real time at batch 1 on 1 thread of the slower CPU (Zen 3) -> "
              f"{one['x_real_time']:.1f}x on this CPU ({'met' if one['x_real_time'] >= 5 else 'missed'} here)")


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m bench realtime", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="piano", help="shipped name, model folder or .ckpt (default piano)")
    p.add_argument("--threads", type=COUNT, default=1, help="torch threads (default 1: see above)")
    p.add_argument("--batch-sizes", type=number_list(), default="1,4")
    p.add_argument("--seconds", type=SECONDS, default=30.0, help="seconds of new music per sample")
    p.add_argument("--repeats", type=COUNT, default=3)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a sampling option other than its default (repeatable), "
                        "e.g. --set hooks.bass_lean.strength=0")
    p.add_argument("--against", action="append", default=[], metavar="NAME=VALUE",
                   help="also time these settings, interleaved with the first, and print the speed ratio")
    p.add_argument("--against-model", default=None, metavar="MODEL",
                   help="also time this model with the same settings, interleaved, and print the speed ratio")
    args = p.parse_args(argv)
    if args.against and args.against_model:
        p.error("--against and --against-model: one comparison at a time")

    import torch

    from musictx.checkpoints.model_store import load_model

    torch.set_num_threads(args.threads)
    net, tokenizer, meta = load_model(args.model)
    n_params = sum(q.numel() for q in net.parameters())
    print(f"model {args.model} ({meta['source']}, {n_params:,} parameters), seed {BUNDLED_MOTIF.name}, "
          f"{args.seconds:g} s new music per sample, threads={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, median of {args.repeats}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    arms = [(net, tokenizer, sampling_of(args.set))]
    names = [f"{args.model}: {' '.join(args.set) or 'defaults'}"]
    if args.against:
        arms.append((net, tokenizer, sampling_of(args.set + args.against)))
        names.append(f"{args.model}: {' '.join(args.set + args.against)}")
    if args.against_model:
        other, other_tok, _ = load_model(args.against_model)
        arms.append((other, other_tok, arms[0][2]))
        names.append(f"{args.against_model}: {' '.join(args.set) or 'defaults'}")
    rows = [measure(arms, int(b), args.seconds, args.repeats) for b in args.batch_sizes.split(",") if b]
    print_table(names, rows)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
