"""Listener-facing continuation checks (`musictx.evaluation.health`) on hand-made notes whose answers are known."""

from __future__ import annotations

import time

import numpy as np
import pytest

from musictx.evaluation.health import (
    beat_grid,
    grid_chance,
    longest_self_repeat_seconds,
    max_polyphony,
    onsets_on_grid,
)
from musictx.evaluation.metrics import compare
from musictx.io.midi_io import Notes


def notes(start, duration, pitch) -> Notes:
    start = np.asarray(start, dtype=np.float64)
    duration = np.broadcast_to(np.asarray(duration, dtype=np.float64), start.shape)
    pitch = np.broadcast_to(np.asarray(pitch, dtype=np.int64), start.shape).copy()
    return Notes(start, start + duration, pitch, np.full(len(start), 80, dtype=np.int64))


def random_notes(rng, count: int, seconds: float) -> Notes:
    start = np.sort(rng.uniform(0, seconds, count))
    return notes(start, 0.2, rng.integers(40, 90, count))


def test_max_polyphony_counts_a_held_chord_and_not_touching_notes():
    chord = notes([0.0] * 5 + [3.0, 4.0, 5.0], [2.0] * 5 + [0.5] * 3, [60, 64, 67, 70, 74, 60, 62, 64])
    assert max_polyphony(chord) == 5
    legato = notes([0.0, 0.5, 1.0, 1.5], 0.5, [60, 62, 64, 65])  # each ends as the next starts
    assert max_polyphony(legato) == 1
    overlapping = notes([0.0, 0.5, 1.0, 1.5], 0.51, [60, 62, 64, 65])
    assert max_polyphony(overlapping) == 2
    assert max_polyphony(Notes.empty()) == 0


def test_onsets_on_a_half_second_grid_are_found_and_all_on_it():
    beats = notes(0.13 + 0.5 * np.arange(40), 0.3, 60)
    period, phase = beat_grid(beats)
    # 0.25 s holds the same onsets but random times too (higher chance), and 1.0 s only every other one.
    assert period == pytest.approx(0.5, abs=0.002)
    assert phase == pytest.approx(0.13, abs=0.01)
    assert onsets_on_grid(beats, period, phase) == 1.0
    # Half a beat off the grid is as far from it as an onset can be.
    assert onsets_on_grid(notes(0.38 + 0.5 * np.arange(40), 0.3, 60), period, phase) == 0.0
    assert grid_chance(0.5, 0.04) == pytest.approx(0.16)


def test_chords_count_once_and_the_coarsest_grid_holding_the_onsets_wins():
    beat = 0.6
    on = np.repeat(beat * np.arange(30), 3)  # three-note chords on the beat: 30 distinct onsets

    def seed_with_eighths(every: int) -> Notes:
        off = beat * np.arange(0, 30, every) + beat / 2  # an eighth after every ``every``-th beat
        return notes(np.concatenate([on, off]), 0.2, np.arange(len(on) + len(off)) % 30 + 50)

    # A few eighths: the beat holds 30 of 33 onsets (0.91 - chance 0.13) > the eighth grid (1.0 - 0.27).
    assert beat_grid(seed_with_eighths(10))[0] == pytest.approx(beat, rel=0.005)
    # An eighth after every beat: the eighth grid holds them all (1.0 - 0.27) > the beat (0.5 - 0.13).
    assert beat_grid(seed_with_eighths(1))[0] == pytest.approx(beat / 2, rel=0.005)


def test_random_onsets_land_on_a_grid_about_as_often_as_chance():
    rng = np.random.default_rng(1)
    share = onsets_on_grid(random_notes(rng, 2000, 200.0), 0.5, 0.1)
    assert share == pytest.approx(grid_chance(0.5), abs=0.04)
    # A grid fitted to one random seed says nothing about other random notes.
    period, phase = beat_grid(random_notes(rng, 300, 30.0))
    assert onsets_on_grid(random_notes(rng, 2000, 200.0), period, phase) == pytest.approx(grid_chance(period), abs=0.05)


def test_too_few_seed_onsets_fall_back_to_120_bpm():
    assert beat_grid(notes([0.7], 0.5, 60)) == (0.5, pytest.approx(0.2))
    assert beat_grid(Notes.empty()) == (0.5, 0.0)
    assert onsets_on_grid(Notes.empty(), 0.5, 0.0) == 0.0


def looped_phrase(rng, times: int) -> Notes:
    """A 2-second phrase of 8 notes (16th-note rhythm with a dotted note, random pitches) played ``times``
    times back to back."""
    onsets = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.375, 1.5, 1.75])
    pitches = rng.integers(50, 80, len(onsets))
    return notes(np.concatenate([onsets + 2.0 * k for k in range(times)]), 0.2, np.tile(pitches, times))


def test_a_phrase_looped_ten_times_reads_about_twenty_seconds():
    loop = looped_phrase(np.random.default_rng(2), 10)
    assert 18.0 <= longest_self_repeat_seconds(loop) <= 20.0


def test_a_loop_inside_other_music_reads_the_loop_only():
    rng = np.random.default_rng(3)
    before, after = random_notes(rng, 100, 10.0), random_notes(rng, 100, 10.0)
    loop = looped_phrase(rng, 4)  # 8 s of loop
    moved = [notes(loop.start + 10.5, 0.2, loop.pitch), notes(after.start + 19.0, 0.2, after.pitch)]
    music = Notes.concat([before, *moved])
    assert 6.0 <= longest_self_repeat_seconds(music) <= 8.5


def test_random_notes_and_a_transposed_repeat_have_no_long_loop():
    rng = np.random.default_rng(4)
    assert longest_self_repeat_seconds(random_notes(rng, 1000, 100.0)) < 2.0
    phrase = looped_phrase(rng, 1)
    up_a_tone = notes(
        np.concatenate([phrase.start, phrase.start + 2.0]), 0.2, np.concatenate([phrase.pitch, phrase.pitch + 2])
    )
    assert longest_self_repeat_seconds(up_a_tone) < 1.0
    assert longest_self_repeat_seconds(notes([0.0, 1.0], 0.5, 60)) == 0.0


def test_self_repeat_is_fast_on_a_few_thousand_notes():
    rng = np.random.default_rng(5)
    many = random_notes(rng, 3000, 300.0)
    t0 = time.perf_counter()
    longest_self_repeat_seconds(many)
    assert time.perf_counter() - t0 < 5.0


def test_compare_reports_the_health_keys_on_the_seed_grid_across_the_cut():
    seed = notes(0.1 + 0.5 * np.arange(20), 0.3, 60 + np.arange(20) % 12)  # on a 0.5 s grid, phase 0.1
    cut = 10.25  # continuation time 0 = seed time 10.25: the grid lies at 0.35 + 0.5 k on its clock
    cont = notes(0.35 + 0.5 * np.arange(20), 0.3, 60 + np.arange(20) % 12)
    m = compare(cont, seed, seed_seconds=cut)
    assert m["onsets_on_seed_grid"] == 1.0
    assert m["seed_grid_chance"] == pytest.approx(0.16, abs=0.002)
    assert m["max_polyphony"] == 1.0
    assert m["longest_repeat_s"] > 5.0  # the 12-note pitch cycle in an even rhythm is itself a loop
    assert compare(cont, seed)["onsets_on_seed_grid"] == 0.0  # the same notes read on the seed's own clock
