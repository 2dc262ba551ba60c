"""Figures of training runs, written with matplotlib's Agg canvas (no display, no pyplot global state).

- `plot_loss_curves`: train/val loss against step from a Lightning CSV logger's ``metrics.csv``.
- `read_metrics_csv`: that file as {metric: (steps, values)}.

Piano rolls (pictures of music) are `musictx.io.piano_roll`.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from matplotlib.figure import Figure

from musictx.io.piano_roll import save_figure


def read_metrics_csv(path: str | os.PathLike) -> dict[str, tuple[list[int], list[float]]]:
    """{metric: (steps, values)} of a Lightning CSVLogger ``metrics.csv`` (empty cells skipped)."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = row.get("step")
            if not step:
                continue
            for key, value in row.items():
                if key in ("step", "epoch") or not value:
                    continue
                steps, values = series.setdefault(key, ([], []))
                steps.append(int(float(step)))
                values.append(float(value))
    return series


def plot_loss_curves(metrics_csv: str | os.PathLike, path: str | os.PathLike,
                     keys: tuple[str, ...] = ("train/loss", "val/loss")) -> Path:
    """Write the loss curves of a training run (``<run>/csv/metrics.csv``) to ``path``."""
    series = read_metrics_csv(metrics_csv)
    missing = [k for k in keys if k not in series]
    if len(missing) == len(keys):
        raise ValueError(f"{metrics_csv}: none of {list(keys)} logged; columns are {sorted(series)}")
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for key in keys:
        if key in series:
            steps, values = series[key]
            ax.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / token)")
    finite = [v for k in keys if k in series for v in series[k][1] if math.isfinite(v)]
    if finite and max(finite) / max(min(finite), 1e-9) > 20:
        ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
