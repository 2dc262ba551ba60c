"""Pick the shipped model's size by measurement: train each candidate for the same wall-clock budget
on data/piano (experiment=piano, cosine schedule and 10% warm-up fitted
to the budget) and compare validation NLL.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/sweep_piano.py --minutes 5

Each size first runs a 12-step probe to measure its tokens/s, which sets max_steps so that the cosine
schedule ends when the budget does; then it trains and validates once on the same 128 windows.
Prints a Markdown table and writes outputs/piano/sweep.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = str(Path(sys.executable).parent / "musictx-train")
SIZES = {  # name: (n_layers, d_model, n_heads, d_ff)
    "3x192": (3, 192, 3, 768),
    "4x256": (4, 256, 4, 1024),
    "5x320": (5, 320, 5, 1280),
}
TOKENS_PER_STEP = 4 * 1024


def train(name: str, size: tuple, steps: int, run_dir: Path, validate: bool) -> list[dict]:
    n_layers, d_model, n_heads, d_ff = size
    args = [TRAIN, "experiment=piano", f"model.net.n_layers={n_layers}", f"model.net.d_model={d_model}",
            f"model.net.n_heads={n_heads}", f"model.net.d_ff={d_ff}", f"trainer.max_steps={steps}",
            f"trainer.val_check_interval={steps}", f"schedule.warmup_steps={max(1, steps // 10)}",
            "trainer.log_every_n_steps=4",
            f"trainer.limit_val_batches={8 if validate else 0}", f"hydra.run.dir={run_dir}"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return list(csv.DictReader(open(run_dir / "csv" / "metrics.csv")))


def column(rows: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rows if r.get(key)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=5.0)
    args = parser.parse_args()
    results = []
    for name, size in SIZES.items():
        base = ROOT / "outputs" / "piano" / "sweep" / name
        probe = column(train(name, size, 12, base / "probe", validate=False), "train/tokens_per_s")
        rate = sorted(probe[1:])[len(probe[1:]) // 2]  # median, first log row includes start-up
        steps = max(20, int(rate * args.minutes * 60 / TOKENS_PER_STEP))
        rows = train(name, size, steps, base / "run", validate=True)
        val = column(rows, "val/loss")[-1]
        tps = column(rows, "train/tokens_per_s")
        results.append({"size": name, "probe_tokens_per_s": rate, "steps": steps,
                        "train_tokens": steps * TOKENS_PER_STEP, "val_nll": val,
                        "median_tokens_per_s": sorted(tps)[len(tps) // 2]})
        print(results[-1], flush=True)
    print(f"\n| size | tokens/s | steps | training tokens | val NLL after {args.minutes:g} min |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['size']} | {r['median_tokens_per_s']:,.0f} | {r['steps']} | {r['train_tokens']:,} | "
              f"{r['val_nll']:.3f} |")
    (ROOT / "outputs" / "piano" / "sweep.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
