"""Back here after the GPU run, on CPU: the imported pop-large against the shipped pop, and the two decisions.

    python scripts/import_pop_large.py <files back> --data data/pop_large      # first: the loadable folder
    python scripts/eval_pop_large.py [--model outputs/pop_large/model] [--data data/pop_large] [--scorecard]

1. validation and test NLL (per token and per note) of both models on the same splits (``data/pop_large``'s
   validation and test splits are ``data/pop``'s, token for token), each model at a stride of half its context
   (``musictx-evaluate``'s default: pop 512 of 1,024, pop-large 1,024 of 2,048);
2. speed: seconds of new music per second of wall time at batch 1 on this CPU (`bench realtime`);
3. with ``--scorecard``: the continuation scorecard of both on the test songs (shipped settings; slow on CPU
   for the large model: ``--max-songs`` for a first look);
4. the decisions: **ship** as ``pop-large`` if it beats ``pop`` on validation NLL per note; **default on
   CPU** (what ``musictx-generate`` picks for a metrical seed) only if it also writes >= 10x real time;
5. with ``--install`` and a ship decision: the model folder, with its card (docs/pop-large.md) as README.md,
   goes to ``$MUSICTX_MODELS/pop-large`` (default ``~/.local/share/musictx/models``), where every command finds
   it by name (``checkpoint=pop-large``): 43 MB of weights are too large for the package (docs/gpu.md).

Writes ``eval.json`` beside the model folder and prints the table for docs/gpu.md and docs/pop.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_TIME_GOAL = 10.0  # x real time on CPU for musictx-generate's default
NAME = "pop-large"
CARD = ROOT / "docs" / "pop-large.md"


def install(model: Path) -> Path:
    """Copies the model folder and its card to the installed models' folder under `NAME`; returns where."""
    import shutil

    from musictx.paths import installed_models_dir

    to = installed_models_dir() / NAME
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(model, to)
    shutil.copyfile(CARD, to / "README.md")
    return to


def nll(model: str, data: Path, split: str, batch_size: int, stride: int) -> dict:
    from musictx.evaluation.run import evaluation_options, run_evaluation

    cfg = evaluation_options(checkpoint=model, data={"dir": str(data)}, split=split, mode="nll", stride=stride,
                             batch_size=batch_size, progress=True)
    out = run_evaluation(cfg)["nll"]
    return {k: out[k] for k in ("nll", "nll_per_note", "tokens")}


def real_time(model: str, seconds: float) -> float | None:
    """x real time at batch 1 (one thread), from `bench realtime`'s own line."""
    cmd = [sys.executable, "-m", "bench", "realtime", "--model", model, "--batch-sizes", "1",
           "--seconds", str(seconds), "--repeats", "1"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    found = re.search(r"at batch 1 -> ([0-9.]+)x", done.stdout)
    if not found:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return float(found.group(1)) if found else None


def scorecard(model: str, data: Path, max_songs: int | None) -> dict:
    from musictx.evaluation.run import evaluation_options, run_evaluation

    cfg = evaluation_options(checkpoint=model, data={"dir": str(data)}, split="test", mode="continuation",
                             progress=False, scorecard={"max_songs": max_songs})
    return run_evaluation(cfg)["scorecard"]["means"]


def decide(large: dict, pop: dict) -> dict:
    better = large["validation"]["nll_per_note"] < pop["validation"]["nll_per_note"]
    fast = large.get("x_real_time") is not None and large["x_real_time"] >= REAL_TIME_GOAL
    return {"ship_as_pop_large": better, "default_on_cpu": better and fast,
            "why": (f"validation NLL/note {large['validation']['nll_per_note']:.3f} vs pop "
                    f"{pop['validation']['nll_per_note']:.3f}; {large.get('x_real_time')}x real time on this CPU "
                    f"(goal {REAL_TIME_GOAL:g}x for the CPU default)")}


def table(results: dict) -> str:
    rows = ["| model | params | val NLL/token | val NLL/note | test NLL/token | test NLL/note | x real time (CPU) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        cells = [f"{r[s][k]:.3f}" if s in r else "-" for s in ("validation", "test") for k in ("nll", "nll_per_note")]
        rows.append(f"| {name} | {r.get('params', 0):,} | {' | '.join(cells)} | {r.get('x_real_time')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/eval_pop_large.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(ROOT / "outputs" / "pop_large" / "model"))
    p.add_argument("--baseline", default="pop", help="the model to beat (default: the shipped pop)")
    p.add_argument("--data", type=Path, default=ROOT / "data" / "pop_large")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--stride", type=int, default=None, help="scoring stride (default: half each model's context)")
    p.add_argument("--splits", default="validation,test", help="the splits scored (the decision needs validation)")
    p.add_argument("--speed-seconds", type=float, default=30.0, help="seconds of new music for the speed figure")
    p.add_argument("--scorecard", action="store_true", help="also the continuation scorecard on the test songs")
    p.add_argument("--max-songs", type=int, default=None)
    p.add_argument("--out", type=Path, default=None, help="default: eval.json beside the model folder")
    p.add_argument("--install", action="store_true", help=f"install the model as {NAME!r} if it is to ship")
    p.add_argument("--skip-eval", action="store_true", help="with --install: the decision of an earlier eval.json")
    args = p.parse_args(argv)
    out = args.out or Path(args.model).parent / "eval.json"
    if args.skip_eval:
        decision = json.loads(out.read_text())["decision"]
        if args.install and decision["ship_as_pop_large"]:
            print(f"installed {NAME} in {install(Path(args.model))}")
        print(json.dumps(decision, indent=1))
        return 0
    from musictx.checkpoints.model_store import load_model

    results = {}
    for name, model in (("pop-large", args.model), (args.baseline, args.baseline)):
        net, _, _ = load_model(model)
        r = {"params": sum(q.numel() for q in net.parameters()),
             **{split: nll(model, args.data, split, args.batch_size, min(args.stride or net.max_seq_len // 2,
                                                                          net.max_seq_len))
                for split in args.splits.split(",")},
             "x_real_time": real_time(model, args.speed_seconds)}
        if args.scorecard:
            r["scorecard"] = scorecard(model, args.data, args.max_songs)
        results[name] = r
        print(f"{name}: {json.dumps({k: v for k, v in r.items() if k != 'scorecard'})}", flush=True)
    # the decisions read validation alone: a run of other splits (the test split, once) decides nothing
    decision = decide(results["pop-large"], results[args.baseline]) if "validation" in args.splits.split(",") else {}
    out.write_text(json.dumps({"results": results, "decision": decision}, indent=1) + "\n")
    print(table(results))
    print(json.dumps(decision, indent=1))
    if args.install and decision.get("ship_as_pop_large"):
        print(f"installed {NAME} in {install(Path(args.model))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
