"""Musical statistics for comparing a continuation with its seed and with the real continuation (numpy).

All take `Notes` (seconds). `compare` adds the listener-facing checks of `musictx.evaluation.health` (held-note walls,
the seed's beat grid, verbatim loops). Distances between histograms are total-variation distances in [0, 1]:
half the L1 distance of the normalised histograms (0 = same distribution, 1 = disjoint).
"""

from __future__ import annotations

import numpy as np

from musictx.evaluation.health import beat_grid, grid_chance, longest_self_repeat_seconds, max_polyphony, onsets_on_grid
from musictx.io.midi_io import Notes

# Inter-onset intervals in log-spaced bins from 10 ms to 4 s (one bin more for longer gaps).
IOI_EDGES = np.concatenate([[0.0], np.geomspace(0.01, 4.0, 16), [np.inf]])
VELOCITY_EDGES = np.linspace(0, 128, 17)  # 16 bins of 8


def histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    counts, _ = np.histogram(values, bins=edges)
    total = counts.sum()
    return counts / total if total else np.zeros(len(edges) - 1)


def tv_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation between two normalised histograms; 1.0 when either is empty (nothing to compare)."""
    if p.sum() == 0 or q.sum() == 0:
        return 1.0
    return float(0.5 * np.abs(p - q).sum())


def pitch_class_histogram(n: Notes) -> np.ndarray:
    return histogram(n.pitch % 12, np.arange(13) - 0.5)


def onsets(n: Notes) -> np.ndarray:
    return np.unique(np.round(n.start, 3))


def ioi_histogram(n: Notes) -> np.ndarray:
    return histogram(np.diff(onsets(n)), IOI_EDGES)


def velocity_histogram(n: Notes) -> np.ndarray:
    return histogram(n.velocity, VELOCITY_EDGES)


def note_density(n: Notes) -> float:
    """Notes per second over the span from the first onset to the last note end."""
    if len(n) == 0:
        return 0.0
    span = float(n.end.max() - n.start.min())
    return len(n) / span if span > 0 else 0.0


def interval_ngrams(n: Notes, size: int = 4) -> set[tuple[int, ...]]:
    """Pitch-interval n-grams of the note sequence ordered by onset (then pitch): transposition-invariant
    motifs, the same rule for seed and continuation."""
    order = np.lexsort((n.pitch, n.start))
    intervals = np.diff(n.pitch[order])
    if len(intervals) < size:
        return set()
    windows = np.lib.stride_tricks.sliding_window_view(intervals, size)
    return {tuple(int(x) for x in w) for w in windows}


def motif_reuse(seed: Notes, continuation: Notes, size: int = 4) -> float:
    """Share of the seed's interval n-grams that reappear in the continuation."""
    motifs = interval_ngrams(seed, size)
    if not motifs:
        return 0.0
    return len(motifs & interval_ngrams(continuation, size)) / len(motifs)


def compare(candidate: Notes, seed: Notes, real: Notes | None = None, seed_seconds: float = 0.0) -> dict[str, float]:
    """The continuation metrics of one candidate against its seed (and the real continuation).

    ``seed_seconds`` is where the candidate's time 0 lies on the seed's clock: continuations are shifted to
    start at 0 where the seed was cut, and the seed's beat grid is carried on across that cut.
    """
    out = {
        "pitch_class_tv_vs_seed": tv_distance(pitch_class_histogram(candidate), pitch_class_histogram(seed)),
        "ioi_tv_vs_seed": tv_distance(ioi_histogram(candidate), ioi_histogram(seed)),
        "velocity_tv_vs_seed": tv_distance(velocity_histogram(candidate), velocity_histogram(seed)),
        "density_ratio_vs_seed": note_density(candidate) / note_density(seed) if note_density(seed) else 0.0,
        "motif_reuse": motif_reuse(seed, candidate),
        "notes_per_s": note_density(candidate),
        "mean_duration_s": float(np.mean(candidate.end - candidate.start)) if len(candidate) else 0.0,
        **health_metrics(candidate, seed, seed_seconds),
    }
    if real is not None:
        out["pitch_class_tv_vs_real"] = tv_distance(pitch_class_histogram(candidate), pitch_class_histogram(real))
        out["ioi_tv_vs_real"] = tv_distance(ioi_histogram(candidate), ioi_histogram(real))
        out["velocity_tv_vs_real"] = tv_distance(velocity_histogram(candidate), velocity_histogram(real))
    return out


def health_metrics(candidate: Notes, seed: Notes, seed_seconds: float = 0.0) -> dict[str, float]:
    """`musictx.evaluation.health`'s checks of one candidate; the beat grid is the seed's, moved to the
    candidate's clock."""
    period, phase = beat_grid(seed)
    return {
        "max_polyphony": float(max_polyphony(candidate)),
        "onsets_on_seed_grid": onsets_on_grid(candidate, period, (phase - seed_seconds) % period),
        "seed_grid_chance": grid_chance(period),
        "longest_repeat_s": longest_self_repeat_seconds(candidate),
    }


def mean_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {k: float(np.mean([r[k] for r in rows if k in r])) for k in rows[0]}
