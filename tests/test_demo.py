"""``make demo`` (scripts/demo.sh) run as written, in a copy of its folder: prepare, train, continue a held-out
chorale. Its third step had read the test split's first name with ``head``, JSON quotes and all, and Hydra
refused the seed; a second run was refused by the training's run-folder check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # two runs of the whole demo, shrunk: ~25 s
def test_the_demo_runs_end_to_end_twice_with_a_few_steps(tmp_path):
    pytest.importorskip("music21", reason="make demo needs the corpus extra (music21) for the Bach chorales")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the script runs .venv/bin/... beside scripts/
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DEMO_CHORALES": "40"}
    cmd = ["bash", str(tmp_path / "scripts" / "demo.sh"), "trainer.max_steps=2", "trainer.val_check_interval=2"]
    for _ in range(2):  # the second replaces the demo's own run instead of refusing its folder
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    said = next(line for line in done.stdout.splitlines() if line.startswith("Done. Seed: "))
    seed = said.removeprefix("Done. Seed: ")
    assert '"' not in seed and (tmp_path / seed).is_file()
    out = tmp_path / "outputs" / "demo" / "generate"
    assert (out / "sample_00.mid").stat().st_size > 100 and (out / "sample_01.mid").exists()
    assert "overwrite=true: removed the old run's checkpoints" in done.stdout + done.stderr
