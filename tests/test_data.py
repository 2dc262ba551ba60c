"""MusicDataModule: window shapes, PAD masking, fixed validation windows, train-only augmentation."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from musictx.io.token_store import DatasetFormatError, TokenArrays
from musictx.io.tokenizer import EventTokenizer
from musictx.training.data import MusicDataModule, WindowSampler
from musictx.training.windows import FixedWindows, RandomWindows

L = 64


def datamodule(prepared_dir, **kw) -> MusicDataModule:
    kw = {"seq_len": L, "batch_size": 4, "num_workers": 0, "seed": 7, **kw}
    dm = MusicDataModule(prepared_dir, **kw)
    dm.setup()
    return dm


def batches(loader, n=None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for i, b in enumerate(loader):
        if n is not None and i == n:
            break
        out.append(b)
    return out


def test_train_batches_are_shifted_windows(prepared_dir):
    dm = datamodule(prepared_dir)
    loader = dm.train_dataloader()
    arrays = TokenArrays(prepared_dir, "train")
    assert len(loader) == arrays.num_tokens // L // 4  # default epoch: train tokens / L windows
    for x, y in batches(loader):
        assert x.shape == y.shape == (4, L) and x.dtype == y.dtype == torch.long
        assert torch.equal(y[:, :-1], x[:, 1:])
        assert int(x.max()) < dm.vocab_size


def check_padding(window: np.ndarray, tok: EventTokenizer) -> int:
    """PAD only as a suffix, right after the piece's EOS; returns the number of PADs."""
    is_pad = window == tok.pad_id
    n_pad = int(is_pad.sum())
    if n_pad:
        assert is_pad[-n_pad:].all(), "PAD must only pad the end of a window"
        assert window[-n_pad - 1] == tok.eos_id, "a padded window ends its piece with EOS"
    return n_pad


def test_short_pieces_are_padded_not_crashing(prepared_dir):
    tok = EventTokenizer.load(prepared_dir / "tokenizer.json")
    train = RandomWindows(prepared_dir, "train", L, tok, seed=0, augment=False)
    short = np.asarray(train.arrays.piece(2))  # 33 ids, shorter than a window
    assert len(short) < L + 1
    seen_short = 0
    for g in range(400):
        w = train.window(g)
        assert w.shape == (L + 1,)
        n_pad = check_padding(w, tok)
        if n_pad == L + 1 - len(short) and np.array_equal(w[: len(short)], short):
            seen_short += 1
    assert seen_short > 0, "the short piece is drawn (proportionally to its length) and padded"
    # The 10-id validation piece: one window, 9 targets, the rest PAD in y (left out of the loss).
    val = FixedWindows(prepared_dir, "validation", L, tok)
    x, y = val[len(val) - 1]
    assert int((y != tok.pad_id).sum()) == 9
    assert torch.equal(y[:9], torch.from_numpy(np.asarray(val.arrays.piece(1)[1:], dtype=np.int64)))


def test_validation_windows_fixed_and_cover_every_target_once(prepared_dir):
    dm1, dm2 = datamodule(prepared_dir, seed=1), datamodule(prepared_dir, seed=2)
    b1, b2 = batches(dm1.val_dataloader()), batches(dm2.val_dataloader())
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(b1, b2, strict=True))
    tok = dm1.tokenizer
    val = FixedWindows(prepared_dir, "validation", L, tok)
    targets = torch.cat([y[y != tok.pad_id] for _, y in b1]).numpy()
    pieces = [np.asarray(val.arrays.piece(i))[1:] for i in range(len(val.arrays))]
    np.testing.assert_array_equal(targets, np.concatenate(pieces))  # no augmentation, no overlap, no gap


def test_train_windows_reproducible_and_independent_of_workers(prepared_dir):
    a = batches(datamodule(prepared_dir).train_dataloader(), 3)
    b = batches(datamodule(prepared_dir, num_workers=2).train_dataloader(), 3)
    c = batches(datamodule(prepared_dir, seed=8).train_dataloader(), 3)
    assert all(torch.equal(p[0], q[0]) for p, q in zip(a, b, strict=True))
    assert not all(torch.equal(p[0], q[0]) for p, q in zip(a, c, strict=True))


def test_augmentation_transposes_within_range_on_train_only(prepared_dir):
    tok = EventTokenizer.load(prepared_dir / "tokenizer.json")
    plain = RandomWindows(prepared_dir, "train", L, tok, seed=3, augment=False)
    moved = RandomWindows(prepared_dir, "train", L, tok, seed=3, augment=True, max_transpose=3,
                          stretch_range=(1.0, 1.0))
    n_pitch = tok.layout.note_off
    shifts = set()
    for g in range(60):
        p, m = plain.window(g), moved.window(g)  # same start (drawn first), then a transposition
        is_note = p < tok.layout.time_shift
        np.testing.assert_array_equal(m[~is_note], p[~is_note])
        delta = np.unique((m[is_note] % n_pitch) - (p[is_note] % n_pitch))
        assert len(delta) <= 1
        shifts.update(delta.tolist())
    assert shifts <= set(range(-3, 4)) and len(shifts) > 3
    # Stretching changes the time shifts; validation and test windows stay untouched.
    stretched = RandomWindows(prepared_dir, "train", L, tok, seed=3, augment=True, max_transpose=0,
                              stretch_range=(0.9, 0.92))
    assert any(not np.array_equal(stretched.window(g), plain.window(g)) for g in range(10))
    for split in ("validation", "test"):
        ds = FixedWindows(prepared_dir, split, L, tok)
        x, _ = ds[0]
        np.testing.assert_array_equal(x.numpy(), np.asarray(ds.arrays.piece(0)[:L]))


def test_sampler_resume_skips_done_batches_once():
    s = WindowSampler(epoch_windows=40, batch_size=4)
    s.set_epoch(1)
    full = list(s)
    s.resume(epoch=1, batches_done=3)
    assert list(s) == full[12:]
    assert list(s) == full  # the skip is used once
    s.resume(epoch=1, batches_done=3)
    s.set_epoch(2)  # another epoch: nothing to skip
    assert len(list(s)) == 40 and set(s).isdisjoint(full)


def test_ranks_draw_disjoint_windows_in_step():
    ranks = [WindowSampler(epoch_windows=42, batch_size=4, rank=r, world_size=2) for r in range(2)]
    a, b = list(ranks[0]), list(ranks[1])
    assert len(a) == len(b) == 20 and not set(a) & set(b)


def test_state_dict_round_trip_sets_the_sampler(prepared_dir):
    dm = datamodule(prepared_dir)
    assert dm.state_dict() == {}
    dm.load_state_dict({"epoch": 2, "batches_done": 1, "seed": 7, "world_size": 1})
    sampler = dm.train_dataloader().sampler
    fresh = WindowSampler(len(sampler), 4)
    fresh.set_epoch(2)
    assert list(sampler) == list(fresh)[4:]
    with pytest.raises(ValueError, match="seed"):
        dm.load_state_dict({"epoch": 0, "batches_done": 1, "seed": 99})


def test_vocabulary_mismatch_is_reported(prepared_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(prepared_dir, bad)
    smaller = EventTokenizer({"pitch_min": 21, "pitch_max": 108})
    (bad / "tokenizer.json").write_text(json.dumps(smaller.to_dict()))
    with pytest.raises(DatasetFormatError, match="vocab"):
        MusicDataModule(bad, seq_len=L, num_workers=0).setup("fit")


def test_the_infill_curriculum_on_data_without_infill_tokens_is_refused_before_a_model_is_built(prepared_dir):
    with pytest.raises(ValueError, match=r"data.infill.prob=0.5: the data in .* has no infill tokens; prepare it with "
                                         r"tokenizer=remi tokenizer.infill=true"):
        MusicDataModule(prepared_dir, num_workers=0, infill={"prob": 0.5})


def test_a_file_given_as_the_data_folder_is_said_to_be_a_file(tmp_path):
    (tmp_path / "data.txt").write_text("not a dataset\n")
    with pytest.raises(DatasetFormatError, match=r"data.dir=.*data.txt: a file, not a folder; prepare one"):
        MusicDataModule(tmp_path / "data.txt", num_workers=0)
    with pytest.raises(DatasetFormatError, match=r"data.dir=.*gone: no such folder"):
        MusicDataModule(tmp_path / "gone", num_workers=0)
