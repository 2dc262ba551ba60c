"""Piano rolls as a musician reads them: every note of a 20-minute piece is on the picture (a 0.1 s note was
narrower than a pixel and Agg snapped it to nothing: 95 of 120 such notes were missing), the legends stand
beside the notes instead of over them (inside the plot they hid the top corners, where a long seed's new
music is), and a one-note roll reads whole pitches and "1 note"."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from musictx.io.midi_io import Notes
from musictx.io.piano_roll import TRACK_COLOURS, piano_roll_figure, plot_roll_panels, save_figure


def _notes(start, end, pitch, velocity=100) -> Notes:
    start = np.asarray(start, dtype=float)
    return Notes(start=start, end=np.asarray(end, dtype=float), pitch=np.broadcast_to(pitch, start.shape).copy(),
                 velocity=np.broadcast_to(velocity, start.shape).copy())


def _pixel(fig, ax, t: float, pitch: float, shape) -> tuple[int, int]:
    """(row, column) of the saved picture (``shape``) where time ``t`` and ``pitch`` fall on ``ax``."""
    box, (x0, x1), (y0, y1) = ax.get_position(), ax.get_xlim(), ax.get_ylim()
    fx = box.x0 + (t - x0) / (x1 - x0) * box.width
    fy = box.y0 + (pitch - y0) / (y1 - y0) * box.height
    return int(round((1 - fy) * shape[0])), int(round(fx * shape[1]))


def test_every_short_note_of_a_20_minute_roll_is_drawn(tmp_path):
    """A 0.1 s note every 10 s over 20 minutes (about a pixel a second): each one shows as a dark mark."""
    starts = np.arange(120) * 10.0 + 5.0
    notes = _notes(np.r_[starts, 0.0, 0.0], np.r_[starts + 0.1, 1200.0, 1200.0], np.r_[np.full(120, 60), 40, 80])
    fig = piano_roll_figure(notes, takeover=600.0)
    grey = imread(save_figure(fig, tmp_path / "long.png"))[..., :3].mean(axis=2)  # 1 white .. 0 black
    ax = fig.axes[0]
    darkest = []
    for t in starts + 0.05:
        r, c = _pixel(fig, ax, t, 60, grey.shape)
        darkest.append(grey[r - 2:r + 3, c - 2:c + 3].min())
    darkest = np.array(darkest)
    # the seed's shade is 0.85 grey and white after it: a drawn note is a blue far darker than either
    assert (darkest < 0.6).all(), f"{int((darkest >= 0.6).sum())} of 120 notes missing from the roll"


def test_legends_stand_beside_the_notes_not_on_them(tmp_path):
    """Twelve tracks, a seed partly made by an earlier model and the takeover line: the legends lie outside the
    plot and apart from each other, so no note is hidden under one."""
    parts = []
    for k in range(12):  # each track's notes run up to the top corners of the plot
        start = np.arange(0.0, 30.0, 0.5)
        parts.append((f"track {k}", _notes(start, start + 0.4, 40 + (k * 7 + np.arange(len(start))) % 48)))
    notes = Notes.concat([n for _, n in parts])
    fig = piano_roll_figure(notes, takeover=20.0, earlier_from=10.0, parts=parts)
    save_figure(fig, tmp_path / "tracks.png")
    fig.canvas.draw()  # laid out again at the figure's own dpi, the one its window extents are in
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    plot = ax.get_window_extent(renderer)
    legends = ax.findobj(lambda a: hasattr(a, "get_texts") and hasattr(a, "legend_handles"))
    assert len(legends) == 2
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    for box in boxes:
        assert box.x0 >= plot.x1, "a legend covers the notes"
        assert box.x1 <= fig.bbox.x1 + 1, "a legend is cut off at the picture's edge"
    assert not boxes[0].overlaps(boxes[1]), "the tracks' legend runs into the shading's"
    said = [t.get_text() for legend in legends for t in legend.get_texts()]
    assert {"track 0 (60)", "track 11 (60)", "your seed", "earlier model output", "model from 20.00 s"} <= set(said)


def test_a_one_note_roll_reads_whole_pitches_and_one_note(tmp_path):
    fig = piano_roll_figure(_notes([0.0], [0.5], [60]), takeover=0.5)
    ax = fig.axes[0]
    save_figure(fig, tmp_path / "one.png")
    assert ax.get_title() == "1 note, 0.5 s"
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_stacked_panels_name_their_tracks_beside_the_plot(tmp_path):
    """plot_roll_panels (one seed continued by several models) keeps each band panel's tracks legend: its
    patches are the tracks' pure colours, which the notes (paled by velocity) never are."""
    start = np.arange(0.0, 5.0, 0.5)
    parts = [("melody", _notes(start, start + 0.4, 72)), ("bass", _notes(start, start + 0.4, 40))]
    png = imread(plot_roll_panels([("band", parts)], tmp_path / "panels.png"))[..., :3]
    for colour in TRACK_COLOURS[:2]:
        pure = np.abs(png - np.array(to_rgb(colour))).max(axis=-1) < 0.02
        assert pure.sum() > 20, f"no legend patch of {colour} beside the panel"
