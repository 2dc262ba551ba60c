"""A seed's drums played on under a continuation whose model learnt no drums (``drums=loop``, the default).

`pop` learnt POP909's three pitched parts and no drums, so a band's kit stopped dead at the seed's end. A drummer
asked to keep going would keep the groove: here the seed's last bars of drums are played again under the new bars,
a pattern the seed itself states, not the model's music, and the run's line says so. The loop is the seed's last
P bars, P the shortest of `PERIODS` for which the seed's last 2P bars repeat on the token grid (a one-bar beat, a
two-bar beat with its variation); where none repeats, the last `FALLBACK` bars (or all the seed has). A model whose
continuation plays drums itself is left alone; ``drums=seed`` keeps the seed's drum notes only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from symusic import Note, Score, Track

from musictx.tasks.metrical_seeds import MetricalSeed

PERIODS = (1, 2, 4)  # the loop lengths tried, in bars
FALLBACK = 2  # bars looped where the seed's drums repeat at none of them
DRUM_CHOICES = ("loop", "seed")  # the run's option: the seed's drums looped under the new bars, or its notes only


@dataclass
class DrumLoop:
    """The seed's last ``period`` bars of drums: per drum track (by its place among the seed's tracks), its notes as
    (bar in the loop, onset from that bar's line, duration, pitch, velocity), in the seed file's ticks."""

    period: int
    notes: dict[int, list[tuple[int, int, int, int, int]]]


def _bar_keys(a: dict[str, np.ndarray], lines: np.ndarray, bar: int, grid: float) -> frozenset:
    """(grid position, pitch) of each note of a track's numpy columns ``a`` struck in ``bar``."""
    inside = (a["time"] >= lines[bar]) & (a["time"] < lines[bar + 1])
    return frozenset(zip(np.rint((a["time"][inside] - lines[bar]) / grid).astype(int).tolist(),
                         a["pitch"][inside].tolist(), strict=True))


def drum_loop(seed: MetricalSeed, grid: float) -> DrumLoop | None:
    """The loop of ``seed``'s drums (module docstring; ``grid``: ticks a token position), None without drums."""
    drums = [k for k, t in enumerate(seed.score.tracks) if t.is_drum and len(t.notes)]
    if not drums:
        return None
    first, end = seed.first_bar, seed.first_bar + seed.bars
    columns = {k: seed.score.tracks[k].notes.numpy() for k in drums}
    keys = {k: [_bar_keys(columns[k], seed.lines, b, grid) for b in range(first, end)] for k in drums}
    if not any(any(bars) for bars in keys.values()):
        return None  # the drums play before the seed's bars only
    period = next((p for p in PERIODS if 2 * p <= seed.bars and all(
        bars[-p - j - 1] == bars[-j - 1] for bars in keys.values() for j in range(p))), min(FALLBACK, seed.bars))
    notes = {}
    for k, a in columns.items():
        rows = []
        for j, b in enumerate(range(end - period, end)):
            inside = (a["time"] >= seed.lines[b]) & (a["time"] < seed.lines[b + 1])
            rows += [(j, int(t - seed.lines[b]), int(d), int(p), int(v)) for t, d, p, v in
                     zip(a["time"][inside], a["duration"][inside], a["pitch"][inside], a["velocity"][inside],
                         strict=True)]
        notes[k] = rows
    return DrumLoop(period, notes)


def loop_drums(score: Score, seed: MetricalSeed, loop: DrumLoop, bars: int, include_seed: bool) -> Score:
    """``score`` (a continuation written by `musictx.tasks.metrical_score.continuation_score`) with ``loop`` played
    under its ``bars`` new bars, in place: each drum track's notes go on its own track (made where the
    continuation has none)."""
    factor = score.ticks_per_quarter / seed.score.ticks_per_quarter
    origin = seed.start_tick if include_seed else seed.lines[seed.first_bar + seed.bars]
    lines = seed.new_bar_lines_ticks(bars)
    for k, rows in loop.notes.items():
        info = seed.tracks.tracks[k]
        track = next((t for t in score.tracks if t.is_drum and t.name == info.name), None)
        if track is None:
            track = Track(info.name, info.real_program, True)
            score.tracks.append(track)
        for bar in range(bars):
            start, stop = lines[bar], lines[bar + 1]
            for j, onset, duration, pitch, velocity in rows:
                if j == bar % loop.period and start + onset < stop:
                    track.notes.append(Note(round((start + onset - origin) * factor),
                                            max(round(min(duration, stop - start - onset) * factor), 1), pitch,
                                            velocity))
        track.notes.sort()
    return score


def loop_words(loop: DrumLoop | None) -> str:
    """How the run's line says the loop: "play their seed's last 2 bars again under the new ones"."""
    if loop is None:
        return ""
    bars = "bar" if loop.period == 1 else f"{loop.period} bars"
    return f"play{{s}} the seed's last {bars} again under the new ones (drums=seed: its notes only)"
