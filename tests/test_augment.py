"""Train-time augmentation on ids: transposition and time stretch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from musictx.io.token_edits import stretch_ids, transpose_ids
from musictx.io.tokenizer import EventTokenizer
from musictx.training.augment import augment_ids
from tests.helpers import random_pretty_midi

TOK = EventTokenizer()


def piece(seed: int = 0) -> np.ndarray:
    return TOK.encode(random_pretty_midi(np.random.default_rng(seed), n_notes=60, seconds=10))


@settings(max_examples=30, deadline=None)
@given(st.integers(-12, 12), st.integers(0, 1000))
def test_transpose_shifts_every_note_and_keeps_timing(semitones, seed):
    ids = piece(seed)
    before, after = TOK.decode_notes(ids), TOK.decode_notes(transpose_ids(ids, semitones, TOK))
    inside = (before.pitch + semitones >= 0) & (before.pitch + semitones <= 127)
    np.testing.assert_array_equal(after.pitch, before.pitch[inside] + semitones)
    np.testing.assert_allclose(after.start, before.start[inside])
    np.testing.assert_allclose(after.end, before.end[inside])
    np.testing.assert_array_equal(after.velocity, before.velocity[inside])


def test_transpose_drops_notes_leaving_the_range():
    ids = TOK.encode_notes(TOK.decode_notes(piece()))
    notes = TOK.decode_notes(transpose_ids(ids, 60, TOK))
    assert notes.pitch.max() <= 127 and len(notes) < len(TOK.decode_notes(ids))


@settings(max_examples=30, deadline=None)
@given(st.floats(0.5, 2.0), st.integers(0, 1000))
def test_stretch_scales_times_and_keeps_every_note(factor, seed):
    ids = piece(seed)
    before, after = TOK.decode_notes(ids), TOK.decode_notes(stretch_ids(ids, factor, TOK))
    np.testing.assert_array_equal(np.sort(after.pitch), np.sort(before.pitch))
    order_a, order_b = np.lexsort((after.pitch, after.start)), np.lexsort((before.pitch, before.start))
    # Onsets land within half a step of their exact stretched time, plus at most a few steps where
    # compression had to keep distinct events apart.
    err = np.abs(after.start[order_a] - before.start[order_b] * factor)
    assert np.median(err) <= 0.0051 and err.max() <= 0.0051 + 0.05 * max(0.0, 1 - factor) * 10


def test_stretch_by_one_is_identity_and_keeps_trailing_silence():
    ids = np.append(piece(), [TOK.layout.time_shift + 99, TOK.layout.time_shift + 9])  # 1.1 s of tail
    np.testing.assert_array_equal(stretch_ids(ids, 1.0, TOK), ids)
    _, _, total = TOK.split_time_shifts(stretch_ids(ids, 2.0, TOK))
    assert total == round(TOK.split_time_shifts(ids)[2] * 2.0)


def test_augment_draws_within_the_papers_ranges():
    ids = piece()
    base = TOK.decode_notes(ids)
    rng = np.random.default_rng(0)
    shifts, ratios = set(), []
    for _ in range(60):
        notes = TOK.decode_notes(augment_ids(ids, TOK, rng))
        shifts.add(int(np.median(notes.pitch) - np.median(base.pitch)))
        ratios.append(notes.end.max() / base.end.max())
    assert shifts <= set(range(-3, 4)) and len(shifts) >= 5
    assert 0.949 <= min(ratios) and max(ratios) <= 1.051 and max(ratios) - min(ratios) > 0.05
