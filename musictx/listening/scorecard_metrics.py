"""The measures of the continuation scorecard: a model's continuation of a song beside the song's real one.

Each measure is computed the same way for the model's continuation and for the real continuation (and,
where it compares, against the same seed), so the scorecard reads every number against its real-music
counterpart instead of against an absolute threshold. The measures answer the questions a listener asks:

- Does it keep the pulse? `grid_share` of onsets on the eighth-note grid of the song's beats, read against
  `chance_grid_share` (a tight grid catches random onsets too).
- Does it develop the seed's melody, or copy it? `motif_reuse` (n-grams of the top line, and of the
  melody track's own line where the tracks are named: `lead_track`, transposed and exact) and
  `verbatim_copying` (long runs of the seed's notes played back note for note).
- Does it stay in the seed's harmony and texture? `pc_correlation`, `same_key`, `density`,
  `mean_duration`, `mean_polyphony`, `tracks_kept`.
- Does it keep the bottom? `downbeat_bass` (downbeats struck with a low note) and `low_register_share`
  (the time a low note sounds).
- Does it fail like a stuck model? `held_at_cap` (notes held to the decoder's maximum duration) and
  `longest_loop` (one short pattern repeated exactly, many times in a row).
- Does it recite its training data? `position_ngrams` + `build_index` + `share_in_index`.

Music comes as a span of notes (any object with the fields of `SpanLike`: parallel arrays, times in
seconds). Only numpy (and the track roles' names of `musictx.io.score_prep`) is used, so the scorecard runs
anywhere the MIDI files can be read.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from musictx.io.keys import NO_KEY, is_flat, key_of_histogram
from musictx.io.score_prep import BASS_CEILING, role_of


class SpanLike(Protocol):
    """The notes the measures read: parallel (N,) arrays and the names the track indices point into."""

    start: np.ndarray       # (N,) float onsets, seconds
    end: np.ndarray         # (N,) float offsets, seconds
    pitch: np.ndarray       # (N,) int MIDI pitch
    velocity: np.ndarray    # (N,) int
    track: np.ndarray       # (N,) int index into track_names
    track_names: list[str]

    def __len__(self) -> int: ...

    def select(self, mask: np.ndarray) -> SpanLike: ...


_EPS = 1e-9  # float slack for "exactly on" comparisons of times computed in seconds


# ---------------------------------------------------------------- rhythm: the eighth-note grid

def eighth_grid(beats: np.ndarray) -> np.ndarray:
    """Beats plus the midpoints between consecutive beats: eighth notes follow tempo changes, a fixed step
    in seconds would not. (B,) -> (2B - 1,) sorted."""
    beats = np.sort(np.asarray(beats, dtype=np.float64))
    mids = (beats[:-1] + beats[1:]) / 2  # (B - 1,)
    return np.sort(np.concatenate([beats, mids]))


def grid_share(onsets: np.ndarray, grid: np.ndarray, tol: float = 0.03) -> float:
    """Share of onsets within +-tol s of their nearest grid time: how much of the music sits on the pulse.
    nan for no onsets (nothing to judge), 0.0 for an empty grid."""
    onsets = np.asarray(onsets, dtype=np.float64)  # (N,)
    grid = np.sort(np.asarray(grid, dtype=np.float64))  # (G,)
    if len(onsets) == 0:
        return float("nan")
    if len(grid) == 0:
        return 0.0
    right = np.clip(np.searchsorted(grid, onsets), 0, len(grid) - 1)  # (N,) first grid time >= onset
    left = np.clip(right - 1, 0, len(grid) - 1)
    dist = np.minimum(np.abs(onsets - grid[left]), np.abs(onsets - grid[right]))  # (N,)
    return float(np.mean(dist <= tol + _EPS))


def chance_grid_share(grid: np.ndarray, t0: float, t1: float, tol: float = 0.03) -> float:
    """The grid_share of a uniformly random onset in [t0, t1): the measure of the union of the windows
    [g - tol, g + tol] inside [t0, t1), over t1 - t0. A dense grid or a wide tol catches much by chance, so
    grid_share only means something above this. nan for an empty interval."""
    if t1 <= t0:
        return float("nan")
    grid = np.sort(np.asarray(grid, dtype=np.float64))  # (G,)
    lo = np.clip(grid - tol, t0, t1)  # (G,) both non-decreasing: every window has the same width
    hi = np.clip(grid + tol, t0, t1)
    prev_hi = np.concatenate([[t0], hi[:-1]])  # (G,) how far the windows before already reach
    covered = np.clip(hi - np.maximum(lo, prev_hi), 0.0, None)  # (G,) new length each window adds
    return float(covered.sum() / (t1 - t0))


# ---------------------------------------------------------------- melody: top line, motifs, copying

def top_line(span: SpanLike, group_s: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """(onset times, pitches) of the highest note at each onset: the line a listener follows as the melody.
    Notes within group_s of a group's first onset are one onset (a hand's chord is never quite together).
    (K,) float, (K,) int, in time order; the time is the group's first onset."""
    order = np.lexsort((-np.asarray(span.pitch), np.asarray(span.start)))  # (N,) by onset, high first
    start = np.asarray(span.start, dtype=np.float64)[order]
    pitch = np.asarray(span.pitch, dtype=np.int64)[order]
    if len(start) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    first = np.zeros(len(start), dtype=bool)  # (N,) True where a new group starts
    group_t = -np.inf
    for i, t in enumerate(start.tolist()):  # sequential: each group is anchored at its own first onset
        if t - group_t > group_s + _EPS:
            first[i], group_t = True, t
    heads = np.flatnonzero(first)  # (K,)
    return start[heads], np.maximum.reduceat(pitch, heads)


def _windows(values: np.ndarray, n: int) -> set[tuple[int, ...]]:
    """The set of runs of n consecutive values, as tuples (exact matching, no hash collisions)."""
    if len(values) < n:
        return set()
    return set(map(tuple, np.lib.stride_tricks.sliding_window_view(values, n).tolist()))


def _share_found(values: np.ndarray, n: int, found: set[tuple[int, ...]]) -> float:
    """Share of the runs of n consecutive values that are in `found` (counted with repetition)."""
    runs = np.lib.stride_tricks.sliding_window_view(values, n).tolist()  # (len - n + 1, n)
    return float(np.mean([tuple(r) in found for r in runs]))


def motif_reuse(new_pitches: np.ndarray, seed_pitches: np.ndarray, n: int = 4) -> dict:
    """How much of the new top line is built from the seed's figures: "transposed" the share of its n-grams
    of intervals (n consecutive intervals, so shape at any pitch) found in the seed's top line, "exact" the
    share of its (n+1)-grams of pitches found there. Development shows as transposed > exact; nan when the
    new line has fewer than n + 1 notes."""
    new = np.asarray(new_pitches, dtype=np.int64)  # (K,)
    seed = np.asarray(seed_pitches, dtype=np.int64)  # (S,)
    if len(new) < n + 1:
        return {"transposed": float("nan"), "exact": float("nan")}
    return {"transposed": _share_found(np.diff(new), n, _windows(np.diff(seed), n)),
            "exact": _share_found(new, n + 1, _windows(seed, n + 1))}


def lead_track(span: SpanLike) -> str | None:
    """The name of the melody among the tracks of ``span``: the track named like one (MELODY, vocal, lead ...),
    else the one with the highest mean pitch; None without notes. Named tracks only: one stream has no lead."""
    names = _names_with_notes(span)
    if len(names) < 2:
        return None
    for name in sorted(names):
        if role_of(name) == "MELODY":
            return name
    track, pitch = np.asarray(span.track), np.asarray(span.pitch, dtype=np.float64)
    means = {span.track_names[t]: pitch[track == t].mean() for t in np.unique(track)}
    return max(means, key=means.get)


def track_named(span: SpanLike, name: str):
    """The notes of ``span``'s track ``name`` (none when it has no such track)."""
    index = [i for i, n in enumerate(span.track_names) if n == name]
    return span.select(np.isin(np.asarray(span.track), index))


def _note_symbols(span: SpanLike, ioi_step: float) -> tuple[np.ndarray, np.ndarray]:
    """(pitch, IOI step) of each note sorted by (onset, pitch); the IOI step is round(IOI to the note before
    / ioi_step), and -1 for the first note, which has no note before it. (N,), (N,)."""
    order = np.lexsort((np.asarray(span.pitch), np.asarray(span.start)))
    start = np.asarray(span.start, dtype=np.float64)[order]
    ioi = np.rint(np.diff(start) / ioi_step).astype(np.int64)  # (N - 1,)
    return np.asarray(span.pitch, dtype=np.int64)[order], np.concatenate([[-1], ioi]).astype(np.int64)


def verbatim_copying(new: SpanLike, seed: SpanLike, min_len: int = 8, ioi_step: float = 0.05) -> dict:
    """Runs of the seed played back note for note. Notes are sorted by (onset, pitch); a run of k notes of
    `new` matches k consecutive seed notes when all k pitches are equal and the k - 1 IOIs inside the run
    are equal in steps of ioi_step (the run's first IOI leads in from outside it, so it is not compared).
    "longest": the longest matching run (0 if none); "share_in_copies": share of new notes inside some
    matching run of >= min_len notes (nan for no new notes). Exact runs this long are what a model that
    memorised the seed plays; development changes a pitch or a rhythm every few notes."""
    p_new, i_new = _note_symbols(new, ioi_step)  # (N,), (N,)
    p_seed, i_seed = _note_symbols(seed, ioi_step)  # (M,), (M,)
    if len(p_new) == 0:
        return {"longest": 0, "share_in_copies": float("nan")}
    best = np.zeros(len(p_new), dtype=np.int64)  # (N,) longest run ending at each new note
    prev = np.zeros(len(p_seed), dtype=np.int64)  # (M,) run lengths ending at (i - 1, j)
    for i in range(len(p_new)):  # O(N * M): one vectorised row of the common-substring table per note
        grow = np.zeros(len(p_seed), dtype=np.int64)
        grow[1:] = np.where(i_seed[1:] == i_new[i], prev[:-1], 0)  # extend the run ending at (i-1, j-1)
        prev = np.where(p_seed == p_new[i], grow + 1, 0)
        best[i] = prev.max(initial=0)
    cover = np.zeros(len(p_new) + 1, dtype=np.int64)  # difference array over new notes
    ends = np.flatnonzero(best >= min_len)  # a maximal run ending here covers every shorter one ending here
    np.add.at(cover, ends - best[ends] + 1, 1)
    np.add.at(cover, ends + 1, -1)
    covered = np.cumsum(cover[:-1]) > 0  # (N,)
    return {"longest": int(best.max()), "share_in_copies": float(covered.mean())}


# ---------------------------------------------------------------- harmony: pitch classes and key

def pitch_class_histogram(span: SpanLike) -> np.ndarray:
    """(12,) share of sounding time per pitch class (C = 0): a held chord tone weighs more than a passing
    note, as it does to the ear. All zeros for a span with no sounding time."""
    dur = np.clip(np.asarray(span.end, dtype=np.float64) - np.asarray(span.start, dtype=np.float64), 0, None)
    hist = np.bincount(np.asarray(span.pitch, dtype=np.int64) % 12, weights=dur, minlength=12)[:12]
    total = hist.sum()
    return hist / total if total > 0 else np.zeros(12)


def pc_correlation(a: SpanLike, b: SpanLike) -> float:
    """Pearson correlation of the two pitch-class histograms: same harmonic colour regardless of key
    estimation's all-or-nothing choice. nan if either is empty or flat (a correlation is undefined)."""
    return histogram_correlation(pitch_class_histogram(a), pitch_class_histogram(b))


def histogram_correlation(ha: np.ndarray, hb: np.ndarray) -> float:
    """`pc_correlation` of two (12,) histograms already made (or a profile standing in for one)."""
    if is_flat(ha) or is_flat(hb):
        return float("nan")
    return float(np.corrcoef(ha, hb)[0, 1])


def estimate_key(span: SpanLike) -> tuple[int, str]:
    """(tonic pitch class 0-11, "major" | "minor") of the span's duration-weighted pitch-class histogram
    (`musictx.io.keys.key_of_histogram`); NO_KEY, (-1, "none"), for a span whose histogram is empty or flat."""
    return key_of_histogram(pitch_class_histogram(span))


def same_key(a: SpanLike, b: SpanLike) -> bool:
    """Whether both spans read as the same key (False when either has none)."""
    ka = estimate_key(a)
    return ka != NO_KEY and ka == estimate_key(b)


# ---------------------------------------------------------------- texture

def density(span: SpanLike, seconds: float) -> float:
    """Notes per second over `seconds` (the window's length, not the notes' extent, so a continuation that
    stops early counts as sparse). nan for a non-positive length."""
    return len(span) / seconds if seconds > 0 else float("nan")


def mean_duration(span: SpanLike) -> float:
    """Mean note length in seconds: staccato against legato (nan for no notes)."""
    if len(span) == 0:
        return float("nan")
    return float(np.mean(np.asarray(span.end, dtype=np.float64) - np.asarray(span.start, dtype=np.float64)))


def mean_polyphony(span: SpanLike) -> float:
    """Mean over distinct onsets of the notes sounding there (start <= t < end, the onset's own notes always
    included, even zero-length ones): a thin line against full chords and pedalled textures. nan if empty."""
    start = np.asarray(span.start, dtype=np.float64)  # (N,)
    end = np.maximum(np.asarray(span.end, dtype=np.float64), start)
    if len(start) == 0:
        return float("nan")
    onsets = np.unique(start)  # (U,)
    started = np.searchsorted(np.sort(start), onsets, side="right")  # (U,) start <= t
    ended = np.searchsorted(np.sort(end), onsets, side="right")  # (U,) end <= t
    zero = np.sort(start[end == start])  # zero-length notes: counted in `ended` at their own onset
    own_zero = np.searchsorted(zero, onsets, side="right") - np.searchsorted(zero, onsets, side="left")
    return float(np.mean(started - ended + own_zero))


def held_at_cap(span: SpanLike, cap_s: float = 4.9, per_s: float = 30.0, seconds: float | None = None) -> float:
    """Notes lasting >= cap_s per `per_s` seconds of music. A decoder that never emits a note-off holds notes
    until its forced release at the maximum duration, so a pile of notes at the cap is a failure, not
    legato. `seconds` defaults to the span's extent (max end - min start); nan for a zero-length span."""
    start = np.asarray(span.start, dtype=np.float64)
    end = np.asarray(span.end, dtype=np.float64)
    count = int(np.sum(end - start >= cap_s - _EPS))
    if seconds is None:
        seconds = float(end.max() - start.min()) if len(start) else 0.0
    if seconds <= 0:
        return 0.0 if count == 0 else float("nan")
    return count * per_s / seconds


# ---------------------------------------------------------------- failure: loops

def onset_roll(span: SpanLike, frame_s: float = 0.05) -> np.ndarray:
    """(T, 128) bool, True where a note of that pitch starts in the frame; frame 0 is the first onset."""
    start = np.asarray(span.start, dtype=np.float64)
    if len(start) == 0:
        return np.zeros((0, 128), dtype=bool)
    frames = np.rint((start - start.min()) / frame_s).astype(np.int64)  # (N,)
    roll = np.zeros((int(frames.max()) + 1, 128), dtype=bool)
    roll[frames, np.clip(np.asarray(span.pitch, dtype=np.int64), 0, 127)] = True
    return roll


def _longest_repeat(row_id: np.ndarray, has_onset: np.ndarray, period: int) -> int:
    """Most times in a row a pattern of `period` frames repeats exactly: the longest run of frames t with
    row t == row t + period whose first `period` frames hold an onset (a silent run is no pattern; by
    periodicity a run with silent first frames is silent throughout) repeats 1 + length // period times."""
    eq = row_id[:-period] == row_id[period:]  # (T - P,)
    edges = np.diff(np.concatenate([[0], eq.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # runs [start, stop)
    onsets_before = np.concatenate([[0], np.cumsum(has_onset)])  # (T + 1,)
    live = onsets_before[starts + period] - onsets_before[starts] > 0  # start + P <= T - 1
    if not live.any():
        return 1
    return int(1 + ((stops - starts)[live] // period).max())


def longest_loop(span: SpanLike, min_period_s: float = 1.0, max_period_s: float = 8.0,
                 frame_s: float = 0.05) -> dict:
    """The longest exact loop: over periods from min_period_s to max_period_s, the most times one pattern
    of onsets (every pitch, to the frame) repeats in a row. Real music rarely repeats exactly for long; a
    stuck model loops a short cell dozens of times. {"repeats": the count (1 if nothing repeats),
    "period_s": its period (nan if none), "seconds": repeats * period_s (0.0 if none)}."""
    roll = onset_roll(span, frame_s)  # (T, 128)
    if len(roll) == 0:
        return {"repeats": 1, "period_s": float("nan"), "seconds": 0.0}
    lo, hi = max(1, round(min_period_s / frame_s)), round(max_period_s / frame_s)
    # (T + hi, 128): silence after the last onset, so the last repeat is compared with what follows it
    # (nothing) instead of the comparison stopping at the last onset, one period short
    roll = np.concatenate([roll, np.zeros((hi, 128), dtype=bool)])
    _, row_id = np.unique(roll, axis=0, return_inverse=True)  # (T,) equal rows, equal ids
    row_id = row_id.reshape(-1)
    has_onset = roll.any(axis=1)  # (T,)
    best, best_p = 1, 0
    for period in range(lo, min(hi, len(roll) - 1) + 1):
        repeats = _longest_repeat(row_id, has_onset, period)
        if repeats > best:
            best, best_p = repeats, period
    if best < 2:
        return {"repeats": 1, "period_s": float("nan"), "seconds": 0.0}
    return {"repeats": best, "period_s": best_p * frame_s, "seconds": best * best_p * frame_s}


# ---------------------------------------------------------------- orchestration

def _names_with_notes(span: SpanLike) -> set[str]:
    return {span.track_names[int(t)] for t in np.unique(np.asarray(span.track, dtype=np.int64))}


def tracks_kept(seed: SpanLike, new: SpanLike) -> dict:
    """Whether the continuation keeps the seed's band: tracks are matched by name (indices differ between
    files). {"seed_tracks": seed names with notes, "kept": how many of them have notes in `new`, "extra":
    sorted names with notes in `new` that have none in the seed}."""
    seed_names, new_names = _names_with_notes(seed), _names_with_notes(new)
    return {"seed_tracks": len(seed_names), "kept": len(seed_names & new_names),
            "extra": sorted(new_names - seed_names)}


# ---------------------------------------------------------------- the bass


def downbeat_bass(span: SpanLike, downbeats: np.ndarray, t0: float, t1: float, tol: float = 0.06) -> float:
    """The share of the downbeats in [t0, t1) struck (within ``tol`` s) with a note at or below `BASS_CEILING`;
    nan where the window has no downbeat."""
    bars = downbeats[(downbeats >= t0) & (downbeats < t1)]
    if len(bars) == 0:
        return float("nan")
    low = span.start[span.pitch <= BASS_CEILING]
    return float(np.mean([np.any(np.abs(low - d) <= tol) for d in bars]))


def low_register_share(span: SpanLike, t0: float, t1: float, step: float = 0.125) -> float:
    """The share of the points every ``step`` s of [t0, t1) at which a note at or below `BASS_CEILING` sounds."""
    at = np.arange(t0, t1, step)  # (P,)
    low = span.pitch <= BASS_CEILING
    if not low.any() or len(at) == 0:
        return 0.0
    starts, ends = span.start[low], span.end[low]
    return float(((starts[None, :] <= at[:, None]) & (ends[None, :] > at[:, None])).any(axis=1).mean())


# ---------------------------------------------------------------- memorisation: n-grams in a training index
# written beside the tokenizer (musictx.io.ngram_index), since prep builds the index from the train split
from musictx.io.ngram_index import build_index, position_ngrams, share_in_index  # noqa: E402,F401
