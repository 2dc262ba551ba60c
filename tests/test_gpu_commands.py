"""The CPU stand-ins of the documented GPU commands, as docs/gpu.md lists them, each run once through the real
``musictx-train`` console entry at a tiny size (the tiny prepared dataset, small nets, 2 steps).

The commands are read from docs/gpu.md, so the page and this test cannot drift apart; only sizes are
appended (later values win in Hydra), the precision, strategy and compile settings stay as documented.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from musictx.checkpoints.model_store import read_checkpoint

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "gpu.md"
MARKER = "<!-- cpu-stand-ins"
# Valid for every model (the LSTM has no heads or attention block), so they fit the -m sweep over all three.
TINY = ["data.seq_len=64", "data.batch_size=2", "data.num_workers=0", "model.net.n_layers=1", "model.net.d_model=32",
        "trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.limit_val_batches=1",
        "trainer.num_sanity_val_steps=0", "schedule.warmup_steps=1", "logger=none", "~callbacks.progress_bar",
        "++trainer.enable_progress_bar=false", "++trainer.enable_model_summary=false"]
COMPARE_TINY = ["evaluate.stride=32", "evaluate.batch_size=2", "evaluate.continuation.num_seeds=1",
                "evaluate.continuation.seed_seconds=1", "evaluate.continuation.length_seconds=1"]


def stand_in_commands() -> list[list[str]]:
    """The argument lists of the ``musictx-train`` lines in the code block after the marker of docs/gpu.md."""
    text = DOC.read_text()
    block = text[text.index(MARKER):].split("```")[1]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("musictx-train")]


def test_the_page_lists_the_four_stand_ins():
    names = [" ".join(args) for args in stand_in_commands()]
    assert len(names) == 4 and names[0].startswith("trainer.precision=bf16-mixed")
    assert any("model.compile=true" in n for n in names) and any("trainer=ddp" in n for n in names)
    assert any(n.startswith("-m experiment=compare") and "data.seq_len=2048" in n for n in names)


# the bf16-mixed command runs in the default suite; the compiled, DDP and comparison ones (minutes on 2 cores,
# each also covered in-process by test_gpu_path.py and test_ddp.py) are slow
@pytest.mark.parametrize("args", [pytest.param(args, marks=[] if k == 0 else pytest.mark.slow)
                                  for k, args in enumerate(stand_in_commands())],
                         ids=lambda args: "_".join(args[:2]))
def test_stand_in_command_runs_at_tiny_size(args, prepared_dir, tmp_path):
    sweep = args[0] == "-m"
    where = [f"hydra.sweep.dir={tmp_path}"] if sweep else [f"hydra.run.dir={tmp_path}"]
    extra = COMPARE_TINY if sweep else ["model.net.attn_block_size=16"]  # windows of 64 > block: the kernel runs
    cmd = [sys.executable, "-m", "musictx.commands.train", *args, f"data.dir={prepared_dir}", *where, *TINY, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = sorted(tmp_path.glob("*/checkpoints/last.ckpt")) if sweep else [tmp_path / "checkpoints" / "last.ckpt"]
    assert len(runs) == (3 if sweep else 1)
    states = [read_checkpoint(ckpt) for ckpt in runs]
    assert all(state["global_step"] == 2 for state in states)
    hparams = states[0]["hyper_parameters"]
    assert "Using bfloat16 Automatic Mixed Precision" in done.stderr  # every stand-in runs bf16-mixed
    assert hparams["compile"] == ("model.compile=true" in args)
    if "trainer=ddp" in args:
        assert "distributed_backend=gloo" in done.stderr and "Starting with 2 processes" in done.stderr
    if sweep:  # the paper schedule as the paper has it, each model evaluated, the report written
        assert all(s["hyper_parameters"]["scheduler"] == {**hparams["scheduler"], "name": "paper", "lr": 1.0}
                   for s in states) and "total_steps" not in hparams["scheduler"]
        assert len(list(tmp_path.glob("*/metrics.json"))) == 3 and (tmp_path / "compare.md").is_file()
