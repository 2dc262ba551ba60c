"""The model comparison report, written when a ``musictx-train -m experiment=compare`` sweep ends.

A Hydra callback (`musictx.commands.compare.CompareReport`, named in conf/experiment/compare.yaml) calls
`write_report`: each job of the sweep trains one model and writes ``metrics.json`` (test-split evaluation)
and ``csv/metrics.csv`` (training log) in its own folder; this gathers them into ``compare.md`` (a Markdown
table) and ``val_loss.png`` (the validation curves) in the sweep folder. Also usable by hand:
``python -m musictx.commands.compare <sweep dir>``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from musictx.evaluation.plots import read_metrics_csv
from musictx.safe_output import atomic_path, write_text
from musictx.user_error import UserError

CONT_COLUMNS = (("pitch_class_tv_vs_real", "PC dist. to real"), ("ioi_tv_vs_real", "IOI dist. to real"),
                ("motif_reuse", "motif reuse"))


class CompareError(UserError):
    """A sweep folder the report cannot be made of; the message names the folder or the file."""


def read_log(csv_path: Path) -> dict[str, list[tuple[int, float]]]:
    """Series of a Lightning CSV log: name -> [(step, value)] (`musictx.evaluation.plots.read_metrics_csv`, paired)."""
    return {key: list(zip(steps, values, strict=True)) for key, (steps, values) in read_metrics_csv(csv_path).items()}


def gather(sweep_dir: Path) -> list[dict]:
    """Each run folder's metrics.json with its training log; CompareError naming a file that is not one of
    ``musictx-evaluate``'s with a ``mode=nll`` (or ``all``) result, which every column but the speed needs."""
    runs = []
    for metrics in sorted(sweep_dir.glob("*/metrics.json")):
        try:
            run = json.loads(metrics.read_text())
        except (OSError, ValueError) as err:
            raise CompareError(f"{metrics}: not a metrics.json of musictx-evaluate ({' '.join(str(err).split())})"
                               ) from None
        if not isinstance(run, dict) or not isinstance(run.get("nll"), dict) or "model" not in run:
            raise CompareError(f"{metrics}: no mode=nll result; the report needs each run evaluated with "
                               "evaluate.mode=nll or all")
        log = metrics.parent / "csv" / "metrics.csv"
        run["log"] = read_log(log) if log.exists() else {}
        run["name"] = metrics.parent.name
        runs.append(run)
    return runs


def _mean(points: list[tuple[int, float]], skip_first: int = 2) -> float:
    vals = [v for _, v in points[skip_first:]] or [v for _, v in points]
    return sum(vals) / len(vals) if vals else math.nan


def evaluated_on(run: dict) -> str:
    """``data_dir [split]`` of a run's metrics.json, as its table's header or column names it; a run scored on the
    split's first songs only (``nll.max_songs``) says so, so it is not set beside whole splits as their like."""
    nll = run.get("nll") if isinstance(run.get("nll"), dict) else {}
    first = nll.get("songs") if nll.get("songs", nll.get("songs_in_split")) != nll.get("songs_in_split") else None
    part = f", first {first} of {nll['songs_in_split']} songs" if first else ""
    return f"{os.path.normpath(str(run.get('data_dir')))} [{run.get('split')}{part}]"


def markdown_table(runs: list[dict]) -> str:
    """One row per run. The NLL columns are named by the split the runs were scored on (a sweep's
    ``evaluate.split=validation`` was headed "test"); runs scored on different data or splits get a column saying
    which, and the real continuation's row (one run's seeds) is then left out: the rows do not compare alike."""
    places = {evaluated_on(r) for r in runs}
    split = (runs[0].get("split") if len(places) == 1 else None) or "eval"
    head = ["model", "params", "train tokens/s", "steps", "best val NLL", f"{split} NLL", f"{split} ppl",
            f"{split} acc"]
    head += ["evaluated on"] if len(places) > 1 else []
    has_cont = all("continuation" in r for r in runs)
    if has_cont:
        head += [c for _, c in CONT_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    classes = [r["model"].rsplit(".", 1)[-1] for r in runs]
    for r, name in zip(runs, classes, strict=True):
        val = [v for _, v in r["log"].get("val/loss", [])]
        speed = _mean(r["log"].get("train/tokens_per_s", []))
        name = f"{name} ({r['name']})" if classes.count(name) > 1 else name  # two of a kind: told by their folder
        cells = [name, f"{r['params']:,}", f"{speed:,.0f}" if math.isfinite(speed) else "-",
                 str(r.get("global_step")), f"{min(val):.4f}" if val else "-", f"{r['nll']['nll']:.4f}",
                 f"{r['nll']['ppl']:.2f}", f"{r['nll']['accuracy']:.3f}"]
        cells += [evaluated_on(r)] if len(places) > 1 else []
        if has_cont:
            cells += [f"{r['continuation']['continuation'][k]:.3f}" for k, _ in CONT_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    if has_cont and len(places) == 1:
        real = runs[0]["continuation"]["real"]
        cells = ["real continuation (ceiling)", "", "", "", "", "", "", ""]
        lines.append("| " + " | ".join(cells + [f"{real[k]:.3f}" for k, _ in CONT_COLUMNS]) + " |")
    return "\n".join(lines)


def plot_val_curves(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for r in runs:
        pts = r["log"].get("val/loss", [])
        if pts:
            ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", ms=3,
                    label=f"{r['model'].rsplit('.', 1)[-1]} ({r.get('split') or 'eval'} {r['nll']['nll']:.3f})")
    ax.set_xlabel("training step")
    ax.set_ylabel("validation NLL (nats/token)")
    ax.set_title("Validation loss, same data, token budget and seed")
    ax.grid(alpha=0.3)
    if ax.lines:  # runs without a training log (csv/metrics.csv) draw nothing; an empty legend only warns
        ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:  # whole or not at all (musictx.safe_output)
        fig.savefig(tmp, dpi=120)
    plt.close(fig)


def write_report(sweep_dir: str | Path, strict: bool = False) -> Path | None:
    """compare.md and val_loss.png in ``sweep_dir``; None when no run there has a metrics.json (the sweep's
    callback says so and goes on), CompareError instead when ``strict`` (a user asked for this folder's report)."""
    sweep = Path(sweep_dir)
    if strict and not sweep.is_dir():
        what = "a file, not a sweep folder" if sweep.exists() else "no such folder"
        raise CompareError(f"{sweep}: {what} (give the folder of a musictx-train -m experiment=compare sweep)")
    runs = gather(sweep)
    if not runs and strict:
        raise CompareError(f"{sweep}: no run folder in it holds a metrics.json (<run>/metrics.json); give the folder "
                           "of a finished musictx-train -m experiment=compare sweep")
    if not runs:
        print(f"compare: no */metrics.json under {sweep}; nothing to report")
        return None
    table = markdown_table(runs)
    write_text(sweep / "compare.md", table + "\n")
    plot_val_curves(runs, sweep / "val_loss.png")
    print(f"\n{table}\n\ncompare: wrote {sweep / 'compare.md'} and {sweep / 'val_loss.png'}")
    return sweep / "compare.md"
