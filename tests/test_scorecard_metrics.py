"""The continuation scorecard's measures on small hand-built spans, whose values follow from the definitions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from musictx.io.keys import NO_KEY
from musictx.listening.scorecard_metrics import (
    build_index,
    chance_grid_share,
    density,
    downbeat_bass,
    eighth_grid,
    estimate_key,
    grid_share,
    held_at_cap,
    longest_loop,
    low_register_share,
    mean_duration,
    mean_polyphony,
    motif_reuse,
    pc_correlation,
    pitch_class_histogram,
    position_ngrams,
    same_key,
    share_in_index,
    top_line,
    tracks_kept,
    verbatim_copying,
)


@dataclass
class Span:
    """The fields the measures read (parallel arrays, seconds)."""

    start: np.ndarray
    end: np.ndarray
    pitch: np.ndarray
    velocity: np.ndarray
    track: np.ndarray
    track_names: list[str]

    def __len__(self) -> int:
        return len(self.start)


def span(start, pitch, dur=0.25, end=None, track=None, names=("piano",)) -> Span:
    start = np.asarray(start, dtype=np.float64)
    end = start + dur if end is None else np.asarray(end, dtype=np.float64)
    pitch = np.asarray(pitch, dtype=np.int64)
    track = np.zeros(len(start), dtype=np.int64) if track is None else np.asarray(track, dtype=np.int64)
    return Span(start, end, pitch, np.full(len(start), 80), track, list(names))


C_MAJOR = [60, 62, 64, 65, 67, 69, 71, 72]


def test_eighth_grid_adds_midpoints_and_follows_tempo():
    assert np.allclose(eighth_grid(np.array([1.0, 0.0, 0.5])), [0.0, 0.25, 0.5, 0.75, 1.0])
    assert np.allclose(eighth_grid(np.array([0.0, 0.5, 1.5])), [0.0, 0.25, 0.5, 1.0, 1.5])  # the tempo halves
    assert len(eighth_grid(np.array([2.0]))) == 1


def test_grid_share_on_off_and_at_the_tolerance():
    grid = eighth_grid(np.arange(0.0, 8.0, 0.5))  # 120 bpm
    on = grid[::3]
    assert grid_share(on, grid) == 1.0
    assert grid_share(on + 0.1, grid) == 0.0
    assert grid_share(np.concatenate([on, on + 0.1]), grid) == 0.5
    assert grid_share(np.array([0.03, 0.25 - 0.03, 0.031]), grid) == pytest.approx(2 / 3)
    assert math.isnan(grid_share(np.array([]), grid))


def test_chance_grid_share_counts_the_union_inside_the_interval():
    grid = np.arange(0.0, 10.0001, 0.25)
    assert chance_grid_share(grid, 0.0, 10.0) == pytest.approx(0.24)
    assert chance_grid_share(grid, 0.0, 10.0, tol=0.2) == pytest.approx(1.0)  # windows overlap, counted once
    assert chance_grid_share(np.array([5.0]), 0.0, 10.0) == pytest.approx(0.006)
    assert chance_grid_share(np.array([0.0]), 0.0, 1.0) == pytest.approx(0.03)  # half the window is outside
    assert math.isnan(chance_grid_share(grid, 1.0, 1.0))


def test_chance_grid_share_is_grid_share_of_uniform_onsets():
    rng = np.random.default_rng(0)
    grid = np.sort(rng.uniform(0, 10, 60))  # irregular, windows overlapping here and there
    onsets = 2.0 + (np.arange(200_000) + 0.5) / 200_000 * 6.0  # evenly through [2, 8)
    assert grid_share(onsets, grid, tol=0.05) == pytest.approx(chance_grid_share(grid, 2.0, 8.0, 0.05), abs=1e-3)


def test_top_line_takes_the_highest_note_of_each_onset_group():
    s = span([0.0, 0.0, 0.0, 0.01, 0.5, 1.0, 1.015, 1.03], [60, 64, 67, 72, 65, 70, 62, 59])
    times, pitches = top_line(s)
    assert np.allclose(times, [0.0, 0.5, 1.0, 1.03])  # 1.03 is past 1.0 + 0.02: a group of its own
    assert pitches.tolist() == [72, 65, 70, 59]
    times, pitches = top_line(span([], []))
    assert len(times) == len(pitches) == 0


def test_motif_reuse_tells_transposed_from_exact():
    rng = np.random.default_rng(1)
    seed = rng.integers(50, 80, 24)
    out = motif_reuse(seed[3:15] + 5, seed)
    assert out == {"transposed": 1.0, "exact": 0.0}
    assert motif_reuse(seed[2:12], seed) == {"transposed": 1.0, "exact": 1.0}
    new = np.concatenate([seed[:5], [200, 300, 400, 500, 600]])  # one 5-gram of the seed's, then none
    assert motif_reuse(new, seed) == {"transposed": pytest.approx(1 / 6), "exact": pytest.approx(1 / 6)}
    assert all(math.isnan(v) for v in motif_reuse(seed[:4], seed).values())


def test_verbatim_copying_finds_a_planted_copy():
    rng = np.random.default_rng(2)
    seed = span(np.cumsum(rng.choice([0.1, 0.2, 0.3], 30)), rng.integers(60, 73, 30))
    copied = seed.start[5:15] - seed.start[5] + 10.0  # seed notes 5..14, moved to 10 s
    start = np.concatenate([np.arange(12) * 0.3 + 5.0, copied, copied[-1] + 0.2 + np.arange(8) * 0.15])
    pitch = np.concatenate([rng.integers(80, 91, 12), seed.pitch[5:15], rng.integers(80, 91, 8)])
    new = span(start, pitch)
    assert verbatim_copying(new, seed) == {"longest": 10, "share_in_copies": pytest.approx(10 / 30)}
    assert verbatim_copying(new, seed, min_len=11)["share_in_copies"] == 0.0


def test_verbatim_copying_breaks_on_a_changed_pitch_or_rhythm():
    seed = span(np.arange(20) * 0.2, 60 + np.arange(20) % 7 * 2)
    pitch = seed.pitch.copy()
    pitch[10] += 1
    assert verbatim_copying(span(seed.start, pitch), seed)["longest"] == 10
    start = seed.start.copy()
    start[12:] += 0.1  # one IOI changes: the run breaks there
    out = verbatim_copying(span(start, seed.pitch), seed)
    assert out["longest"] == 12 and out["share_in_copies"] == 1.0  # 12 + 8 notes, both runs >= 8
    assert verbatim_copying(seed, seed) == {"longest": 20, "share_in_copies": 1.0}
    assert math.isnan(verbatim_copying(span([], []), seed)["share_in_copies"])


def test_pitch_class_histogram_weighs_by_duration_and_correlates():
    s = span([0.0, 1.0], [48, 67], end=[1.0, 4.0])
    hist = pitch_class_histogram(s)
    assert hist.shape == (12,) and hist[0] == pytest.approx(0.25) and hist[7] == pytest.approx(0.75)
    scale = span(np.arange(8) * 0.5, C_MAJOR)
    assert pc_correlation(scale, span(np.arange(8) * 0.5, np.array(C_MAJOR) + 12)) == pytest.approx(1.0)
    assert pc_correlation(scale, span(np.arange(8) * 0.5, np.array(C_MAJOR) + 6)) < 0.5
    assert math.isnan(pc_correlation(scale, span([], [])))
    assert math.isnan(pc_correlation(scale, span(np.arange(12) * 0.5, np.arange(60, 72))))  # flat histogram


def test_estimate_key_major_minor_and_same_key():
    scale = span(np.arange(8) * 0.5, C_MAJOR)
    assert estimate_key(scale) == (0, "major")
    assert estimate_key(span(np.arange(8) * 0.5, np.array(C_MAJOR) + 7)) == (7, "major")
    a_minor = [57, 59, 60, 62, 64, 65, 68, 69, 57, 60, 64, 57]
    assert estimate_key(span(np.arange(12) * 0.5, a_minor)) == (9, "minor")
    assert same_key(scale, span(np.arange(8) * 0.3, np.array(C_MAJOR)[::-1] - 12))
    assert not same_key(scale, span(np.arange(12) * 0.5, a_minor))
    assert estimate_key(span([], [])) == NO_KEY and not same_key(span([], []), span([], []))


def test_density_duration_and_polyphony():
    s = span([0.0, 0.5, 1.0, 1.0, 2.0], [60, 64, 67, 72, 62], end=[2.0, 0.7, 1.5, 1.0, 2.5])
    assert density(s, 2.5) == 2.0
    assert mean_duration(s) == pytest.approx((2.0 + 0.2 + 0.5 + 0.0 + 0.5) / 5)
    # onsets 0: the held note; 0.5: held + 1; 1.0: held + 2 (one zero-length); 2.0: the held note has ended
    assert mean_polyphony(s) == pytest.approx((1 + 2 + 3 + 1) / 4)
    assert math.isnan(mean_polyphony(span([], [])))
    assert math.isnan(density(s, 0.0))


def test_downbeat_bass_counts_bars_struck_low_and_low_register_share_counts_time():
    # bars at 0, 2, 4, 6 s: a G3 on the first downbeat, an A3 (too high) on the second, a C2 50 ms late on the
    # third, a C2 200 ms late on the fourth; a melody note on every downbeat
    s = span([0.0, 2.0, 4.05, 6.2, 0.0, 2.0, 4.0, 6.0], [55, 57, 36, 36, 72, 72, 72, 72], dur=1.0)
    bars = np.array([0.0, 2.0, 4.0, 6.0, 8.0])
    assert downbeat_bass(s, bars, 0.0, 8.0) == pytest.approx(2 / 4)
    assert downbeat_bass(s, bars, 1.0, 5.0) == pytest.approx(1 / 2)  # only the bars inside the window
    assert math.isnan(downbeat_bass(s, bars, 8.5, 9.0))
    # low notes sound over [0, 1), [4.05, 5.05), [6.2, 7.2): 8 + 8 + 8 of the 64 points every 0.125 s of [0, 8)
    assert low_register_share(s, 0.0, 8.0) == pytest.approx(24 / 64)
    assert low_register_share(span([0.0], [72]), 0.0, 8.0) == 0.0


def test_held_at_cap_counts_notes_at_the_cap_per_30_seconds():
    start = np.array([0.0, 10.0, 20.0, 30.0, 55.0])
    s = span(start, [60] * 5, end=start + np.array([4.9, 5.0, 4.89, 6.0, 5.0]))  # extent 0..60 s
    assert held_at_cap(s) == pytest.approx(4 * 30 / 60)  # 4.89 s is short of the cap
    assert held_at_cap(s, seconds=30.0) == pytest.approx(4.0)
    assert held_at_cap(span([0.0, 1.0], [60, 62])) == 0.0


def test_longest_loop_counts_a_stuck_cell():
    cell_start, cell_pitch = np.array([0.0, 0.4, 0.8]), np.array([60, 64, 67])
    start = (cell_start[None, :] + 1.2 * np.arange(27)[:, None]).ravel()
    loop = span(start, np.tile(cell_pitch, 27))
    out = longest_loop(loop)
    assert out["repeats"] == 27
    assert out["period_s"] == pytest.approx(1.2) and out["seconds"] == pytest.approx(27 * 1.2)
    intro = span(np.concatenate([[0.0, 0.35, 0.9, 1.7], start + 2.0]), np.concatenate([[50, 55, 52, 70], loop.pitch]))
    assert longest_loop(intro)["repeats"] == 27  # music before the loop adds no repeat
    pitch = np.tile(cell_pitch, 27)
    pitch[3 * 20 + 1] = 65  # the 21st cell changes: 20 exact repeats before it, 6 after
    assert longest_loop(span(start, pitch))["repeats"] == 20


def test_longest_loop_of_random_music_is_one_or_two():
    rng = np.random.default_rng(3)
    s = span(np.sort(rng.uniform(0, 30, 150)), rng.integers(40, 90, 150))
    assert longest_loop(s)["repeats"] in (1, 2)
    assert longest_loop(span([], []))["repeats"] == 1


def test_tracks_kept_matches_by_name():
    seed = span([0.0, 1.0, 2.0], [60, 40, 62], track=[0, 1, 0], names=("Piano", "Bass", "Strings"))
    new = span([0.0, 1.0, 2.0], [40, 72, 41], track=[0, 1, 0], names=("Bass", "Lead", "Piano"))
    assert tracks_kept(seed, new) == {"seed_tracks": 2, "kept": 1, "extra": ["Lead"]}
    assert tracks_kept(seed, span([0.0], [60], track=[2], names=("a", "b", "Piano")))["kept"] == 1


def test_position_ngrams_is_a_polynomial_hash_of_pitch_and_position():
    pitches, positions = np.array([60, 62, 64, 65]), np.array([0, 4, 8, 12])
    got = position_ngrams(pitches, positions, n=3)
    base, mask = 0x100000001B3, (1 << 64) - 1
    symbols = [(p << 32 ^ q) + 1 for p, q in zip(pitches.tolist(), positions.tolist(), strict=True)]
    expected = [sum(s * pow(base, 3 - k, 1 << 64) for k, s in enumerate(symbols[i:i + 3])) & mask for i in range(2)]
    assert got.dtype == np.uint64 and got.tolist() == expected
    assert len(position_ngrams(pitches, positions, n=8)) == 0


def test_share_in_index_finds_a_planted_eight_gram():
    rng = np.random.default_rng(4)
    pieces = [(rng.integers(40, 90, 200), rng.integers(0, 16, 200)) for _ in range(5)]
    index = build_index([position_ngrams(p, q) for p, q in pieces])
    assert index.dtype == np.uint64 and np.all(np.diff(index) > 0)
    p, q = pieces[2]
    new_p = np.concatenate([rng.integers(91, 120, 10), p[50:58], rng.integers(91, 120, 10)])
    new_q = np.concatenate([rng.integers(0, 16, 10), q[50:58], rng.integers(0, 16, 10)])
    hashes = position_ngrams(new_p, new_q)  # 28 notes: 21 8-grams, one of them the planted one
    assert share_in_index(hashes, index) == pytest.approx(1 / 21)
    assert share_in_index(position_ngrams(new_p, (new_q + 1) % 16), index) == 0.0  # same pitches, shifted in bar
    assert share_in_index(position_ngrams(p, q), index) == 1.0
    assert math.isnan(share_in_index(np.zeros(0, dtype=np.uint64), index))
    assert len(build_index([])) == 0
