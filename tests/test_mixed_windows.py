"""data.mix: a second prepared dataset mixed into the train windows, by a weight, deterministically.

Both datasets are prepared by musictx-prep from random MIDI files (different files, so a window's
content tells which dataset it came from).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from data_prep.prepare import write_dataset
from musictx.commands.prep import compose_options
from musictx.io.token_store import DatasetFormatError, TokenArrays
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.training.data import MusicDataModule
from musictx.training.mixed_windows import MixedWindows, count_text
from musictx.training.windows import RandomWindows, to_xy
from tests.helpers import write_random_midi

L = 32
RECALL = {"prob": 0.5, "min_len": 4, "max_len": 8}


def prepare(root: Path, name: str, first_seed: int, *overrides: str) -> Path:
    """A dataset of 12 random performances, prepared as musictx-prep does it."""
    midi = root / f"{name}_midi"
    for i in range(12):
        write_random_midi(midi / f"{name}_{i}.mid", seed=first_seed + i, n_notes=60, seconds=10.0)
    opts = compose_options(["source=folder", f"input_dir={midi}", f"output_dir={root / name}", "num_workers=0",
                            *overrides])
    return write_dataset(opts, progress=False).out_dir


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mix")
    return {"main": prepare(root, "main", 0), "mix": prepare(root, "folk", 1000),
            "odd": prepare(root, "odd", 2000, "tokenizer.velocity_bins=16")}


def datamodule(data_dir, **kw) -> MusicDataModule:
    kw = {"seq_len": L, "batch_size": 4, "num_workers": 0, "seed": 3, **kw}
    dm = MusicDataModule(data_dir, **kw)
    dm.setup()
    return dm


def batches(loader) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(loader)


def same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    return all(torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a, b, strict=True))


def occurs(window: np.ndarray, data_dir: Path, pad_id: int) -> bool:
    """Whether the window's ids (its PAD tail cut) are a run of consecutive ids of the train split."""
    ids = window[: len(window) - int((window == pad_id).sum())].astype(np.uint16).tobytes()
    tokens = np.asarray(TokenArrays(data_dir, "train").tokens).tobytes()
    at = tokens.find(ids)
    while at > 0 and at % 2:  # a match must start on a token, not inside one (-1: none)
        at = tokens.find(ids, at + 1)
    return at >= 0


def test_mix_off_gives_todays_windows(dirs):
    plain = datamodule(dirs["main"], recall=RECALL)
    reference = RandomWindows(dirs["main"], "train", L, plain.tokenizer, seed=3, recall=plain.recall)
    loader = plain.train_dataloader()
    g = list(loader.sampler)
    pairs = [to_xy(reference.window(i)) for i in g]
    expected = [(torch.stack([x for x, _ in pairs[i:i + 4]]), torch.stack([y for _, y in pairs[i:i + 4]]))
                for i in range(0, len(g), 4)]
    assert same(batches(loader), expected)
    for mix in ({"dir": None, "weight": 0.0}, {"dir": str(dirs["mix"]), "weight": 0.0}):
        dm = datamodule(dirs["main"], recall=RECALL, mix=mix)
        assert dm.mix_dir is None and type(dm.train_windows()) is RandomWindows
        assert same(batches(dm.train_dataloader()), expected)


def test_half_the_windows_come_from_the_mix_dataset(dirs):
    dm = datamodule(dirs["main"], augment=False, mix={"dir": dirs["mix"], "weight": 0.5})
    windows = dm.train_windows()
    assert isinstance(windows, MixedWindows)
    pad, n, from_mix = dm.tokenizer.pad_id, 400, 0
    for g in range(n):
        w = windows.window(g)
        in_main, in_mix = occurs(w, dirs["main"], pad), occurs(w, dirs["mix"], pad)
        assert in_main != in_mix, f"window {g} should be found in exactly one dataset"
        assert in_mix == windows.from_mix(g)
        from_mix += in_mix
    assert 0.4 * n < from_mix < 0.6 * n  # binomial(400, 0.5): sd 10


def test_mixed_stream_is_the_same_for_workers_and_constructions(dirs):
    mix = {"dir": str(dirs["mix"]), "weight": 0.5}
    a = datamodule(dirs["main"], recall=RECALL, mix=mix, epoch_windows=24)
    b = datamodule(dirs["main"], recall=RECALL, mix=mix, epoch_windows=24, num_workers=2)
    stream = batches(a.train_dataloader())
    assert same(stream, batches(b.train_dataloader()))
    # Each window is the main or the mix dataset's window g, augmented and with recall as without mixing.
    main = RandomWindows(dirs["main"], "train", L, a.tokenizer, seed=3, recall=a.recall)
    other = RandomWindows(dirs["mix"], "train", L, a.tokenizer, seed=3, recall=a.recall)
    rows = torch.cat([x for x, _ in stream])
    sources = []
    for g, row in zip(a.train_sampler, rows, strict=True):
        sources.append(bool(np.array_equal(row.numpy(), other.window(g)[:-1])))
        assert sources[-1] or np.array_equal(row.numpy(), main.window(g)[:-1])
    assert any(sources) and not all(sources)
    # Resuming mid-epoch continues the same stream.
    c = datamodule(dirs["main"], recall=RECALL, mix=mix, epoch_windows=24)
    c.load_state_dict({"epoch": 0, "batches_done": 2, "seed": 3, "world_size": 1})
    assert same(batches(c.train_dataloader()), stream[2:])


def test_validation_test_and_epoch_length_ignore_the_mix(dirs, capsys):
    plain = datamodule(dirs["main"])
    capsys.readouterr()
    mixed = datamodule(dirs["main"], mix={"dir": str(dirs["mix"]), "weight": 0.25})
    tokens = TokenArrays(dirs["mix"], "train").num_tokens
    assert capsys.readouterr().out == (f"mixing 25% of train windows from {dirs['mix']} "
                                       f"({count_text(tokens)} train tokens)\n")
    assert same(batches(mixed.val_dataloader()), batches(plain.val_dataloader()))
    assert same(batches(mixed.test_dataloader()), batches(plain.test_dataloader()))
    assert len(mixed.train_dataloader()) == len(plain.train_dataloader())  # main train tokens / L


def test_tokenizer_mismatch_names_both_folders(dirs):
    with pytest.raises(TokenizerMismatchError) as err:
        MusicDataModule(dirs["main"], seq_len=L, num_workers=0, mix={"dir": dirs["odd"], "weight": 0.3})
    message = str(err.value)
    assert str(dirs["main"]) in message and str(dirs["odd"]) in message
    assert "velocity_bins: 32" in message and "16" in message


@pytest.mark.parametrize("weight", [-0.1, 1.0, 1.5, "half", True, None])
def test_weight_out_of_range_is_refused(dirs, weight):
    with pytest.raises(ValueError, match=r"data\.mix\.weight must be a number in \[0, 1\)"):
        MusicDataModule(dirs["main"], seq_len=L, num_workers=0, mix={"dir": dirs["mix"], "weight": weight})


def test_bad_mix_folders_and_keys_are_named(dirs, tmp_path):
    def build(**mix):
        return MusicDataModule(dirs["main"], seq_len=L, num_workers=0, mix=mix)

    with pytest.raises(ValueError, match=r"data\.mix\.weight=0\.3 but data\.mix\.dir is null"):
        build(dir=None, weight=0.3)
    with pytest.raises(DatasetFormatError, match=f"data.mix.dir={tmp_path / 'nowhere'}: no such folder"):
        build(dir=tmp_path / "nowhere", weight=0.3)
    no_train = tmp_path / "no_train"
    shutil.copytree(dirs["mix"], no_train)
    (no_train / "train.bin").unlink()
    with pytest.raises(DatasetFormatError, match=f"data.mix.dir={no_train}: no train split"):
        build(dir=no_train, weight=0.3)
    with pytest.raises(ValueError, match="unknown keys"):
        build(dir=dirs["mix"], weight=0.3, wieght=0.5)


def test_mix_tempo_and_dynamics_vary_only_the_mix_windows(dirs):
    """data.mix.stretch_range / velocity_shift re-time and re-level the mix windows, window by window; the
    main windows stay exactly those of a run without them."""
    plain = datamodule(dirs["main"], mix={"dir": dirs["mix"], "weight": 0.5}, max_transpose=0,
                       stretch_range=(1.0, 1.0)).train_windows()
    varied = datamodule(dirs["main"], mix={"dir": dirs["mix"], "weight": 0.5, "stretch_range": [0.5, 0.5],
                                           "velocity_shift": 3},
                        max_transpose=0, stretch_range=(1.0, 1.0)).train_windows()
    tok, lay = plain.main.tok, plain.main.tok.layout
    seen_shifts, span_a, span_b = set(), 0, 0
    for g in range(60):
        a, b = plain.window(g), varied.window(g)
        if not plain.from_mix(g):
            assert np.array_equal(a, b)
            continue
        # half the tempo: the same notes in the same order, in about half the time
        notes_a, notes_b = a[a < lay.time_shift], b[b < lay.time_shift]
        k = min(len(notes_a), len(notes_b)) // 2
        assert k > 4 and np.array_equal(notes_a[:k], notes_b[:k])
        t_a = np.cumsum(tok.shift_steps(a))[a < lay.time_shift][:k]  # the clock at each note event
        t_b = np.cumsum(tok.shift_steps(b))[b < lay.time_shift][:k]
        span_a, span_b = span_a + t_a[-1], span_b + t_b[-1]
        # one shift for the whole window, within +-3 bins (unless clipped at the range's ends)
        va = a[(a >= lay.velocity) & (a < lay.pad)][:4]
        vb = b[(b >= lay.velocity) & (b < lay.pad)][:4]
        inside = (va + 3 < lay.pad) & (va - 3 >= lay.velocity)
        moved = set((vb - va)[inside].tolist())
        assert len(moved) <= 1 and all(-3 <= m <= 3 for m in moved)
        seen_shifts |= moved
    assert len(seen_shifts) >= 3  # the level is drawn per window
    assert span_a > 300 and abs(span_b / span_a - 0.5) < 0.05, (span_a, span_b)


@pytest.mark.parametrize("mix, message", [({"stretch_range": [0, 1]}, "stretch_range must be"),
                                          ({"stretch_range": [1.5, 1.2]}, "stretch_range must be"),
                                          ({"velocity_shift": -1}, "velocity_shift must be"),
                                          ({"velocity_shift": 1.5}, "velocity_shift must be")])
def test_bad_mix_tempo_and_dynamics_are_refused(dirs, mix, message):
    with pytest.raises(ValueError, match=message):
        MusicDataModule(dirs["main"], seq_len=L, num_workers=0, mix={"dir": dirs["mix"], "weight": 0.3, **mix})
