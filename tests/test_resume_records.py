"""What a resume of ``musictx-train`` leaves behind when it trains nothing: nothing. The console script, as a
user runs it: Hydra wrote its .hydra/ (the run's own config replaced by the resume's) and train.log into the
run folder, or made a new outputs/train/<date>/<time> folder, before the run said "nothing to train"."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# The tiny run of tests/test_train.py's SHRINK, as command-line options.
TINY = ["experiment=tiny", "model=lstm", "data.seq_len=32", "data.batch_size=4", "data.num_workers=0",
        "model.net.n_layers=1", "model.net.d_model=32", "trainer.val_check_interval=3", "trainer.limit_val_batches=2",
        "schedule.warmup_steps=2", "++trainer.enable_progress_bar=false", "~callbacks.progress_bar"]


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "musictx.commands.train", *args], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=cwd)


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (the folder too): its kind, its modification time, and a file's hash."""
    found = {}
    for path in sorted([folder, *folder.rglob("*")]):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
        found[str(path.relative_to(folder))] = (digest, stat.st_mtime_ns)
    return found


@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_a_resume_with_nothing_to_train_writes_nothing(prepared_dir, tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = [*TINY, f"data.dir={prepared_dir}", "trainer.max_steps=6"]
    first = cli(tmp_path, *args, f"hydra.run.dir={run}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (run / ".hydra" / "config.yaml").is_file() and (run / "train.log").is_file()
    before = snapshot(run)
    last = run / "checkpoints" / "last.ckpt"
    said = {}
    # the run's own folder; then its file from another folder, which Hydra gave a new outputs/train/<date>/<time>
    for how, extra in (("last", [f"hydra.run.dir={run}", "ckpt_path=last"]), ("file", [f"ckpt_path={last}"])):
        done = cli(elsewhere, *args, *extra)
        assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
        said[how] = done.stdout.splitlines()
    assert said == {
        "last": [f"musictx-train: nothing to train: ckpt_path=last ({last}) is at step 6, and trainer.max_steps=6; "
                 "to train on, raise trainer.max_steps above 6 and resume it again"],
        "file": [f"musictx-train: nothing to train: ckpt_path={last} is at step 6, and trainer.max_steps=6; to train "
                 "on, raise trainer.max_steps above 6 and resume it again"]}
    assert snapshot(run) == before
    assert list(elsewhere.iterdir()) == []
