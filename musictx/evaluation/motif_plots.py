"""Forgetting curves of ``musictx-evaluate mode=motif`` results (`musictx.evaluation.motif`), drawn to a PNG."""

from __future__ import annotations

from pathlib import Path

from musictx.evaluation.motif import METRICS
from musictx.io.piano_roll import save_figure

PANELS = (*METRICS, ("notes_per_s", "notes per second"))  # the figure's panels


def _band(ax, x, curve: dict, colour, style: str, label: str) -> None:
    ax.plot(x, curve["mean"], style, color=colour, label=label, marker="o", markersize=3)
    ax.fill_between(x, curve["lo"], curve["hi"], color=colour, alpha=0.15, linewidth=0)


def plot_forgetting_curves(results: list[dict], path, labels: list[str] | None = None) -> Path:
    """One PNG, one panel per metric: each result's model curve (solid) and floor (dotted) in its own
    colour with 95% bands, the real continuation (black, dashed) once per distinct seed set, and a thin
    vertical line where that model's context fills on average. ``results``: `evaluate_motif` outputs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = labels or [f"model {i + 1}" for i in range(len(results))]
    cols = -(-len(PANELS) // 2)
    fig = Figure(figsize=(5 * cols, 8), layout="constrained")
    grid = fig.subplots(2, cols, sharex=True).ravel()
    for ax in grid[len(PANELS):]:
        ax.set_axis_off()  # an odd number of panels leaves one slot empty
    axes = grid[:len(PANELS)]
    drawn: set[tuple] = set()
    for i, (res, label) in enumerate(zip(results, labels, strict=True)):
        x = [(a + b) / 2 for a, b in res["windows"]]
        curves, colour = res["curves"], f"C{i}"
        ceiling = "real" in curves and tuple(res["seeds"]) not in drawn
        drawn.add(tuple(res["seeds"]))
        for ax, (key, title) in zip(axes, PANELS, strict=True):
            _band(ax, x, curves["continuation"][key], colour, "-", label)
            _band(ax, x, curves["unconditioned"][key], colour, ":", f"{label}, unconditioned (floor)")
            if ceiling:
                _band(ax, x, curves["real"][key], "black", "--", "real continuation (ceiling)")
            if res.get("context_full_mean_s") is not None:
                ax.axvline(res["context_full_mean_s"], color=colour, linewidth=0.8, alpha=0.6)
            ax.set_title(title)
            ax.set_xlim(0, max(b for _, b in res["windows"]))
            if key.endswith("_tv"):
                ax.set_ylim(-0.02, 1.02)  # distances: the whole scale
            else:
                ax.set_ylim(bottom=-0.02 * ax.get_ylim()[1])  # reuse is a few percent: zoom in, keep 0
            ax.grid(alpha=0.3)
    for ax in axes[-cols:]:  # the lowest panel of each column, the one above an empty slot included
        ax.set_xlabel("seconds after the seed (window centre)")
        ax.tick_params(labelbottom=True)  # sharex hid the ticks of every panel above the bottom row
    axes[0].legend(fontsize="small")
    fig.suptitle(f"Forgetting curves: {results[0]['samples']} continuations, {results[0]['ngram']}-grams, "
                 "95% bands; vertical lines: context full")
    FigureCanvasAgg(fig)  # attaches the Agg canvas (no pyplot global state)
    return save_figure(fig, path)  # atomic (musictx.safe_output)


def result_label(result: dict, fallback: str) -> str:
    """A short name for a musictx-evaluate result: the model class and its training step."""
    model = (result.get("model") or fallback).rsplit(".", 1)[-1]
    step = result.get("global_step")
    return f"{model} (step {step})" if step is not None else model
