"""Piano rolls written to files with matplotlib's Agg canvas (no display, no pyplot global state): the
picture of a piece, as `musictx.io.audio` is its sound.

- `plot_piano_roll`: notes as bars, pitch against seconds, shade = velocity; the seed part shaded and a
  vertical line where the model takes over. A piece of several tracks draws each in its own colour with a
  legend (`parts`), and the bars a model wrote inside a song (infill, accompaniment) are shaded (`marked`).
  Drawn as one path per velocity, so a million notes take seconds, not the quarter of an hour of a patch per
  note. The legends stand beside the plot, not on it: inside, they hid the notes under them (the new music
  of a long seed's continuation, in the top right corner). Every note is drawn at least `MIN_NOTE_PIXELS`
  wide: Agg snaps a bar's edges to whole pixels, so a note narrower than a pixel (a 0.1 s note of a
  20-minute roll, about a pixel a second) came out with no width at all and was missing from the picture.
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
from matplotlib.ticker import MaxNLocator

from musictx.io.midi_io import Notes
from musictx.safe_output import atomic_path

EARLIER_MODEL_SHADE = "#fbe3c0"  # light orange: seed notes that a model made in an earlier take
MARKED_SHADE = "#fff2b3"  # light yellow (no track is yellow): the bars a model wrote inside a song
# one hue per track, in the order the tracks come (tab10 without its grey and the blue-like cyan, which read
# as "the seed" and "another blue" beside the shaded spans)
TRACK_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22")
Part = tuple[str, Notes]  # (track name, its notes)
DPI = 110  # every figure is saved at this resolution
MIN_NOTE_PIXELS = 1.5  # snapped to whole pixels, a bar this wide is one or two pixels, never none
# beside the plot's right edge: the tracks' legend at its top, the shading's at its bottom
BESIDE_TOP = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": "small"}
BESIDE_BOTTOM = {**BESIDE_TOP, "loc": "lower left", "bbox_to_anchor": (1.01, 0.0)}
TRACKS_A_COLUMN = 10
LEGEND_INCHES = 1.6  # about the width of "model from 1099.22 s": added to the figure for the legends


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Write ``fig`` to ``path`` (format by its suffix) through the Agg canvas, atomically
    (`musictx.safe_output.atomic_path`)."""
    with atomic_path(path) as tmp:
        draw_figure(fig, tmp)
    return Path(path)


def draw_figure(fig: Figure, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` as it is (not atomically: `save_figure` is)."""
    FigureCanvasAgg(fig)  # attaches the Agg canvas to the figure
    fig.savefig(path, dpi=DPI)


def new_figure(end_seconds: float):
    """(figure, axes) for a piano roll of `end_seconds`: width grows with the music, up to 24 inches."""
    fig = Figure(figsize=(min(4 + end_seconds / 3, 24), 5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, end_seconds)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MIDI pitch")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # pitches are whole numbers (a 1-note roll read 60.5)
    return fig, ax


def min_note_seconds(fig: Figure, ax, span: float) -> float:
    """How long a note must be drawn to be `MIN_NOTE_PIXELS` wide on ``ax`` once ``fig`` is saved, ``ax``
    showing ``span`` seconds. The layout (labels, title, legends) is placed first, so call it once they are
    on the figure; the notes themselves do not move it (clipped to the plot, the layout skips them)."""
    FigureCanvasAgg(fig)
    fig.get_layout_engine().execute(fig)
    pixels = ax.get_position().width * fig.get_figwidth() * DPI
    return MIN_NOTE_PIXELS * span / max(pixels, 1.0)


def plot_piano_roll(notes: Notes, path: str | os.PathLike, takeover: float | None = None,
                    title: str | None = None, earlier_from: float | None = None,
                    parts: list[Part] | None = None) -> Path:
    """Write a piano roll of ``notes`` to ``path`` (PNG by its suffix): `piano_roll_figure`."""
    return save_figure(piano_roll_figure(notes, takeover, title, earlier_from, parts), path)


def piano_roll_figure(notes: Notes, takeover: float | None = None, title: str | None = None,
                      earlier_from: float | None = None, parts: list[Part] | None = None,
                      marked: tuple[float, float] | None = None, marked_as: str = "written by the model") -> Figure:
    """A piano roll of ``notes``.

    ``takeover``: seconds where the seed ends and the model's notes begin; the span before it is shaded
    and a vertical line marks it. None (or 0) draws neither. ``earlier_from``: where, inside the seed, an
    earlier model's output begins (a result continued further): from there to ``takeover`` it is shaded in
    another colour, so that the user's own notes before it stay apart from what a model made.
    ``parts``: the same notes by track; two or more draw each track in its own colour, named in the legend.
    ``marked``: (start, end) seconds of the bars a model wrote, shaded and named in the legend as ``marked_as``
    (a preview's: the bars it will write); the roll then shows them with their context (`_view`), not the whole
    song.
    """
    end = max(notes.duration(), takeover or 0.0, marked[1] if marked else 0.0, 1.0)
    t0, t1 = _view(marked, end)
    fig, ax = new_figure(t1 - t0)
    ax.set_xlim(t0, t1)
    parts = [(name, p) for name, p in parts or [] if len(p)]  # an empty track gets no entry: a MIDI file keeps none
    if len(notes):
        seen = (notes.end > t0) & (notes.start < t1)
        pitch = notes.pitch[seen] if seen.any() else notes.pitch
        ax.set_ylim(int(pitch.min()) - 2, int(pitch.max()) + 2)
        if len(parts) >= 2:
            _track_legend(ax, parts)
    if takeover:
        mine = takeover if earlier_from is None else min(max(earlier_from, 0.0), takeover)
        if mine > 0:
            ax.axvspan(0, mine, color="0.85", zorder=0, label="seed" if earlier_from is None else "your seed")
        if mine < takeover:
            ax.axvspan(mine, takeover, color=EARLIER_MODEL_SHADE, zorder=0, label="earlier model output")
        ax.axvline(takeover, color="tab:red", linewidth=1.5, label=f"model from {takeover:.2f} s")
    if marked:
        ax.axvspan(*marked, color=MARKED_SHADE, zorder=0,
                   label=f"{marked_as}, {marked[0]:.1f}-{marked[1]:.1f} s")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**BESIDE_BOTTOM)
    if ax.get_legend() is not None:  # the legends' room is added, not taken from the plot
        fig.set_figwidth(fig.get_figwidth() + LEGEND_INCHES)
    ax.set_title(title or f"{len(notes)} note{'' if len(notes) == 1 else 's'}, {notes.duration():.1f} s")
    if len(notes):  # last: how wide a pixel is depends on the room the legends and labels leave
        _draw_notes(ax, notes, parts, min_note_seconds(fig, ax, t1 - t0))
    return fig


def _view(marked: tuple[float, float] | None, end: float) -> tuple[float, float]:
    """The seconds drawn: the whole piece, or around the bars a model wrote inside a song, with as much context
    on each side as they last (at least 8 s), so a 3-minute song's infill is not squashed into a sliver."""
    if not marked:
        return 0.0, end
    pad = max(8.0, marked[1] - marked[0])
    return max(0.0, marked[0] - pad), min(end, marked[1] + pad)


def _track_legend(ax, parts: list[Part]) -> None:
    """The legend naming each track's colour, beside the plot's top right corner."""
    from matplotlib.patches import Patch

    handles = [Patch(color=TRACK_COLOURS[k % len(TRACK_COLOURS)], label=f"{name} ({len(part)})")
               for k, (name, part) in enumerate(parts)]
    # columns of TRACKS_A_COLUMN: a band of many tracks does not run down into the shading's legend below it
    legend = ax.legend(handles=handles, title="tracks (notes)", ncols=-(-len(parts) // TRACKS_A_COLUMN), **BESIDE_TOP)
    ax.add_artist(legend)  # kept when the shading's legend becomes the axes' own
    # add_artist clips it to the plot, and the layout leaves out what is clipped to the plot: unclipped, the
    # figure makes room for it (a wide one ran off the picture's right edge)
    legend.set_clip_on(False)


def _draw_notes(ax, notes: Notes, parts: list[Part] | None, min_width: float = 0.0) -> None:
    """The notes in blue shades, or each part (track) in its own hue when there are two or more (non-empty)."""
    parts = [(name, p) for name, p in parts or [] if len(p)]
    if len(parts) < 2:
        ax.add_collection(note_bars(notes, min_width=min_width), autolim=False)  # the limits are set by the caller
        return
    for k, (_, part) in enumerate(parts):
        colour = TRACK_COLOURS[k % len(TRACK_COLOURS)]
        ax.add_collection(note_bars(part, colour=colour, min_width=min_width), autolim=False)


def plot_roll_panels(panels: list[tuple[str, Notes | list[Part]]], path: str | os.PathLike,
                     takeover: float | None = None, title: str | None = None) -> Path:
    """Write ``panels`` ((label, notes) pairs; notes by track, as (name, notes) parts, draw each track in its
    own colour) as piano rolls stacked on one time axis and one pitch range, so that the same seed continued
    by several models (or played on) compares at a glance."""
    if not panels:
        raise ValueError("plot_roll_panels needs at least one panel")
    panels = [(label, (Notes.concat([n for _, n in notes]), notes) if isinstance(notes, list) else (notes, None))
              for label, notes in panels]
    end = max(max(notes.duration() for _, (notes, _) in panels), takeover or 0.0, 1.0)
    pitches = np.concatenate([notes.pitch for _, (notes, _) in panels])
    lo, hi = (int(pitches.min()), int(pitches.max())) if len(pitches) else (48, 84)
    fig = Figure(figsize=(min(4 + end / 3, 24), 1.2 + 2.2 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, (notes, parts)) in zip(axes, panels, strict=True):
        if len(parts := [(name, p) for name, p in parts or [] if len(p)]) >= 2:
            _track_legend(ax, parts)
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
    min_width = min_note_seconds(fig, axes[0], end)  # once the labels are placed: the panels share one width
    for ax, (_, (notes, parts)) in zip(axes, panels, strict=True):
        if len(notes):
            _draw_notes(ax, notes, parts, min_width)
    return save_figure(fig, path)


def note_bars(notes: Notes, height: float = 0.8, colour: str | None = None, min_width: float = 0.0) -> PathCollection:
    """The notes as rectangles (pitch +- height / 2, start..end, at least ``min_width`` seconds wide: see
    `min_note_seconds`), shaded by velocity in blues or in ``colour`` (softer: paler), one compound path per
    velocity: a few
    dozen paths built with numpy and drawn in C++, where a patch per note (``barh``) costs a Python object
    per note and takes minutes for a long piece."""
    unit = np.array([MPath.MOVETO, MPath.LINETO, MPath.LINETO, MPath.LINETO, MPath.CLOSEPOLY], dtype=MPath.code_type)
    paths, velocities = [], np.unique(notes.velocity)
    for v in velocities:
        k = notes.velocity == v
        s, y0 = notes.start[k], notes.pitch[k] - height / 2
        e = np.maximum(notes.end[k], s + min_width)
        y1 = y0 + height
        corners = [(s, y0), (s, y1), (e, y1), (e, y0), (s, y0)]  # the last closes the rectangle
        verts = np.stack([np.stack(c, axis=-1) for c in corners], axis=1).reshape(-1, 2)  # (5 n, 2)
        paths.append(MPath(verts, np.tile(unit, int(k.sum()))))
    return PathCollection(paths, facecolors=_velocity_colours(velocities, colour), edgecolors="none", linewidths=0)


def _velocity_colours(velocity: np.ndarray, colour: str | None = None) -> np.ndarray:
    """RGBA per velocity: darker blue for louder, or ``colour`` mixed with white, the louder the less."""
    from matplotlib import colormaps
    from matplotlib.colors import to_rgba

    loud = 0.35 + 0.65 * np.clip(velocity, 1, 127) / 127  # (V,) in [0.35, 1]
    if colour is None:
        return colormaps["Blues"](loud)
    rgba = np.tile(np.array(to_rgba(colour)), (len(velocity), 1))  # (V, 4)
    rgba[:, :3] = 1 - loud[:, None] * (1 - rgba[:, :3])  # towards white for soft notes
    return rgba
