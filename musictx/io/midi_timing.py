"""The bar grid of a MIDI file: its tempo map and time signatures, read from a seed and written into what is
generated from it, so that in a DAW the continuation's bars line up with the seed's.

The tokenizer works in seconds and forgets tempo; the notes it gives back are placed on the seed's grid by
converting their seconds to ticks through the seed's own tempo map (`MidiTiming.ticks`), which leaves their
times in seconds as they were to half a tick: written files have at least `MIN_TPQ` (960, a common DAW
resolution) ticks per quarter note, so that is under 0.35 ms at 90 bpm, and far under the tokenizer's 10 ms
grid, which reads them back to the same events.

The tempo map is read as `musictx.io.midi_io` reads it for the notes: the set_tempo events of all tracks
(MIDI's 120 bpm until the first; of several on one tick the last wins). Time signatures likewise, 4/4 until
the first. A seed counted from its first note and cut after some seconds keeps the part of the map between
those two times (`MidiTiming.window`).

A seed's leading silence is dropped (its first note is written at time 0, as before), and the same span of
its tempo map with it: the tempo and time signature in force at the first note start the output. So when
that silence is whole bars (a DAW clip whose first note is on a bar line), the output's bars are the seed's
bars; when the seed opens with a pickup, the output's bar 1 starts at the pickup's first note instead, since
keeping the seed's bar lines would move every note.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from musictx.io.zero_tempos import tell_zero_tempos

DEFAULT_MSPQ = 500_000  # microseconds per quarter note: MIDI's default 120 bpm
MIN_TPQ = 960  # written files get at least this many ticks per quarter note
MAX_TPQ = 32767  # a MIDI header holds ticks per quarter in 15 bits


class Tempo(NamedTuple):
    """A tempo change at ``tick``."""

    tick: int
    mspq: int  # microseconds per quarter note, as MIDI stores it

    @property
    def bpm(self) -> float:
        return 60e6 / self.mspq


class Meter(NamedTuple):
    """A time signature from ``tick`` on (``numerator``/``denominator``, e.g. 3/4)."""

    tick: int
    numerator: int
    denominator: int


@dataclass(frozen=True)
class MidiTiming:
    """A tempo map and time signatures in ticks of ``tpq`` per quarter note. Each starts at tick 0 and
    ticks strictly increase (`from_events` makes sure). The default is what unconditional generation
    writes: 120 bpm and 4/4, 1000 ticks per quarter (2000 a second, so the tokenizer's 10 ms grid is exact)."""

    tpq: int = 1000
    tempos: tuple[Tempo, ...] = (Tempo(0, DEFAULT_MSPQ),)
    meters: tuple[Meter, ...] = (Meter(0, 4, 4),)

    @classmethod
    def from_events(cls, tpq: int, tempos, meters=()) -> MidiTiming:
        """From a file's events in file order (``(tick, mspq)`` and ``(tick, numerator, denominator)``):
        sorted by tick, the last of one tick kept, MIDI's defaults at tick 0 where the file sets nothing.
        Unusable events (a zero tempo, a denominator that is not a power of two) are skipped."""
        tempos = [Tempo(int(t), int(m)) for t, m in tempos if m > 0]
        meters = [Meter(int(t), int(n), int(d)) for t, n, d in meters if n > 0 and d > 0 and d & (d - 1) == 0]
        return cls(int(tpq), _normalise(tempos, Tempo(0, DEFAULT_MSPQ)), _normalise(meters, Meter(0, 4, 4)))

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tick, seconds, seconds per tick) at each tempo change, (K,) each."""
        ticks = np.array([t.tick for t in self.tempos], dtype=np.int64)
        per_tick = np.array([t.mspq for t in self.tempos], dtype=np.float64) / 1e6 / self.tpq
        seconds = np.concatenate([[0.0], np.cumsum(np.diff(ticks) * per_tick[:-1])])
        return ticks, seconds, per_tick

    def seconds(self, ticks) -> np.ndarray:
        """Ticks -> seconds (float64)."""
        at, sec, per_tick = self._table()
        ticks = np.asarray(ticks, dtype=np.int64)
        seg = np.maximum(np.searchsorted(at, ticks, side="right") - 1, 0)
        return sec[seg] + (ticks - at[seg]) * per_tick[seg]

    def ticks(self, seconds) -> np.ndarray:
        """Seconds -> the nearest ticks (int64)."""
        at, sec, per_tick = self._table()
        seconds = np.asarray(seconds, dtype=np.float64)
        seg = np.maximum(np.searchsorted(sec, seconds, side="right") - 1, 0)
        return np.rint(at[seg] + (seconds - sec[seg]) / per_tick[seg]).astype(np.int64)

    def fine(self) -> MidiTiming:
        """The same timing with at least MIN_TPQ ticks per quarter (a whole multiple of ``tpq``, so every
        change stays on its tick)."""
        factor = -(-MIN_TPQ // self.tpq)
        if factor == 1:
            return self
        return MidiTiming(self.tpq * factor, tuple(t._replace(tick=t.tick * factor) for t in self.tempos),
                          tuple(m._replace(tick=m.tick * factor) for m in self.meters))

    def window(self, start: float, stop: float | None = None) -> MidiTiming:
        """The timing of the span from ``start`` seconds to ``stop`` (None: the end), moved to start at tick
        0: the tempo and time signature in force at ``start`` move to tick 0, the changes after it follow,
        the changes at or after ``stop`` are left out (what comes later continues in the last tempo)."""
        fine = self.fine()
        first = int(fine.ticks(start))
        end = None if stop is None else int(fine.ticks(stop))

        def kept(events):
            before = [e for e in events if e.tick <= first][-1]  # events[0] is at tick 0 <= first
            after = [e._replace(tick=e.tick - first) for e in events
                     if e.tick > first and (end is None or e.tick < end)]
            return (before._replace(tick=0), *after)

        return replace(fine, tempos=kept(fine.tempos), meters=kept(fine.meters))


def _normalise(events: list, default) -> tuple:
    """Sorted by tick (stable: file order within a tick), the last of each tick kept, ``default`` first
    unless an event is at tick 0."""
    events = sorted(events, key=lambda e: e.tick)
    last = [e for i, e in enumerate(events) if i + 1 == len(events) or events[i + 1].tick != e.tick]
    if not last or last[0].tick > 0:
        last.insert(0, default)
    return tuple(last)


def read_timing(path: str | os.PathLike) -> MidiTiming:
    """The tempo map and time signatures of a MIDI file, read with symusic (the reader that reads the
    seed's notes). A file symusic cannot read, or one timed in SMPTE frames rather than ticks per quarter,
    gets the default (120 bpm, 4/4): its notes' seconds are written as they are, without the grid."""
    import symusic

    try:
        score = symusic.Score(str(path))
    except Exception:  # symusic raises plain RuntimeError/ValueError for broken files
        return MidiTiming()
    if not 0 < score.ticks_per_quarter <= MAX_TPQ:
        return MidiTiming()
    tempos, meters = score.tempos.numpy(), score.time_signatures.numpy()
    tell_zero_tempos(path, int((tempos["mspq"] <= 0).sum()))  # from_events leaves them out
    return MidiTiming.from_events(
        score.ticks_per_quarter, zip(tempos["time"].tolist(), tempos["mspq"].tolist(), strict=True),
        zip(meters["time"].tolist(), meters["numerator"].tolist(), meters["denominator"].tolist(), strict=True))
