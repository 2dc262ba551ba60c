"""Failures a listener hears in a continuation, measured on its notes (numpy).

The distribution distances of `musictx.evaluation.metrics` can look fine on output that sounds broken: a histogram of
pitch classes or onset gaps does not see that 25 keys are held down at once, that the notes stopped
falling on the seed's beat, or that the model has played the same bar for twenty seconds. These do:

- `max_polyphony`: the most notes sounding at once. Read it against the real continuation's: the reader
  lengthens pedalled notes, so real pedalled piano of ../shared reaches 5-24 (30 s after a 20 s seed);
  broken output holds walls of 20-30 notes.
- `beat_grid` / `onsets_on_grid` / `grid_chance`: the seed's beat grid (one fixed period and phase) and
  the share of a continuation's onsets that fall on it, next to the share that onsets at random times
  would reach. Performed music speeds up and slows down: on ../shared's piano the *real* continuations
  sit at chance too, so there this column cannot tell good from broken; it is meant for music played
  to a click (sequenced MIDI, the bundled motif) and would need a tempo-following beat tracker otherwise.
- `longest_self_repeat_seconds`: the longest verbatim loop inside one note sequence, in seconds.

All take `Notes` (seconds).
"""

from __future__ import annotations

import numpy as np

from musictx.io.midi_io import Notes

GRID_TOLERANCE = 0.04  # s either side of a grid line: about the spread of onsets played "on the beat"
MIN_PERIOD, MAX_PERIOD = 0.2, 1.2  # s per beat: 300 down to 50 bpm
DEFAULT_PERIOD = 0.5  # 120 bpm, MIDI's default tempo, when the seed has too few onsets to say
REPEAT_IOI_STEP = 0.01  # s: gaps between onsets are compared at this resolution
MIN_REPEAT_NOTES = 4  # a repeat must match at least this many notes in a row; shorter matches are coincidence


def max_polyphony(notes: Notes) -> int:
    """The most notes sounding at once. A note that ends exactly when another starts does not overlap it,
    and a note of no length sounds nothing."""
    keep = notes.end > notes.start
    times = np.concatenate([notes.start[keep], notes.end[keep]])
    steps = np.concatenate([np.ones(keep.sum(), np.int64), -np.ones(keep.sum(), np.int64)])
    if len(times) == 0:
        return 0
    # At equal times the ends (-1) sort before the starts (+1), so touching notes never count together.
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max())


def distinct_onsets(notes: Notes) -> np.ndarray:
    """Sorted onset times, a chord's notes (within 1 ms) counted once: the grid is about when, not how many."""
    return np.unique(np.round(notes.start, 3))


def grid_chance(period: float, tolerance: float = GRID_TOLERANCE) -> float:
    """The share of onsets at uniformly random times that land within ``tolerance`` of a grid line."""
    return float(min(1.0, 2 * tolerance / period))


def grid_offsets(onsets: np.ndarray, period: float, phase: float) -> np.ndarray:
    """Signed distance (s) from each onset to its nearest grid line ``phase + k * period``."""
    return ((onsets - phase) / period + 0.5) % 1.0 * period - 0.5 * period


def onsets_on_grid(notes: Notes, period: float, phase: float, tolerance: float = GRID_TOLERANCE) -> float:
    """The share of the notes' distinct onsets within ``tolerance`` of the grid ``phase + k * period``
    (0.0 without notes)."""
    onsets = distinct_onsets(notes)
    if len(onsets) == 0:
        return 0.0
    return float(np.mean(np.abs(grid_offsets(onsets, period, phase)) <= tolerance + 1e-9))


def _candidate_periods(span: float, tolerance: float) -> np.ndarray:
    """Periods from MIN_PERIOD to MAX_PERIOD in geometric steps fine enough that the nearest one drifts by
    at most a quarter of the tolerance over the onsets' span (longer seeds need finer steps); the step is
    kept between 0.01% and 0.5%."""
    ratio = float(np.clip(tolerance / (4 * max(span, 1e-9)), 1e-4, 5e-3))
    count = int(np.ceil(np.log(MAX_PERIOD / MIN_PERIOD) / np.log1p(ratio))) + 1
    return np.geomspace(MIN_PERIOD, MAX_PERIOD, count)


def _phases_and_shares(onsets: np.ndarray, periods: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """For each period: the phase by circular mean of the onsets, and the share of onsets on that grid.
    Periods go in blocks so the (periods x onsets) matrices stay ~ 1e6 entries."""
    phases, shares = np.empty(len(periods)), np.empty(len(periods))
    block = max(1, 1_000_000 // len(onsets))
    for lo in range(0, len(periods), block):
        p = periods[lo : lo + block, None]
        angle = 2 * np.pi * onsets[None, :] / p
        mean_angle = np.angle(np.exp(1j * angle).mean(axis=1, keepdims=True))
        phase = (mean_angle / (2 * np.pi) * p) % p
        off = ((onsets[None, :] - phase) / p + 0.5) % 1.0 * p - 0.5 * p
        phases[lo : lo + block] = phase[:, 0]
        shares[lo : lo + block] = (np.abs(off) <= tolerance + 1e-9).mean(axis=1)
    return phases, shares


def _refine(onsets: np.ndarray, period: float, phase: float, tolerance: float) -> tuple[float, float]:
    """Least-squares line ``onset = phase + k * period`` through the onsets on the grid: centres the period
    inside its peak (the search alone prefers the peak's long edge, whose chance is lowest)."""
    on = np.abs(grid_offsets(onsets, period, phase)) <= tolerance + 1e-9
    k = np.round((onsets[on] - phase) / period)
    if len(np.unique(k)) < 2:
        return period, phase
    slope, intercept = np.polyfit(k, onsets[on], 1)
    if not MIN_PERIOD * 0.9 <= slope <= MAX_PERIOD * 1.1:
        return period, phase
    return float(slope), float(intercept % slope)


def beat_grid(seed_notes: Notes, tolerance: float = GRID_TOLERANCE) -> tuple[float, float]:
    """The seed's beat grid ``(period_s, phase_s)``: grid lines at ``phase_s + k * period_s``, 0 <= phase < period.

    Method: for each candidate period (0.2-1.2 s, `_candidate_periods`) the phase is the circular mean of
    the distinct onsets taken modulo the period (a beat's onsets pull it to the beat; off-beats half-way
    between mostly cancel), and the score is the share of onsets within ``tolerance`` of that grid minus
    `grid_chance`, the share random onsets would reach. The chance term is what stops the search from
    choosing the finest grid (which holds every onset but also most random times): of a grid and its
    subdivisions that hold the same onsets, the coarsest wins, so a seed with onsets on every 0.5 s reads
    0.5 s, not 0.25 s; one with onsets only on every other half second reads 1.0 s. The best period and its
    phase are then refined by a least-squares fit through the onsets on the grid (`_refine`).

    Fewer than two distinct onsets give no tempo: 0.5 s through the one onset (or 0).
    """
    onsets = distinct_onsets(seed_notes)
    if len(onsets) < 2:
        return DEFAULT_PERIOD, float(onsets[0] % DEFAULT_PERIOD) if len(onsets) else 0.0
    periods = _candidate_periods(float(onsets[-1] - onsets[0]), tolerance)
    phases, shares = _phases_and_shares(onsets, periods, tolerance)
    best = int(np.argmax(shares - np.minimum(1.0, 2 * tolerance / periods)))
    return _refine(onsets, float(periods[best]), float(phases[best]), tolerance)


def _note_codes(notes: Notes) -> tuple[np.ndarray, np.ndarray]:
    """Onsets ordered by (onset, pitch), and one integer per note for (pitch, gap to the previous onset in
    10 ms steps). The first note has no gap: its code (-1) matches nothing."""
    order = np.lexsort((notes.pitch, notes.start))
    start, pitch = notes.start[order], notes.pitch[order].astype(np.int64)
    steps = np.round(np.diff(start) / REPEAT_IOI_STEP).astype(np.int64)
    codes = np.concatenate([[-1], steps * 128 + pitch[1:]])  # pitch < 128, so the pair is recoverable
    return start, codes


def _longest_at_lag(start: np.ndarray, codes: np.ndarray, lag: int) -> float:
    """Seconds covered by the longest stretch that equals itself ``lag`` notes later (0.0 if none)."""
    same = codes[lag:] == codes[:-lag]
    if not same.any():
        return 0.0
    edges = np.diff(np.concatenate([[0], same.view(np.int8), [0]]))
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    long_enough = last - first + 1 >= MIN_REPEAT_NOTES
    if not long_enough.any():
        return 0.0
    first, last = first[long_enough], last[long_enough]
    # Codes first..last carry the gaps from note first-1 on, so the copy spans onsets first-1 .. last.
    copy = start[last] - start[first - 1]
    # Both copies together; where the second starts before the first ends (a loop) they overlap.
    overlap = np.maximum(0.0, start[last] - start[first - 1 + lag])
    return float((2 * copy - overlap).max())


def longest_self_repeat_seconds(notes: Notes) -> float:
    """The longest verbatim self-repeat inside one note sequence, in seconds.

    Notes are ordered by (onset, pitch) and each described by (pitch, gap to the previous onset rounded to
    10 ms). For every lag >= 1 the runs where the sequence equals itself shifted by the lag are found (one
    vectorised comparison per lag, so a few thousand notes take well under a second); a run is a stretch
    of music played twice in a row, note for note and in time, counted when it matches at least
    MIN_REPEAT_NOTES notes (random notes match one or two by coincidence, which across a long gap would
    read as seconds). Its length in seconds is the span of onsets covered by the two copies together: for
    a loop, where the copies overlap, that is the time from the first note of the loop to its last, so one
    2 s bar played 10 times reads ~20 s. Ordinary performed music repeats only short figures verbatim at
    10 ms (well under 2 s); transposed or re-timed repeats do not count. 0.0 with fewer than three notes.
    """
    if len(notes) < 3:
        return 0.0
    start, codes = _note_codes(notes)
    return max(_longest_at_lag(start, codes, lag) for lag in range(1, len(codes) - 1))
