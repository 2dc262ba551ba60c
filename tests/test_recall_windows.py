"""The recall curriculum: where the repeat lands, what it is, and how it reaches the train windows only."""

from __future__ import annotations

import numpy as np
import pytest

from musictx.evaluation.recall import repeated_positions
from musictx.io.token_edits import transpose_ids
from musictx.io.tokenizer import EventTokenizer
from musictx.training.data import MusicDataModule
from musictx.training.recall_windows import RecallCurriculum
from musictx.training.windows import FixedWindows, RandomWindows

TOK = EventTokenizer()


def _find_repeat(out: np.ndarray, n_ids: int) -> tuple[int, int, int]:
    """(src, at, length) of the one inserted copy in a curriculum window built from ``n_ids`` arange ids."""
    at = int(np.flatnonzero(np.diff(out) != 1)[0]) + 1  # the copy starts where the run of +1 breaks
    return int(out[at]), at, len(out) - n_ids


def test_a_passage_comes_back_later_in_the_window_with_gaps_over_the_whole_window():
    n = 512
    cur = RecallCurriculum(prob=1.0, min_len=32, max_len=96, transpose_prob=0.0, stretch_prob=0.0)
    rng = np.random.default_rng(0)
    gaps, lengths = [], []
    for _ in range(300):
        ids = np.arange(n + 50)  # distinct ids: the copy is where the run of +1 breaks
        out = cur.apply(ids, n, TOK, rng)
        src, at, length = _find_repeat(out, len(ids))
        assert np.array_equal(out[:at], ids[:at]) and np.array_equal(out[at + length:], ids[at:])
        assert 32 <= length <= 96 and at + length <= n and src + length <= at
        gaps.append(at - src - length)
        lengths.append(length)
    assert min(gaps) < 20 and max(gaps) > n - 2 * 96 - 40  # spread from adjacent to across the window
    assert 32 <= min(lengths) < 40 and 88 < max(lengths) <= 96


def test_prob_is_the_share_of_windows_that_get_a_repeat_and_zero_changes_nothing():
    ids = np.arange(300)
    rng = np.random.default_rng(1)
    cur = RecallCurriculum(prob=0.3, min_len=8, max_len=16)
    changed = sum(not np.array_equal(cur.apply(ids, 256, TOK, rng), ids) for _ in range(1000))
    assert 250 < changed < 350
    assert cur.apply(ids[:100], 256, TOK, rng) is not None  # a short window is left as it is
    assert RecallCurriculum().apply(ids, 256, TOK, rng) is ids


def test_transposed_repeats_move_every_note_by_the_same_step(prepared_dir):
    from musictx.io.token_store import TokenArrays

    arrays = TokenArrays(prepared_dir, "train")
    piece = np.asarray(arrays.piece(int(np.argmax(arrays.lengths))), dtype=np.int64)
    n = 64
    cur = RecallCurriculum(prob=1.0, min_len=16, max_len=24, transpose_prob=1.0, max_transpose=2, stretch_prob=0.0)
    rng = np.random.default_rng(3)
    out = cur.apply(piece[: n + 10], n, TOK, rng)
    matches = []
    for src in range(n):
        for length in range(16, 25):
            for step in (-2, -1, 1, 2):
                moved = transpose_ids(piece[src:src + length], step, TOK)
                for at in range(src + length, n):
                    if np.array_equal(out[at:at + len(moved)], moved) and np.array_equal(out[:at], piece[:at]):
                        matches.append((src, length, step, at))
    assert matches, "no transposed copy of an earlier passage found"


def test_the_datamodule_gives_train_windows_repeats_and_validation_none(prepared_dir):
    exact = {"prob": 1.0, "min_len": 20, "max_len": 28, "transpose_prob": 0.0, "stretch_prob": 0.0}
    dm = MusicDataModule(prepared_dir, seq_len=64, batch_size=4, num_workers=0, augment=False, recall=exact)
    plain = RandomWindows(prepared_dir, "train", 64, dm.tokenizer, seed=0, augment=False)
    windows = RandomWindows(prepared_dir, "train", 64, dm.tokenizer, seed=0, augment=False, recall=dm.recall)
    full = [g for g in range(40) if (plain.window(g) != dm.tokenizer.pad_id).all()]
    assert len(full) > 10
    for g in full:  # every full window closes a 20-gram it has already played
        assert repeated_positions(windows.window(g), 20).any()
    assert sum(repeated_positions(plain.window(g), 20).any() for g in full) < len(full) / 2
    val = FixedWindows(prepared_dir, "validation", 64, dm.tokenizer)
    assert all(np.array_equal(val.window(i), FixedWindows(prepared_dir, "validation", 64, dm.tokenizer).window(i))
               for i in range(len(val)))


@pytest.mark.parametrize("recall, message", [({"prob": 1.5}, "data.recall.prob"),
                                             ({"prob": 0.5, "min_len": 8, "max_len": 40}, "data.recall.max_len=40"),
                                             ({"min_len": 0}, "min_len")])
def test_bad_curriculum_options_are_refused_by_name(prepared_dir, recall, message):
    with pytest.raises(ValueError, match=message):
        MusicDataModule(prepared_dir, seq_len=64, num_workers=0, recall=recall)


def test_bursty_windows_get_up_to_repeats_copies():
    ids = np.arange(600)
    rng = np.random.default_rng(4)
    cur = RecallCurriculum(prob=1.0, min_len=20, max_len=30, transpose_prob=0.0, stretch_prob=0.0, repeats=3)
    inserted = [len(cur.apply(ids, 512, TOK, rng)) - len(ids) for _ in range(300)]
    ones, twos, threes = ([x for x in inserted if lo <= x <= hi] for lo, hi in ((20, 30), (40, 60), (61, 90)))
    assert all(20 <= x <= 90 and not 30 < x < 40 for x in inserted)  # whole passages of 20..30, 1 to 3 of them
    assert min(len(ones), len(twos), len(threes)) > 30
    with pytest.raises(ValueError, match="repeats"):
        RecallCurriculum(repeats=0)


def test_a_loop_plays_its_passage_three_times_back_to_back():
    """loop_prob 1: every repeat is A A A, so the third A begins right where the second ended."""
    ids = np.arange(1000) % 300 + 1  # no run of ids repeats by chance within a window
    cur = RecallCurriculum(prob=1.0, min_len=20, max_len=30, transpose_prob=0.0, stretch_prob=0.0, loop_prob=1.0)
    rng = np.random.default_rng(7)
    for _ in range(50):
        out = cur.apply(ids, 200, TOK, rng)
        extra = len(out) - len(ids)
        assert 40 <= extra <= 60 and extra % 2 == 0
        length = extra // 2
        at = int(np.flatnonzero(out[:len(ids)] != ids)[0])  # where the first inserted copy begins
        passage = out[at - length:at]
        assert np.array_equal(passage, ids[at - length:at])  # the original A, then two more
        assert np.array_equal(out[at:at + length], passage) and np.array_equal(out[at + length:at + extra], passage)
        assert np.array_equal(out[at + extra:], ids[at:])
    no_loop = RecallCurriculum(prob=1.0, min_len=20, max_len=30, transpose_prob=0.0, stretch_prob=0.0)
    with_zero = RecallCurriculum(prob=1.0, min_len=20, max_len=30, transpose_prob=0.0, stretch_prob=0.0,
                                 loop_prob=0.0)
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    assert all(np.array_equal(no_loop.apply(ids, 200, TOK, a), with_zero.apply(ids, 200, TOK, b)) for _ in range(20))
    with pytest.raises(ValueError, match="loop_prob"):
        RecallCurriculum(loop_prob=1.5)
    with pytest.raises(ValueError, match="2 repeat"):
        RecallCurriculum(prob=1.0, max_len=400, loop_prob=0.5).check_fits(1024)
