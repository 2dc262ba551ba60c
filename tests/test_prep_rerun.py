"""A re-run into an output_dir that holds a dataset replaces it, and says so in one line naming what the old one
was made with where that differs: the default output_dir (data/<source>) is one folder for every input folder,
so a second run from another folder used to take the first one's place without a word."""

from __future__ import annotations

from pathlib import Path

from data_prep.options import prep_options
from data_prep.prepare import run, write_dataset
from tests.helpers import write_random_midi


def _folder(root: Path, seed: int) -> Path:
    for i in range(6):
        write_random_midi(root / f"piece{i}.mid", seed=seed + i)
    return root


def _replaced(notes: list[str]) -> list[str]:
    return [line for line in notes if line.startswith("replaced ")]


def test_a_rerun_says_which_dataset_it_replaced(tmp_path, capsys):
    a, b, out = _folder(tmp_path / "a", 0), _folder(tmp_path / "b", 10), tmp_path / "out"

    def prep(src: Path, **extra):
        return write_dataset(prep_options(source="folder", input_dir=str(src), output_dir=str(out), num_workers=0,
                                          **extra), progress=False)

    assert _replaced(prep(a).notes) == []  # nothing there before
    assert _replaced(prep(a).notes) == [f"replaced the dataset that was in {out}"]
    assert _replaced(prep(b).notes) == [f"replaced the dataset that was in {out} (made with input_dir={a})"]
    assert _replaced(prep(b, tokenizer="remi").notes) == [
        f"replaced the dataset that was in {out} (made with tokenizer=performance)"]
    assert _replaced(prep(b).notes) == [f"replaced the dataset that was in {out} (made with tokenizer=remi)"]
    assert _replaced(prep(b, tokenizer={"velocity_bins": 16}).notes) == [
        f"replaced the dataset that was in {out} (made with other tokenizer settings)"]
    run(prep_options(source="folder", input_dir=str(a), output_dir=str(out), num_workers=0))
    printed = capsys.readouterr().out.splitlines()
    assert f"replaced the dataset that was in {out} (made with input_dir={b}, other tokenizer settings)" in printed
