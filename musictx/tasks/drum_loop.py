"""A seed's drums played on under a continuation whose model learnt no drums (``drums=loop``, the default).

`pop` learnt POP909's three pitched parts and no drums, so a band's kit stopped dead at the seed's end. A drummer
asked to keep going would keep the groove: here the seed's last bars of drums are played again under the new bars,
a pattern the seed itself states, not the model's music, and the run's line says so. The loop is the seed's last
P bars, P the shortest of `PERIODS` for which the seed's last 2P bars repeat on the token grid (a one-bar beat, a
two-bar beat with its variation). A seed that ends on a fill (its last bar breaks a groove the bars before it
repeat) would have looped that fill every bar or two: its groove plays on instead, in its phase, and the fill comes
back only where the seed shows a phrase it closes (every 4, 8, 12 or 16 bars). Where nothing repeats, the last
`FALLBACK` bars (or all the seed has). A model whose continuation plays drums itself is left alone; ``drums=seed``
keeps the seed's drum notes only. A continuation asked to end (``ending=true``) closes with them: its last bar's
drums are the loop's downbeat with a crash cymbal, held, under the final chord.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from symusic import Note, Score, Track

from musictx.tasks.metrical_seeds import MetricalSeed

PERIODS = (1, 2, 4)  # the loop lengths tried, in bars
FALLBACK = 2  # bars looped where the seed's drums repeat at none of them
PHRASES = (4, 8, 12, 16)  # phrase lengths (bars) a fill at the seed's end may close, the shortest that fits first
CRASH = 49  # General MIDI's crash cymbal 1: the last bar's downbeat of a continuation that ends
CYMBALS = (49, 52, 55, 57)  # crashes, china, splash: a downbeat that has one needs no other
DRUM_CHOICES = ("loop", "seed")  # the run's option: the seed's drums looped under the new bars, or its notes only


@dataclass
class DrumLoop:
    """The seed's drums as the new bars play them: new bar k plays the seed's bar ``order[k % len(order)]``
    (counted from the seed's first bar); per drum track (by its place among the seed's tracks), the notes of those
    bars as (seed bar, onset from that bar's line, duration, pitch, velocity), in the seed file's ticks.
    ``groove``: bars of the beat that repeats before a fill that ends the seed (0: no such fill, the last ``order``
    bars are looped); ``phrase``: every how many bars that fill comes back (0: it is left out). ``ends``: the
    continuation ends (``ending=true``), so its last bar is the loop's downbeat and a crash."""

    order: tuple[int, ...]
    notes: dict[int, list[tuple[int, int, int, int, int]]]
    groove: int = 0
    phrase: int = 0
    ends: bool = False

    @property
    def period(self) -> int:
        """Bars before the new bars' drums start over."""
        return len(self.order)


def _bar_keys(a: dict[str, np.ndarray], lines: np.ndarray, bar: int, grid: float) -> frozenset:
    """(grid position, pitch) of each note of a track's numpy columns ``a`` struck in ``bar``."""
    inside = (a["time"] >= lines[bar]) & (a["time"] < lines[bar + 1])
    return frozenset(zip(np.rint((a["time"][inside] - lines[bar]) / grid).astype(int).tolist(),
                         a["pitch"][inside].tolist(), strict=True))


def _repeats(keys: list[list[frozenset]], p: int, end: int) -> bool:
    """Whether every drum track's bars ``end - 2p`` to ``end - 1`` are one ``p``-bar pattern played twice."""
    return 2 * p <= end and all(bars[end - p - j - 1] == bars[end - j - 1] for bars in keys for j in range(p))


def _order(keys: list[list[frozenset]]) -> tuple[tuple[int, ...], int, int]:
    """(order, groove, phrase) of `DrumLoop` for the seed's drum bars ``keys`` (per track, per bar).

    The seed's last ``p`` bars where its last ``2p`` repeat (a beat, a beat with its variation). Else, where the
    bars before the last repeat, the last is a fill: the new bars play that groove on in its phase, and the fill
    every ``L`` bars where the seed holds a whole phrase of ``L`` that it closes (earlier fills ``L``, ``2L`` bars
    before it, never a groove bar there), else not at all. Else the last `FALLBACK` bars."""
    n = len(keys[0])
    last = next((p for p in PERIODS if _repeats(keys, p, n)), None)
    if last is not None:
        return tuple(range(n - last, n)), 0, 0
    p = next((p for p in PERIODS if _repeats(keys, p, n - 1)), None)
    if p is None:
        return tuple(range(n - min(FALLBACK, n), n)), 0, 0
    start = n - 1 - p  # the groove's last whole cycle: bars start .. n - 2

    def groove_bar(bar: int) -> int:  # the groove's bar at ``bar``, had it gone on
        return start + (bar - start) % p

    def fill_at(bar: int) -> bool:
        return any(bars[bar] != bars[groove_bar(bar)] for bars in keys)

    phrase = next((size for size in PHRASES if size <= n and all(fill_at(b) for b in range(n - 1 - size, -1, -size))),
                  0)
    span = phrase or p  # the new bars start over after a phrase (the fill closes it), or after the groove
    order = tuple(n - 1 if phrase and (k + 1) % phrase == 0 else groove_bar(n + k) for k in range(span))
    return order, p, phrase


def drum_loop(seed: MetricalSeed, grid: float, ends: bool = False) -> DrumLoop | None:
    """The loop of ``seed``'s drums (module docstring; ``grid``: ticks a token position; ``ends``: the continuation
    ends, and the loop with it), None without drums."""
    drums = [k for k, t in enumerate(seed.score.tracks) if t.is_drum and len(t.notes)]
    if not drums:
        return None
    first, end = seed.first_bar, seed.first_bar + seed.bars
    columns = {k: seed.score.tracks[k].notes.numpy() for k in drums}
    keys = [[_bar_keys(columns[k], seed.lines, b, grid) for b in range(first, end)] for k in drums]
    if not any(any(bars) for bars in keys):
        return None  # the drums play before the seed's bars only
    order, groove, phrase = _order(keys)
    notes = {}
    for k, a in columns.items():
        rows = []
        for j in sorted(set(order)):
            b = first + j
            inside = (a["time"] >= seed.lines[b]) & (a["time"] < seed.lines[b + 1])
            rows += [(j, int(t - seed.lines[b]), int(d), int(p), int(v)) for t, d, p, v in
                     zip(a["time"][inside], a["duration"][inside], a["pitch"][inside], a["velocity"][inside],
                         strict=True)]
        notes[k] = rows
    return DrumLoop(order, notes, groove, phrase, ends)


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
            played = [row for row in rows if row[0] == loop.order[bar % loop.period] and start + row[1] < stop]
            if loop.ends and bar == bars - 1:
                played = _final_downbeat(played, stop - start)
            for _, onset, duration, pitch, velocity in played:
                track.notes.append(Note(round((start + onset - origin) * factor),
                                        max(round(min(duration, stop - start - onset) * factor), 1), pitch, velocity))
        track.notes.sort()
    return score


def _final_downbeat(rows: list[tuple], bar_ticks: int) -> list[tuple]:
    """The rows of a loop bar struck on its downbeat (within a 32nd of it), with a crash where none is among them,
    held for the bar: the drums' last bar under a final chord."""
    near = max(bar_ticks // 32, 1)
    down = [(j, 0, bar_ticks, pitch, velocity) for j, onset, _, pitch, velocity in rows if onset < near]
    if not any(pitch in CYMBALS for _, _, _, pitch, _ in down):
        down.append((0, 0, bar_ticks, CRASH, max((v for *_, v in down), default=100)))
    return down


def no_loop_said(seed: MetricalSeed) -> str | None:
    """Where ``drums=loop`` finds nothing to loop although the seed's file has drums: they play no note in the seed's
    bars (they come in later, or stopped before), said in one line; None where the file has no drums."""
    if not any(t.is_drum and len(t.notes) for t in seed.score.tracks):
        return None
    first, last = seed.first_bar + 1, seed.first_bar + seed.bars
    return f"drums=loop: the file's drums play no note in the seed's bars {first}-{last}, so none play under the new " \
           "bars"


def loop_words(loop: DrumLoop | None, off: str | None = None) -> str:
    """How the run's line says the loop: "play their seed's last 2 bars again under the new ones", with how to turn
    it ``off`` (None: the command's option; the app names its box)."""
    if loop is None:
        return ""
    off = off or "drums=seed: its notes only"
    if loop.groove:
        fill = (f"with its last bar's fill every {loop.phrase} bars as in the seed" if loop.phrase else
                "without its last bar's fill (it closes no 4-, 8-, 12- or 16-bar phrase of the seed)")
        return f"play{{s}} the seed's groove on under the new bars, {fill}{_close(loop)} ({off})"
    bars = "bar" if loop.period == 1 else f"{loop.period} bars"
    return f"play{{s}} the seed's last {bars} again under the new ones{_close(loop)} ({off})"


def _close(loop: DrumLoop) -> str:
    return ", and a crash on the last bar's downbeat" if loop.ends else ""
