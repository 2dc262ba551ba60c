"""scripts/gpu_step.py at a CPU size: each GPU step (tests, train, export) runs here as it will in one call of
the lent machine, and a second train call resumes where the first stopped (its wall-time limit is per call,
though Lightning's timer counts over the whole run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from musictx.checkpoints.model_store import load_model, read_checkpoint

REPO = Path(__file__).resolve().parents[1]


def step(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / "gpu_step.py"), *args]
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def carried(prepared_dir, tmp_path) -> Path:
    """The layout the GPU machine gets: a folder with piano/ and folk/ prepared datasets."""
    root = tmp_path / "carry"
    root.mkdir()
    for name in ("piano", "folk"):
        (root / name).symlink_to(prepared_dir, target_is_directory=True)
    return root


@pytest.mark.slow  # three fresh processes that import Lightning (~45 s); make test-all runs it
def test_train_calls_resume_and_export_writes_loadable_shards(carried, tmp_path):
    run, steps = tmp_path / "run", []
    for call in range(2):
        out = tmp_path / f"out{call}"
        done = step("train", "--out", str(out), "--run-dir", str(run), "--data", str(carried), "--minutes", "0.1",
                    "--device", "cpu", "--tiny", "trainer.max_steps=100000")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert (out / "metrics.csv").stat().st_size > 0 and (out / "train.log").exists()
        steps.append(read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"])
        assert ("ckpt_path=last" in done.stdout) == (call == 1)
    assert 0 < steps[0] < steps[1]  # the second call went on from the first's last.ckpt, for its own seconds
    done = step("export", "--out", str(tmp_path / "back"), "--run-dir", str(run), "--max-shard-mb", "0.02")
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "back" / "model"
    files = json.loads((folder / "config.json").read_text())["weights_files"]
    assert len(files) > 1 and all((folder / f).is_file() for f in files)
    _, _, meta = load_model(str(folder))
    assert meta["global_step"] == steps[1] and meta["model"]["config"]["n_layers"] == 1


def test_the_tests_step_reports_the_gpu_tests(tmp_path):
    done = step("tests", "--out", str(tmp_path), timeout=600)
    report = (tmp_path / "gpu_tests.txt").read_text()
    assert "test_cuda.py" in report and ("skipped" in report or "passed" in report), report[-2000:]
    assert done.returncode == 0, report[-2000:]


def test_the_kernels_step_writes_the_table_and_reports_what_cannot_run(tmp_path):
    done = step("kernels", "--out", str(tmp_path), "--device", "cpu", "--tiny")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {(r["impl"], r["L"]): r for r in json.loads((tmp_path / "kernels.json").read_text())["rows"]}
    # both lengths exceed the efficient kernel's query block (64), so its rows time the blocked kernel itself
    assert set(rows) == {(i, n) for i in ("triton", "efficient", "skew", "sdpa") for n in (128, 256)}
    for n in (128, 256):
        assert rows[("sdpa", n)]["ms_x"] == 1.0 and rows[("efficient", n)]["ms"] > 0
        assert rows[("efficient", n)]["peak_mib"] > 0 and rows[("skew", n)]["peak_mib"] > 0
        assert "runs on CUDA tensors" in rows[("triton", n)]["error"]  # a CPU cannot run it: said in its row
    table = (tmp_path / "kernels.md").read_text()
    assert "| 256 | efficient |" in table and "logical CPUs" in table  # the header names the device
