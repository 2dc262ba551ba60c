"""What the sampler's hooks cost: ``python -m bench hooks [--model pop]``.

Continues the bundled motif (`musictx/assets/motif.mid`) as `bench.realtime` does, with four
settings timed interleaved (A B C D, then D C B A, ...) so that a noisy machine slows each alike:

- ``shipped``: the defaults, one continuation drawn (``best_of=1``: the choice among 4 that `pop` ships is 4 rows
  a step, timed by ``python -m bench realtime --model pop --against best_of=1``);
- ``guidance on every draw``: recall guidance asks the net about the recent ids before every draw, not only
  a REMI model's Pitch draws (``hooks.recall_guidance.draws=every``);
- ``leans, no guidance``: recall guidance off, the other hooks as shipped;
- ``off``: every hook with a strength at 0, recall guidance included; the grammar guards, the bar-repeat
  limit and the length rule stay (without them there is no piece to time);
- ``engine alone``: the same decoding engine (`musictx.decoding.FastDecoder`) stepping as many new ids as
  ``shipped`` drew, after a prompt as long as the seed's, each step's argmax fed back: no hooks, no filters,
  no draw. Like each continuation of the other arms, it lays its weights out for steps first (`fast_decoder`:
  timed in both since 2026-11-30; before, only the other arms' was). Its share is the limit the sampler's logic
  leaves (issue 67 asks ``shipped`` >= 0.8x of it). It runs next to ``shipped`` in every round, and their ratio
  is also printed round by round (median and range). The
  sampler feeds an id its grammar leaves alone with the next one, in one pass (`musictx.decoding.hook.Grammar`):
  on the one-track motif about a fifth of its ids, which the engine alone still steps one by one.

Each arm continues ``--seeds`` seeds per round; a row gives new tokens per second of its runs' median and of
its fastest (the least disturbed) over ``--repeats`` rounds, and each as a share of ``off``'s; then the same
per second of the process's CPU time (median), which other processes on a shared host disturb far less than
the wall clock (with one thread the process's CPU time is the decoding's). Threads explicit (default 1),
OMP_WAIT_POLICY=PASSIVE unless the environment sets it.
"""

from __future__ import annotations

import argparse
import os
import statistics

from musictx.console.args import COUNT, SECONDS, OneLineParser
from musictx.paths import BUNDLED_MOTIF  # no torch

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see bench.realtime)

OFF_ARM = "off"
ENGINE_ARM = "engine alone"
PROMPT_IDS = 250  # about the bundled motif's ids with the pop tokenizer (249)


def arms() -> dict[str, list[str]]:
    """Each arm's settings, as ``NAME=VALUE`` overrides of the shipped sampling options."""
    from dataclasses import fields

    from musictx.decoding.hooks.registry import HOOKS

    strengths = [f"hooks.{spec.name}.strength=0" for spec in HOOKS
                 if spec.options is not None and "strength" in {f.name for f in fields(spec.options)}]
    guidance_off = ["hooks.recall_guidance.strength=0"]
    one = ["best_of=1"]  # a draw's hooks are timed here, not the choice among candidates
    return {"shipped": one, "guidance on every draw": [*one, "hooks.recall_guidance.draws=every"],
            "leans, no guidance": one + guidance_off, OFF_ARM: one + sorted(set(strengths + guidance_off))}


def time_arms(net, tokenizer, settings: dict[str, list[str]], batch: int, seconds: float, seeds: int,
              repeats: int) -> dict[str, dict]:
    """Per arm: new tokens of each seed's run, and the wall and CPU times of each round (the seeds' runs
    summed)."""
    import time

    from bench.realtime import one_run, sampling_of

    first, *rest = settings  # the shipped arm, then the engine right after it: each round pairs them (`paired`)
    names = [first, ENGINE_ARM, *rest]
    out = {name: {"tokens": 0, "walls": [], "cpus": []} for name in [*settings, ENGINE_ARM]}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            cpu = time.process_time()
            if name == ENGINE_ARM:  # as many steps as the shipped arm drew (its first round runs before), B ids each
                runs = [engine_alone(net, out["shipped"]["tokens"] // (seeds * batch), batch) for _ in range(seeds)]
            else:
                runs = [one_run(net, tokenizer, batch, seconds, sampling_of(settings[name], seed))
                        for seed in range(seeds)]
            out[name]["cpus"].append(time.process_time() - cpu)
            out[name]["walls"].append(sum(wall for wall, _, _ in runs))
            out[name]["tokens"] = sum(tokens for _, _, tokens in runs)
    return out


def paired(timed: dict[str, dict], arm: str, base: str) -> list[float]:
    """Per round, ``arm``'s tokens a second over ``base``'s, each round's two runs timed next to each other: a
    neighbour that slows the host for a while slows both alike, which a ratio of the two arms' medians misses."""
    a, b = timed[arm], timed[base]
    return [(a["tokens"] / wa) / (b["tokens"] / wb) for wa, wb in zip(a["walls"], b["walls"], strict=True)]


def engine_alone(net, steps: int, batch: int, prompt_len: int = PROMPT_IDS) -> tuple[float, float, int]:
    """(wall s, 0, new ids) of the decoding engine alone: its weights laid out for steps (`fast_decoder`, as each
    continuation of the other arms makes them), a random prompt of ``prompt_len`` ids through the net's forward
    into a step cache, then ``steps`` one-id steps, each step's argmax fed back."""
    import time

    import torch

    from musictx.decoding import fast_decoder

    t0 = time.perf_counter()
    decoder = fast_decoder(net)
    if decoder is None:
        raise SystemExit(f"{type(net).__name__} has no fast decoding engine (a Transformer has)")
    with torch.inference_mode():
        cache = decoder.init_cache()
        out = net(torch.randint(0, net.vocab_size, (batch, prompt_len)), cache=cache)
        ids = (out[0] if isinstance(out, tuple) else out)[:, -1].argmax(-1)  # (B,)
        for _ in range(steps):
            ids = decoder.step(ids, cache).argmax(-1)
    return time.perf_counter() - t0, 0.0, batch * steps


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m bench hooks", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="pop", help="shipped name, model folder or .ckpt (default pop)")
    p.add_argument("--threads", type=COUNT, default=1)
    p.add_argument("--batch", type=COUNT, default=1)
    p.add_argument("--seconds", type=SECONDS, default=20.0, help="seconds of new music per sample")
    p.add_argument("--seeds", type=COUNT, default=3, help="sampling seeds per arm and round")
    p.add_argument("--repeats", type=COUNT, default=9, help="rounds")
    args = p.parse_args(argv)

    import torch

    from musictx.checkpoints.model_store import load_model

    torch.set_num_threads(args.threads)
    net, tokenizer, _ = load_model(args.model)
    print(f"model {args.model}, seed {BUNDLED_MOTIF.name}, {args.seconds:g} s new per sample, batch "
          f"{args.batch}, {args.seeds} seeds x {args.repeats} rounds, threads={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; load average before: {os.getloadavg()[0]:.2f}")
    timed = time_arms(net, tokenizer, arms(), args.batch, args.seconds, args.seeds, args.repeats)
    rate = {name: {"median": t["tokens"] / statistics.median(t["walls"]), "fastest": t["tokens"] / min(t["walls"]),
                   "cpu": t["tokens"] / statistics.median(t["cpus"])} for name, t in timed.items()}
    print("\n| hooks | new tokens | tokens/s (median) | x off | tokens/s (fastest) | x off | tokens/CPU s (median) "
          "| x off |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rate.items():
        off = rate[OFF_ARM]
        print(f"| {name} | {timed[name]['tokens']} | {r['median']:.0f} | {r['median'] / off['median']:.2f} "
              f"| {r['fastest']:.0f} | {r['fastest'] / off['fastest']:.2f} | {r['cpu']:.0f} "
              f"| {r['cpu'] / off['cpu']:.2f} |")
    engine = rate[ENGINE_ARM]
    print(f"shipped / engine alone: {rate['shipped']['median'] / engine['median']:.2f} (median), "
          f"{rate['shipped']['cpu'] / engine['cpu']:.2f} (CPU time)")
    rounds = paired(timed, "shipped", ENGINE_ARM)
    print(f"shipped / engine alone, paired by round: {statistics.median(rounds):.2f} (median; "
          f"{min(rounds):.2f}-{max(rounds):.2f} over {len(rounds)} rounds)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
