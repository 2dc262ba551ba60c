"""DDP on CPU: two processes over gloo, launched by Lightning from the real ``musictx-train`` command.

One run (``trainer=ddp trainer.accelerator=cpu trainer.devices=2``, the Music Transformer through its
efficient kernel, dropout on) is probed on each rank by `tests.ddp_probe.DDPProbe`; the tests read what it
recorded: each rank's own training windows, its own dropout masks, exact validation, the distributed ops
of a training step, and a NaN on one rank stopping both ranks at the same step. The last test checks, in
one process, that the per-batch dropout seeds make a resumed run equal an uninterrupted one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from musictx.checkpoints.model_store import read_checkpoint
from musictx.commands.train_objects import build
from musictx.paths import CONF_DIR
from musictx.training.windows import RandomWindows

REPO = Path(__file__).resolve().parents[1]
DDP_CPU = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]  # docs/gpu.md's stand-in
SHRINK = ["experiment=tiny", "logger=none", "data.seq_len=64", "data.batch_size=4", "data.epoch_windows=64",
          "model.net.n_layers=1", "model.net.d_model=32", "model.net.n_heads=2", "model.net.d_ff=64",
          "model.net.dropout=0.1", "model.net.attn_block_size=16", "trainer.limit_val_batches=1.0",
          "++trainer.enable_progress_bar=false", "++trainer.enable_model_summary=false", "~callbacks.progress_bar"]
VAL_STEP, POISON_STEP, PROFILED = 5, 7, (2, 3, 4)  # steps 0 and 1 set DDP up (bucket rebuild broadcasts)


@pytest.fixture(scope="module")
def ddp_run(prepared_dir, tmp_path_factory):
    """(the finished process, {rank: record}, the run dir) of a 2-process run that a NaN on rank 1 stops."""
    out = tmp_path_factory.mktemp("ddp")
    probe = ["+callbacks.probe._target_=tests.ddp_probe.DDPProbe", f"+callbacks.probe.out_dir={out}",
             f"+callbacks.probe.poison_step={POISON_STEP}", f"+callbacks.probe.profile_steps={list(PROFILED)}"]
    cmd = [sys.executable, "-m", "musictx.commands.train", *DDP_CPU, "trainer.precision=32-true", *SHRINK,
           f"data.dir={prepared_dir}", f"hydra.run.dir={out / 'run'}", "trainer.max_steps=20",
           f"trainer.val_check_interval={VAL_STEP}", *probe]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    records = {r: torch.load(out / f"rank{r}.pt", weights_only=True) for r in (0, 1)
               if (out / f"rank{r}.pt").exists()}
    assert set(records) == {0, 1}, done.stderr[-4000:]
    return done, records, out / "run"


def compose_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*SHRINK, *overrides])


def test_each_rank_trains_on_its_own_windows(ddp_run, prepared_dir, tmp_path):
    _, records, _ = ddp_run
    dm = instantiate(compose_cfg(f"data.dir={prepared_dir}", f"paths.output_dir={tmp_path}").data)
    windows = RandomWindows(dm.dir, "train", dm.seq_len, dm.tokenizer, dm.seed, **dm.augment)
    seen = {0: set(), 1: set()}
    for rank, rec in records.items():
        assert rec["world_size"] == 2 and sorted(rec["batches"]) == list(range(POISON_STEP + 1))
        for step, x in rec["batches"].items():
            for j, row in enumerate(x):  # window i of rank r is g = i * world_size + r (one epoch here)
                g = (step * dm.batch_size + j) * 2 + rank
                assert torch.equal(row, torch.from_numpy(windows.window(g)[:-1])), (rank, step, j)
                seen[rank].add(tuple(row.tolist()))
    assert len(seen[0]) == len(seen[1]) == (POISON_STEP + 1) * dm.batch_size and not seen[0] & seen[1]


def test_dropout_masks_differ_between_ranks(ddp_run):
    _, records, _ = ddp_run
    for step in (0, 1):
        masks = [records[r]["masks"][step] for r in (0, 1)]
        assert all(0.05 < m.float().mean() < 0.15 for m in masks)  # p = 0.1
        agree = (masks[0] == masks[1]).float().mean()
        assert not torch.equal(*masks) and agree < 0.9, f"step {step}: the ranks drop the same units"
    assert not torch.equal(records[0]["masks"][0], records[0]["masks"][1])  # fresh masks every step


def test_only_the_gradient_all_reduce_in_a_training_step(ddp_run):
    """No barrier, no reduce of the loss: a steady training step's only collective is DDP's gradient
    all-reduce, one bucket for this small net."""
    _, records, _ = ddp_run
    for rank, rec in records.items():
        assert sorted(rec["dist_ops"]) == list(PROFILED)
        for step, ops in rec["dist_ops"].items():
            assert ops == {"c10d::allreduce_": 1, "gloo:all_reduce": 1}, (rank, step, ops)


def test_validation_equals_one_process_over_the_same_windows(ddp_run, prepared_dir, tmp_path):
    _, records, run_dir = ddp_run
    (v0,), (v1,) = records[0]["val"], records[1]["val"]
    assert v0["step"] == v1["step"] == VAL_STEP and v0["logged"] == v1["logged"]
    last = run_dir / "checkpoints" / "last.ckpt"
    assert read_checkpoint(last)["global_step"] == VAL_STEP
    cfg = compose_cfg(f"data.dir={prepared_dir}", f"paths.output_dir={tmp_path}", "trainer.devices=1")
    datamodule, module, trainer = build(cfg)
    (single,) = trainer.validate(module, datamodule=datamodule, ckpt_path=str(last), verbose=False)
    local = torch.tensor(v0["local_sums"]) + torch.tensor(v1["local_sums"])  # (nll, correct, targets)
    assert local[2] == module._eval_sums[2] and 0 < v0["local_sums"][2] and 0 < v1["local_sums"][2]
    torch.testing.assert_close(local.double(), module._eval_sums.cpu(), rtol=1e-5, atol=0)
    assert v0["logged"]["val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)


def test_nan_on_one_rank_stops_every_rank_at_that_step(ddp_run):
    done, records, _ = ddp_run
    assert done.returncode != 0
    assert records[1]["error"].startswith(f"NonFiniteLossError: training loss is nan at step {POISON_STEP} ")
    assert records[0]["error"].startswith(f"NonFiniteLossError: gradient norm is nan at step {POISON_STEP} ")
    for rec in records.values():  # neither rank went on to another step (and the run ended: no hang)
        assert max(rec["batches"]) == POISON_STEP and "last finite losses: 5." in rec["error"]


def test_resume_with_dropout_is_bit_exact(prepared_dir, tmp_path):
    """Dropout masks are drawn from a seed per (seed, rank, step, batch), as the windows are per window
    number: 4 steps + resume to 8 equal 8 steps straight, dropout (the net's and the kernel's) on."""
    common = [f"data.dir={prepared_dir}", "trainer.val_check_interval=4", "trainer.devices=1"]

    def fit(out, *overrides):
        cfg = compose_cfg(*common, f"paths.output_dir={out}", *overrides)
        L.seed_everything(cfg.seed)
        datamodule, module, trainer = build(cfg)
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        return module

    straight = fit(tmp_path / "straight", "trainer.max_steps=8")
    fit(tmp_path / "run", "trainer.max_steps=4")
    resumed = fit(tmp_path / "run", "trainer.max_steps=8", f"ckpt_path={tmp_path / 'run/checkpoints/last.ckpt'}")
    for (name, p1), p2 in zip(straight.net.named_parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(p1, p2), f"{name} differs after resume"
