"""Figures written to files with matplotlib's Agg canvas (no display, no pyplot global state).

- `plot_piano_roll`: notes as bars, pitch against seconds, shade = velocity; the seed part shaded and a
  vertical line where the model takes over.
- `plot_loss_curves`: train/val loss against step from a Lightning CSV logger's ``metrics.csv``.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from musictx.midi_io import Notes


def _save(fig: Figure, path: str | os.PathLike) -> Path:
    FigureCanvasAgg(fig)  # attaches the Agg canvas to the figure
    fig.savefig(path, dpi=110)
    return Path(path)


def plot_piano_roll(notes: Notes, path: str | os.PathLike, takeover: float | None = None,
                    title: str | None = None) -> Path:
    """Write a piano roll of ``notes`` to ``path`` (PNG by its suffix).

    ``takeover``: seconds where the seed ends and the model's notes begin; the span before it is shaded
    and a vertical line marks it. None (or 0) draws neither.
    """
    end = max(notes.duration(), takeover or 0.0, 1.0)
    fig = Figure(figsize=(min(4 + end / 3, 24), 5), layout="constrained")
    ax = fig.add_subplot()
    if len(notes):
        colours = _velocity_colours(notes.velocity)
        ax.barh(notes.pitch, notes.end - notes.start, left=notes.start, height=0.8, color=colours,
                edgecolor="none")
        lo, hi = int(notes.pitch.min()), int(notes.pitch.max())
        ax.set_ylim(lo - 2, hi + 2)
    if takeover:
        ax.axvspan(0, takeover, color="0.85", zorder=0, label="seed")
        ax.axvline(takeover, color="tab:red", linewidth=1.5, label=f"model from {takeover:.2f} s")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_xlim(0, end)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MIDI pitch")
    ax.set_title(title or f"{len(notes)} notes, {notes.duration():.1f} s")
    return _save(fig, path)


def _velocity_colours(velocity: np.ndarray) -> np.ndarray:
    """RGBA per note: darker blue for louder."""
    from matplotlib import colormaps

    return colormaps["Blues"](0.35 + 0.65 * np.clip(velocity, 1, 127) / 127)


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
    return _save(fig, path)
