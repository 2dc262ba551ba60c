"""Piano rolls written to files with matplotlib's Agg canvas (no display, no pyplot global state): the
picture of a piece, as `musictx.io.audio` is its sound.

- `plot_piano_roll`: notes as bars, pitch against seconds, shade = velocity; the seed part shaded and a
  vertical line where the model takes over. Drawn as one path per velocity, so a million notes take
  seconds, not the quarter of an hour of a patch per note.
- `plot_roll_panels`: several piano rolls stacked on one time axis (e.g. one seed continued by three
  models), each with the seed shaded.
- `note_bars`, `new_figure`, `save_figure`: the pieces, for other figures of notes (attention arcs).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.path import Path as MPath

from musictx.io.midi_io import Notes
from musictx.safe_output import atomic_path

EARLIER_MODEL_SHADE = "#fbe3c0"  # light orange: seed notes that a model made in an earlier take


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Write ``fig`` to ``path`` (format by its suffix) through the Agg canvas, atomically
    (`musictx.safe_output.atomic_path`)."""
    with atomic_path(path) as tmp:
        draw_figure(fig, tmp)
    return Path(path)


def draw_figure(fig: Figure, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` as it is (not atomically: `save_figure` is)."""
    FigureCanvasAgg(fig)  # attaches the Agg canvas to the figure
    fig.savefig(path, dpi=110)


def new_figure(end_seconds: float):
    """(figure, axes) for a piano roll of `end_seconds`: width grows with the music, up to 24 inches."""
    fig = Figure(figsize=(min(4 + end_seconds / 3, 24), 5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, end_seconds)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MIDI pitch")
    return fig, ax


def plot_piano_roll(notes: Notes, path: str | os.PathLike, takeover: float | None = None,
                    title: str | None = None, earlier_from: float | None = None) -> Path:
    """Write a piano roll of ``notes`` to ``path`` (PNG by its suffix): `piano_roll_figure`."""
    return save_figure(piano_roll_figure(notes, takeover, title, earlier_from), path)


def piano_roll_figure(notes: Notes, takeover: float | None = None, title: str | None = None,
                      earlier_from: float | None = None) -> Figure:
    """A piano roll of ``notes``.

    ``takeover``: seconds where the seed ends and the model's notes begin; the span before it is shaded
    and a vertical line marks it. None (or 0) draws neither. ``earlier_from``: where, inside the seed, an
    earlier model's output begins (a result continued further): from there to ``takeover`` it is shaded in
    another colour, so that the user's own notes before it stay apart from what a model made.
    """
    end = max(notes.duration(), takeover or 0.0, 1.0)
    fig, ax = new_figure(end)
    if len(notes):
        ax.add_collection(note_bars(notes), autolim=False)  # the limits are set below
        lo, hi = int(notes.pitch.min()), int(notes.pitch.max())
        ax.set_ylim(lo - 2, hi + 2)
    if takeover:
        mine = takeover if earlier_from is None else min(max(earlier_from, 0.0), takeover)
        if mine > 0:
            ax.axvspan(0, mine, color="0.85", zorder=0, label="seed" if earlier_from is None else "your seed")
        if mine < takeover:
            ax.axvspan(mine, takeover, color=EARLIER_MODEL_SHADE, zorder=0, label="earlier model output")
        ax.axvline(takeover, color="tab:red", linewidth=1.5, label=f"model from {takeover:.2f} s")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_title(title or f"{len(notes)} notes, {notes.duration():.1f} s")
    return fig


def plot_roll_panels(panels: list[tuple[str, Notes]], path: str | os.PathLike, takeover: float | None = None,
                     title: str | None = None) -> Path:
    """Write ``panels`` ((label, notes) pairs) as piano rolls stacked on one time axis and one pitch range,
    so that the same seed continued by several models (or played on) compares at a glance."""
    if not panels:
        raise ValueError("plot_roll_panels needs at least one panel")
    end = max(max(notes.duration() for _, notes in panels), takeover or 0.0, 1.0)
    pitches = np.concatenate([notes.pitch for _, notes in panels])
    lo, hi = (int(pitches.min()), int(pitches.max())) if len(pitches) else (48, 84)
    fig = Figure(figsize=(min(4 + end / 3, 24), 1.2 + 2.2 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, notes) in zip(axes, panels, strict=True):
        if len(notes):
            ax.add_collection(note_bars(notes), autolim=False)
        if takeover:
            ax.axvspan(0, takeover, color="0.85", zorder=0)
            ax.axvline(takeover, color="tab:red", linewidth=1.2)
        ax.set_xlim(0, end)
        ax.set_ylim(lo - 2, hi + 2)
        ax.set_ylabel("pitch")
        ax.set_title(f"{label}: {len(notes)} notes", loc="left", fontsize="medium")
    axes[-1].set_xlabel("time (s)" + (f"; grey: the seed, red line: continuation from {takeover:.2f} s"
                                      if takeover else ""))
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def note_bars(notes: Notes, height: float = 0.8) -> PathCollection:
    """The notes as rectangles (pitch +- height / 2, start..end), one compound path per velocity: a few
    dozen paths built with numpy and drawn in C++, where a patch per note (``barh``) costs a Python object
    per note and takes minutes for a long piece."""
    unit = np.array([MPath.MOVETO, MPath.LINETO, MPath.LINETO, MPath.LINETO, MPath.CLOSEPOLY], dtype=MPath.code_type)
    paths, velocities = [], np.unique(notes.velocity)
    for v in velocities:
        k = notes.velocity == v
        s, e, y0 = notes.start[k], notes.end[k], notes.pitch[k] - height / 2
        y1 = y0 + height
        corners = [(s, y0), (s, y1), (e, y1), (e, y0), (s, y0)]  # the last closes the rectangle
        verts = np.stack([np.stack(c, axis=-1) for c in corners], axis=1).reshape(-1, 2)  # (5 n, 2)
        paths.append(MPath(verts, np.tile(unit, int(k.sum()))))
    return PathCollection(paths, facecolors=_velocity_colours(velocities), edgecolors="none", linewidths=0)


def _velocity_colours(velocity: np.ndarray) -> np.ndarray:
    """RGBA per note: darker blue for louder."""
    from matplotlib import colormaps

    return colormaps["Blues"](0.35 + 0.65 * np.clip(velocity, 1, 127) / 127)
