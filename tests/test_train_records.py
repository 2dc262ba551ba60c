"""What a run leaves behind (issues 18 and 23): a run shorter than its validation interval still validates
at its end and writes metrics.csv; a warm-up longer than the run is said; train.log holds the run's lines;
``ckpt_path=last`` resumes the run of the folder it names or stops with one line; dataset errors are one
line. Real configs, real runs."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from musictx.checkpoints.model_store import load_checkpoint, read_checkpoint
from musictx.commands.train_objects import build
from musictx.commands.train_objects import train_config as train
from musictx.io.tokenizer import EventTokenizer

from .test_train import compose_train

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def metric_rows(run: Path) -> list[dict]:
    with open(run / "csv" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def logged_steps(rows: list[dict], key: str) -> list[int]:
    return [int(r["step"]) for r in rows if r.get(key)]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "musictx.commands.train", *args], capture_output=True, text=True,
                          timeout=300, env=ENV)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("musictx-train: error: "), done.stderr[-3000:]
    return last


# ----- issue 18: every run validates at its end; a warm-up longer than the run is said -----------------
@pytest.mark.parametrize(("overrides", "validated_at"), [
    (["trainer.max_steps=5", "trainer.val_check_interval=1000"], [5]),  # shorter than the interval
    (["trainer.max_steps=6", "trainer.val_check_interval=3"], [3, 6]),  # last step validated once
    (["trainer.max_steps=-1", "trainer.max_epochs=1", "data.epoch_windows=16", "trainer.val_check_interval=1000",
      "schedule=constant"],
     [4]),  # an epoch of 4 batches
])
def test_every_run_validates_its_last_step(overrides, validated_at, prepared_dir, tmp_path):
    seen = []

    class Record(L.Callback):
        def on_validation_end(self, trainer, pl_module):
            if not trainer.sanity_checking:
                seen.append(trainer.global_step)

    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", *overrides)
    L.seed_everything(cfg.seed)
    datamodule, module, trainer = build(cfg)
    trainer.callbacks.append(Record())
    trainer.fit(module, datamodule=datamodule)
    assert seen == validated_at
    last = validated_at[-1]
    (best,) = (tmp_path / "checkpoints").glob("best-*.ckpt")
    assert best.name.startswith(f"best-step{last:07d}-val")
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == last
    assert logged_steps(metric_rows(tmp_path), "val/loss")[-1] == last - 1  # Lightning logs the step index


@pytest.mark.slow  # 12-25 s of subprocesses on a Zen 3; make test-all runs it
def test_readme_fine_tune_command_validates_and_warns_of_its_warm_up(prepared_dir, tmp_path):
    # The documented fine-tune command with fewer steps than its 100 warm-up steps and the default interval of 1000.
    run = tmp_path / "run"
    done = cli("init_from=piano", f"data.dir={prepared_dir}", "schedule=cosine", "schedule.lr=3e-4",
               "schedule.warmup_steps=100", "trainer.max_steps=4", "data.seq_len=32", "data.batch_size=2",
               "data.num_workers=0", "threads=1", f"hydra.run.dir={run}")
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "warm-up" in line]
    assert warnings == ["musictx-train: warning: schedule.warmup_steps=100 >= trainer.max_steps=4: the run ends "
                        "inside its warm-up, the learning rate reaching 4% of its peak; lower schedule.warmup_steps"]
    best = re.search(r"best (\S+best-step0000004-val\d\.\d{4}\.ckpt) \(val/loss (\d\.\d{4})\)", done.stdout)
    assert best and Path(best.group(1)).is_file(), done.stdout[-2000:]
    rows = metric_rows(run)
    assert [float(r["val/loss"]) for r in rows if r["val/loss"]] == [pytest.approx(float(best.group(2)), abs=1e-4)]
    log = (run / "train.log").read_text()  # was empty: the run's lines and Lightning's are kept there
    for line in (warnings[0], "init_from=piano: shipped weights", best.group(0), "`Trainer.fit` stopped"):
        assert line in log, log


# ----- issue 18: dataset errors at train time are one line --------------------------------------------
def broken_copy(prepared_dir: Path, tmp_path: Path, how: str) -> Path:
    data = tmp_path / "data"
    if how == "missing dir":
        return data
    shutil.copytree(prepared_dir, data, ignore=shutil.ignore_patterns("midi"))
    if how == "missing split":
        (data / "validation.bin").unlink()
    else:  # a vocabulary smaller than the ids in the arrays
        EventTokenizer({"velocity_bins": 16}).save(data / "tokenizer.json")
    return data


@pytest.mark.parametrize(("how", "message"), [
    # each case a fresh train process (~13 s on a Zen 3): one in the default suite, `make test-all` runs all
    pytest.param("missing dir", r"data\.dir=.*data: no such folder; prepare one with musictx-prep",
                 marks=pytest.mark.slow),
    pytest.param("missing split", r"validation\.bin: missing; is .*data a directory written by musictx-prep",
                 marks=pytest.mark.slow),
    ("other vocabulary", r"train\.bin holds id \d+ but tokenizer\.json has vocab_size \d+"),
])
def test_dataset_errors_are_one_line(how, message, prepared_dir, tmp_path):
    data = broken_copy(prepared_dir, tmp_path, how)
    done = cli("experiment=tiny", f"data.dir={data}", "model=lstm", f"hydra.run.dir={tmp_path / 'run'}",
               "trainer.max_steps=2", "data.seq_len=32")
    error = one_line_error(done)
    assert re.search(message, error), done.stderr[-1000:]
    assert not (tmp_path / "run").exists()  # a refused run leaves no folder (issue 39), not even its train.log


# ----- issue 23: ckpt_path=last ---------------------------------------------------------------------
def test_ckpt_path_last_resumes_the_run_of_its_folder(prepared_dir, tmp_path, capsys):
    # The first run ends at step 6, between validations every 4 steps, so its last.ckpt comes from the
    # validation added at its end; resumed to 12 it must equal a straight run of 12 steps.
    common = ["model=lstm", "data.epoch_windows=20", "trainer.val_check_interval=4", "schedule=constant"]
    train(compose_train(prepared_dir, tmp_path / "straight", *common, "trainer.max_steps=12"))
    train(compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=6"))
    capsys.readouterr()
    train(compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=12", "ckpt_path=last"))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert f"ckpt_path=last: resuming from {last} at step 6" in capsys.readouterr().out
    straight, _, meta = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.ckpt")
    resumed, _, resumed_meta = load_checkpoint(last)
    assert meta["global_step"] == resumed_meta["global_step"] == 12
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=f"{name} differs after resume")
    rows = metric_rows(tmp_path / "run")
    assert logged_steps(rows, "train/loss") == list(range(12))  # each step once, numbered as straight
    assert logged_steps(rows, "val/loss") == [3, 5, 7, 11]
    assert logged_steps(rows, "lr-AdamW/decay") == list(range(12))


@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_ckpt_path_last_without_a_checkpoint_or_with_a_bad_one_is_one_line(prepared_dir, tmp_path):
    run = tmp_path / "run"
    # max_steps past the checkpoint's 2: at it, the resume trains nothing and says so before any net is built
    args = ["experiment=tiny", f"data.dir={prepared_dir}", "model=lstm", "data.seq_len=32", "trainer.max_steps=4",
            "model.net.d_model=32", "ckpt_path=last"]
    last = one_line_error(cli(*args, f"hydra.run.dir={run}"))
    assert last == (f"musictx-train: error: ckpt_path=last: no last.ckpt in {run}/checkpoints (this run's folder); "
                    "resume another run with ckpt_path=<run>/checkpoints/last.ckpt or hydra.run.dir=<run> "
                    "ckpt_path=last")
    assert not (run / "checkpoints").exists()
    # a real checkpoint, then the same file cut short (a copy killed half-way, a full disk)
    train(compose_train(prepared_dir, run, "model=lstm", "trainer.max_steps=2", "schedule.warmup_steps=1"))
    good = (run / "checkpoints" / "last.ckpt").read_bytes()
    wider = one_line_error(cli(*args, f"hydra.run.dir={run}", "model.net.d_model=48"))
    assert re.search(r"ckpt_path=.*last\.ckpt: its weights do not fit the LSTMBaseline of this config \(.*d_model=32 "
                     r"there, 48 here", wider), wider
    (run / "checkpoints" / "last.ckpt").write_bytes(good[: len(good) // 2])
    cut = one_line_error(cli(*args, f"hydra.run.dir={run}"))
    assert cut.startswith(f"musictx-train: error: ckpt_path=last: {run}/checkpoints/last.ckpt: not a usable "
                          "musictx checkpoint ("), cut
