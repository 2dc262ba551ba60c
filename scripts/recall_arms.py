"""The recall ablation of README "Recall: does the model use what it has heard?".

Arms trained side by side, one thread each, on the same windows of data/piano for the same token budget
(each arm's run folder is outputs/arms/<experiment>):

    for e in piano piano_recall; do OMP_WAIT_POLICY=PASSIVE musictx-train experiment=$e threads=1 \\
        trainer.max_steps=3000 trainer.val_check_interval=250 trainer.limit_val_batches=4 \\
        hydra.run.dir=outputs/arms/$e & done
    OMP_WAIT_POLICY=PASSIVE python scripts/recall_arms.py eval piano piano_recall   # per arm: NLL + recall JSON
    python scripts/recall_arms.py report piano piano_recall --curves A=outputs/arms/piano B=outputs/arms/piano_recall

The seed kept by the sampler (`keep_seed`), on the shipped model's forgetting curve:

    for k in 0 512; do musictx-evaluate mode=motif data.dir=data/piano split=test motif.num_seeds=8 \
        motif.keep_seed=$k output_dir=outputs/keep_seed/k$k; done
    python scripts/recall_arms.py keep-seed outputs/keep_seed/k0 outputs/keep_seed/k512

``eval`` scores the arm's last checkpoint on the whole test split (NLL, context 1024, stride 512) and
runs `musictx.evaluation.recall.evaluate_recall` on it; ``report`` adds the training curves of val/loss and the
copy gain that `RecallProbe` logged at every validation. Any checkpoint can be named as ``name=path``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from matplotlib.figure import Figure

from musictx.evaluation.plots import read_metrics_csv
from musictx.evaluation.recall import format_recall_table, plot_recall
from musictx.evaluation.run import evaluation_options, run_evaluation
from musictx.io.piano_roll import save_figure

ROOT = Path(__file__).resolve().parents[1]
ARMS = ROOT / "outputs" / "arms"
DOCS = ROOT / "docs"


def arm_paths(arm: str) -> tuple[str, str, Path | None]:
    """(name, checkpoint, metrics.csv or None) of ``arm``: an experiment name or ``name=checkpoint``."""
    if "=" in arm:
        name, ckpt = arm.split("=", 1)
        return name, ckpt, None
    return arm, str(ARMS / arm / "checkpoints" / "last.ckpt"), ARMS / arm / "csv" / "metrics.csv"


def evaluate_arm(arm: str, data_dir: str) -> dict:
    name, ckpt, _ = arm_paths(arm)
    nll = run_evaluation(evaluation_options(checkpoint=ckpt, data={"dir": data_dir}, split="test", progress=False))
    rec = run_evaluation(evaluation_options(checkpoint=ckpt, data={"dir": data_dir}, split="test", mode="recall"))
    out = {"name": name, "checkpoint": ckpt, "global_step": nll["global_step"], "nll": nll["nll"],
           "recall": rec["recall"]}
    path = ARMS / f"{name}.eval.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"{name} (step {out['global_step']}): test NLL {out['nll']['nll']:.4f}\n{format_recall_table(out['recall'])}")
    return out


def plot_training(runs: dict[str, Path], path: Path, offsets: dict[str, int] | None = None) -> None:
    """val/loss and the logged copy gains against step, one colour per run (``{label: run folder}``); a run
    started from another's checkpoint is drawn from ``offsets[label]`` steps on."""
    fig = Figure(figsize=(11, 4), layout="constrained")
    loss_ax, gain_ax = fig.subplots(1, 2)
    for k, (name, run) in enumerate(runs.items()):
        series = read_metrics_csv(Path(run) / "csv" / "metrics.csv")
        shift = (offsets or {}).get(name, 0)
        series = {key: ([s + shift for s in steps], values) for key, (steps, values) in series.items()}
        loss_ax.plot(*series["val/loss"], color=f"C{k}", marker="o", markersize=3, label=name)
        for key, style in (("recall/gain_64", "-"), ("recall/gain_512", "--")):
            if key in series:
                gain_ax.plot(*series[key], style, color=f"C{k}", marker="o", markersize=3,
                             label=f"{name}, gap {key.rsplit('_', 1)[1]}")
    loss_ax.set(xlabel="step (4 x 1024 tokens)", ylabel="validation NLL (nats/token, 64 windows)",
                title="validation loss")
    gain_ax.set(xlabel="step (4 x 1024 tokens)", ylabel="copy gain (nats/token)",
                title="copy gain on 8 validation probes, during training")
    gain_ax.axhline(0, color="grey", lw=0.8)
    loss_ax.legend(fontsize=8)
    gain_ax.legend(fontsize=7)
    save_figure(fig, path)


def report(arms: list[str], curves: list[str], out: str = "recall_arms") -> None:
    results = [json.loads((ARMS / f"{arm_paths(a)[0]}.eval.json").read_text()) for a in arms]
    gaps = [r["gap"] for r in results[0]["recall"]["copy"]["exact"]]
    lines = ["| arm | step | test NLL | " + " | ".join(f"copy gain @{g}" for g in gaps)
             + " | transposed +2 @" + str(gaps[-1]) + " | NLL ctx 1024 | NLL ctx 2048 |",
             "|---|---:|---:|" + "---:|" * (len(gaps) + 3)]
    for r in results:
        ctx = {c["context"]: c["nll"] for c in r["recall"]["context"]}
        gains = " | ".join(f"{row['gain']:.3f}" for row in r["recall"]["copy"]["exact"])
        lines.append(f"| {r['name']} | {r['global_step']} | {r['nll']['nll']:.4f} | {gains} | "
                     f"{r['recall']['copy']['transposed'][-1]['gain']:.3f} | {ctx.get(1024, float('nan')):.4f} | "
                     f"{ctx.get(2048, float('nan')):.4f} |")
    table = "\n".join(lines)
    print(table)
    DOCS.mkdir(exist_ok=True)
    (DOCS / f"{out}.json").write_text(json.dumps(
        [{k: r[k] for k in ("name", "global_step", "nll", "recall")} for r in results], indent=1))
    plot_recall([r["recall"] for r in results], [r["name"] for r in results], DOCS / f"{out}.png")
    if curves:
        plot_training(dict(c.split("=", 1) for c in curves), DOCS / f"{out}_training.png")
    print(f"wrote {DOCS / out}.json, {out}.png" + (f", {out}_training.png" if curves else ""))


def keep_seed_table(folders: list[str]) -> None:
    """Near motif reuse and pitch-class distance to the seed in the windows ending at 10, 30 and 60 s."""
    lines = ["| run | keep_seed | near reuse @10 / 30 / 60 s | pitch-class dist. to seed @10 / 30 / 60 s |",
             "|---|---:|---|---|"]
    for folder in folders:
        motif = json.loads((Path(folder) / "metrics.json").read_text())["motif"]
        ends = [w[1] for w in motif["windows"]]
        at = [ends.index(t) for t in (10.0, 30.0, 60.0) if t in ends]
        for source in ("continuation", "real"):
            curve = motif["curves"][source]
            cells = [" / ".join(f"{curve[key]['mean'][i]:.3f}" for i in at)
                     for key in ("motif_reuse_near", "pitch_class_tv")]
            lines.append(f"| {Path(folder).name}: {source} | {motif['settings']['keep_seed']} | "
                         + " | ".join(cells) + " |")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("eval", "report", "keep-seed"))
    parser.add_argument("arms", nargs="+", help="experiment names under outputs/arms, or name=checkpoint")
    parser.add_argument("--data", default=str(ROOT / "data" / "piano"))
    parser.add_argument("--curves", nargs="*", default=[], help="report: label=run_folder of training curves")
    parser.add_argument("--out", default="recall_arms", help="report: docs/<out>.json, .png, _training.png")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.step == "keep-seed":
        keep_seed_table(args.arms)
    elif args.step == "eval":
        for arm in args.arms:
            evaluate_arm(arm, args.data)
    else:
        report(args.arms, args.curves, args.out)


if __name__ == "__main__":
    main()
