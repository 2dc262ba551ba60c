"""Training on CPU with the real configs, shrunk: every model fits, checkpoints reload standalone, resume
continues where it stopped, loggers, schedules, and the non-finite loss error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch import nn

from musictx.checkpoints.model_store import read_checkpoint
from musictx.commands.train_objects import build, instantiate_dict
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.paths import CONF_DIR
from musictx.training.lit_module import (
    MusicLitModule,
    NonFiniteLossError,
    cosine_schedule,
    load_checkpoint,
    make_schedule,
    paper_schedule,
)

MODELS = ("music_transformer", "transformer", "lstm")
# Small enough for a few seconds per run on one CPU core, for all three models.
SHRINK = ["data.seq_len=32", "data.batch_size=4", "data.num_workers=0", "model.net.n_layers=1",
          "model.net.d_model=32", "trainer.max_steps=6", "trainer.val_check_interval=3",
          "trainer.limit_val_batches=2", "trainer.log_every_n_steps=1", "++trainer.enable_progress_bar=false",
          "++trainer.enable_model_summary=false", "~callbacks.progress_bar"]


def compose_train(data_dir: Path, out_dir: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=["experiment=tiny", f"data.dir={data_dir}",
                                           f"paths.output_dir={out_dir}", *SHRINK, *overrides])


def fit(cfg) -> tuple[MusicLitModule, L.Trainer]:
    L.seed_everything(cfg.seed)
    datamodule, module, trainer = build(cfg)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    return module, trainer


@pytest.mark.parametrize("model", MODELS)
def test_each_model_trains_and_reloads_standalone(model, prepared_dir, tmp_path):
    extra = ["model.net.n_heads=2", "model.net.d_ff=64"] if model != "lstm" else []
    module, trainer = fit(compose_train(prepared_dir, tmp_path, f"model={model}", *extra))
    assert trainer.global_step == 6
    ckpts = tmp_path / "checkpoints"
    assert (ckpts / "last.ckpt").exists() and len(list(ckpts.glob("best-*.ckpt"))) == 1
    assert "val/loss" in trainer.callback_metrics and torch.isfinite(trainer.callback_metrics["val/loss"])
    assert (tmp_path / "csv" / "metrics.csv").exists()

    net, tok, meta = load_checkpoint(ckpts / "last.ckpt")
    assert type(net) is type(module.net) and meta["global_step"] == 6
    assert tok == module.tokenizer and meta["model"]["config"]["max_seq_len" if model != "lstm" else "n_layers"]
    ids = torch.randint(0, tok.vocab_size - 2, (2, 32))
    module.net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(ids), module.net(ids))


def batch_recorder() -> tuple[L.Callback, list]:
    seen = []

    class Record(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((trainer.global_step, batch[0].clone()))

    return Record(), seen


def test_resume_continues_step_data_and_weights(prepared_dir, tmp_path):
    # Epochs of 5 batches: the step-8 checkpoint is in the middle of the second epoch. No dropout, so
    # 8 steps + resume to 12 must equal 12 steps straight.
    common = ["model=lstm", "data.epoch_windows=20", "trainer.val_check_interval=4", "model.net.dropout=0.0"]
    straight_cfg = compose_train(prepared_dir, tmp_path / "straight", *common, "trainer.max_steps=12")
    first_cfg = compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=8")
    straight, _ = fit_recorded(straight_cfg)
    first, _ = fit_recorded(first_cfg)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert read_checkpoint(last)["MusicDataModule"] == {
        "epoch": 1, "batches_done": 3, "seed": first_cfg.seed, "world_size": 1}

    resumed_cfg = compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=12",
                                f"ckpt_path={last}")
    resumed, trainer = fit_recorded(resumed_cfg)
    assert trainer.global_step == 12
    assert [s for s, _ in resumed[1]] == list(range(8, 12))
    for (s1, x1), (s2, x2) in zip(straight[1][8:], resumed[1], strict=True):
        assert s1 == s2 and torch.equal(x1, x2), f"step {s1}: resumed run sees other data"
    for (name, p1), p2 in zip(straight[0].net.named_parameters(), resumed[0].net.parameters(), strict=True):
        torch.testing.assert_close(p1, p2, msg=f"{name} differs after resume")


def fit_recorded(cfg):
    L.seed_everything(cfg.seed)
    datamodule, module, trainer = build(cfg)
    cb, seen = batch_recorder()
    trainer.callbacks.append(cb)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    return (module, seen), trainer


def test_wandb_offline_writes_a_run(prepared_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb_dir").mkdir()
    cfg = compose_train(prepared_dir, tmp_path / "out", "model=lstm", "logger=wandb", "trainer.max_steps=3")
    fit(cfg)
    import wandb

    wandb.finish()
    runs = list((tmp_path / "wandb_dir").rglob("offline-run-*"))
    assert runs, f"no offline run under {tmp_path / 'wandb_dir'}"
    assert any(p.suffix == ".wandb" for p in runs[0].rglob("*"))


def test_tensorboard_logger(prepared_dir, tmp_path):
    pytest.importorskip("tensorboard")
    fit(compose_train(prepared_dir, tmp_path, "model=lstm", "logger=tensorboard", "trainer.max_steps=3"))
    assert list((tmp_path / "tensorboard").rglob("events.out.tfevents.*"))


def test_config_groups_compose(prepared_dir, tmp_path):
    """Every option composes; the GPU configs are checked as configs only (no GPU here)."""
    for model in (*MODELS, "music_transformer_small"):
        cfg = compose_train(prepared_dir, tmp_path, f"model={model}")
        assert cfg.model.net.max_seq_len == 32 if model != "lstm" else True
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        base = compose("train", overrides=[f"paths.output_dir={tmp_path}"])
        gpu = compose("train", overrides=["trainer=gpu", "model.compile=true", f"paths.output_dir={tmp_path}"])
        ddp = compose("train", overrides=["trainer=ddp", "trainer.num_nodes=2", f"paths.output_dir={tmp_path}"])
        none = compose("train", overrides=["logger=none", f"paths.output_dir={tmp_path}"])
    assert base.model.net.max_seq_len == base.data.seq_len == 2048 and base.data.dir == "data/bach"
    assert (base.model.net.n_layers, base.model.net.d_model, base.model.net.n_heads, base.model.net.d_ff) == \
        (6, 512, 8, 1024)
    assert gpu.trainer.precision == "bf16-mixed" and gpu.trainer.accelerator == "gpu" and gpu.model.compile
    assert ddp.trainer.strategy == "ddp" and ddp.trainer.num_nodes == 2
    assert instantiate_dict(none.get("logger")) == []
    assert [type(c).__name__ for c in instantiate_dict(none.callbacks)] == \
        ["ModelCheckpoint", "LastCheckpoint", "TQDMProgressBar", "RecallProbe"]
    OmegaConf.resolve(base)  # no dangling interpolation (paths are set)


@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_entry_point_honours_hydra_run_dir(prepared_dir, tmp_path):
    exe = Path(sys.executable).parent / "musictx-train"
    cmd = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "musictx.commands.train"]),
           "experiment=tiny", f"data.dir={prepared_dir}", "model=lstm", f"hydra.run.dir={tmp_path}",
           "data.seq_len=32", "trainer.max_steps=4", "trainer.val_check_interval=2", "model.net.d_model=32"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    assert (tmp_path / ".hydra" / "config.yaml").exists()
    assert f"checkpoints in {tmp_path / 'checkpoints'}" in done.stdout
    # Lightning's lines that say nothing to a musictx user: an advert, a save-time default, its own deprecation
    said = done.stdout + done.stderr + (tmp_path / "train.log").read_text()
    for noise in ("litlogger", "weights_only", "LeafSpec"):
        assert noise not in said


@pytest.mark.slow  # three training runs in subprocesses; each model trains by default in its own test
def test_multirun_over_the_three_models(prepared_dir, tmp_path):
    cmd = [sys.executable, "-m", "musictx.commands.train", "-m", "model=music_transformer,transformer,lstm",
           "experiment=tiny", f"data.dir={prepared_dir}", f"hydra.sweep.dir={tmp_path}", "data.seq_len=32",
           "trainer.max_steps=4", "trainer.val_check_interval=2", "model.net.d_model=32"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(tmp_path.glob("*/checkpoints/last.ckpt"))) == 3


# ----- LightningModule pieces, without the configs ------------------------------------------------
class ConstantNet(nn.Module):
    """Logits from one embedding; ``poison_at`` makes them NaN from that call on."""

    def __init__(self, vocab_size: int, poison_at: int = -1):
        super().__init__()
        self.config = {"vocab_size": vocab_size, "poison_at": poison_at}
        self.emb = nn.Embedding(vocab_size, vocab_size)
        self.calls = 0

    def forward(self, ids):
        self.calls += 1
        out = self.emb(ids)
        return out * float("nan") if self.calls == self.config["poison_at"] else out


def test_paper_and_cosine_schedules():
    # Noam: linear up to the peak at warmup, then step^-0.5.
    peak = 2.0 * 8000**-0.5 * 512**-0.5
    assert paper_schedule(8000, d_model=512) == pytest.approx(peak)
    assert paper_schedule(4000, d_model=512) == pytest.approx(peak / 2)
    assert paper_schedule(32000, d_model=512) == pytest.approx(peak / 2)
    assert paper_schedule(1, d_model=512) == pytest.approx(peak / 8000)
    assert cosine_schedule(0, 10, 110) == 0.0 and cosine_schedule(10, 10, 110) == 1.0
    assert cosine_schedule(60, 10, 110, min_ratio=0.1) == pytest.approx(0.55)
    assert cosine_schedule(110, 10, 110, min_ratio=0.1) == cosine_schedule(500, 10, 110, min_ratio=0.1) == 0.1
    with pytest.raises(ValueError, match="total_steps"):
        make_schedule("cosine", warmup_steps=10, total_steps=-1)
    # Through the module: update k (from 1) uses schedule(k); base lr 1 gives the paper's lr itself.
    tok = EventTokenizer()
    module = MusicLitModule(ConstantNet(tok.vocab_size), tok.to_dict(),
                            optimizer=lambda groups: torch.optim.AdamW(groups, lr=1.0),
                            scheduler={"name": "paper", "lr": 1.0, "warmup_steps": 8000, "d_model": 512})
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    lrs = []
    for _ in range(3):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([paper_schedule(k, 512) for k in (1, 2, 3)])


def test_non_finite_loss_stops_with_step_and_recent_losses(prepared_dir, tmp_path):
    from musictx.training.data import MusicDataModule

    tok = EventTokenizer()
    module = MusicLitModule(ConstantNet(tok.vocab_size, poison_at=4), tok.to_dict())
    trainer = L.Trainer(accelerator="cpu", max_steps=10, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0, default_root_dir=tmp_path)
    dm = MusicDataModule(prepared_dir, seq_len=32, batch_size=2, num_workers=0)
    with pytest.raises(NonFiniteLossError, match=r"nan at step 3 .*last finite losses: \d+\.\d+, \d"):
        trainer.fit(module, datamodule=dm)


def test_pad_targets_are_left_out_of_the_loss():
    tok = EventTokenizer()
    module = MusicLitModule(ConstantNet(tok.vocab_size), tok.to_dict())
    x = torch.randint(0, 300, (2, 8))
    y = torch.randint(0, 300, (2, 8))
    nll, _, count = module.loss_terms(x, y)
    y_pad = y.clone()
    y_pad[:, 5:] = tok.pad_id
    nll_pad, _, count_pad = module.loss_terms(x, y_pad)
    logp = torch.log_softmax(module.net(x).float(), -1).gather(-1, y[..., None])[..., 0]
    assert count == 16 and count_pad == 10
    torch.testing.assert_close(nll_pad, -logp[:, :5].sum())
    all_pad = torch.full_like(y, tok.pad_id)
    assert module.loss_terms(x, all_pad)[2] == 0


def test_tokenizer_mismatch_on_resume_and_clean_compiled_keys():
    tok = EventTokenizer()
    module = MusicLitModule(ConstantNet(tok.vocab_size), tok.to_dict(), compile=True,
                            compile_kwargs={"backend": "eager"})
    other = EventTokenizer({"velocity_bins": 16})
    with pytest.raises(TokenizerMismatchError, match="velocity_bins"):
        module.on_load_checkpoint({"musictx": {"tokenizer": other.to_dict()}})
    module.configure_model()
    module.configure_model()  # idempotent
    assert module.net._compiled_call_impl is not None
    assert list(module.state_dict()) == ["net.emb.weight"]


def test_last_checkpoint_follows_every_validation_not_the_best(prepared_dir, tmp_path):
    # mode=max: the "best" stays at the first validation while the loss falls; Lightning's own save_last
    # followed that top-k save and left last.ckpt behind, LastCheckpoint must not.
    cfg = compose_train(prepared_dir, tmp_path, "callbacks.model_checkpoint.mode=max", "trainer.max_steps=6",
                        "trainer.val_check_interval=2")
    fit(cfg)
    ckpts = tmp_path / "checkpoints"
    (best,) = ckpts.glob("best-*.ckpt")
    assert read_checkpoint(best)["global_step"] == 2
    assert read_checkpoint(ckpts / "last.ckpt")["global_step"] == 6
    assert sorted(p.name for p in ckpts.iterdir()) == sorted([best.name, "last.ckpt"])  # no temporary files left


@pytest.mark.slow  # 12-25 s of subprocesses on a Zen 3; make test-all runs it
def test_sigterm_saves_a_checkpoint_and_exits_non_zero(prepared_dir, tmp_path):
    import re
    import signal
    import time

    log, last = tmp_path / "train.err", tmp_path / "run" / "checkpoints" / "last.ckpt"
    cmd = [sys.executable, "-m", "musictx.commands.train", "experiment=tiny", f"data.dir={prepared_dir}",
           f"hydra.run.dir={tmp_path / 'run'}", "logger=none", *SHRINK, "trainer.max_steps=100000",
           "trainer.val_check_interval=5"]
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "OMP_NUM_THREADS": "1"})
        deadline = time.monotonic() + 120
        while not last.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(0.5)  # some steps past the step-5 save
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    message = re.search(r"stopped by SIGTERM at step (\d+)", log.read_text())
    assert code != 0 and message, log.read_text()[-2000:]
    assert read_checkpoint(last)["global_step"] == int(message.group(1)) >= 5


# ----- resume keeps the history; bad resume files and data options: one clear line --------------------
def test_resume_in_the_same_folder_keeps_metrics_and_removes_dead_temporaries(prepared_dir, tmp_path):
    import csv
    import socket

    common = ["model=lstm", "data.epoch_windows=20", "trainer.val_check_interval=4"]
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "300"])
    host = socket.gethostname()
    try:
        stale = [f".last.ckpt.tmp-{dead.pid}", f".last.ckpt.tmp-{host}-{dead.pid}"]
        kept = [f".last.ckpt.tmp-{host}-{alive.pid}", f".last.ckpt.tmp-other-host-{dead.pid}", ".best.tmp-1"]
        for name in stale + kept:
            (ckpts / name).write_bytes(b"partial checkpoint")
        fit(compose_train(prepared_dir, tmp_path, *common, "trainer.max_steps=8"))
        names = {p.name for p in ckpts.iterdir()}
        assert not names & set(stale) and set(kept) <= names
    finally:
        alive.kill()
        alive.wait()
    fit(compose_train(prepared_dir, tmp_path, *common, "trainer.max_steps=12", f"ckpt_path={ckpts / 'last.ckpt'}"))
    with open(tmp_path / "csv" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    train_steps = [int(r["step"]) for r in rows if r["train/loss"]]
    assert train_steps == list(range(12)), "steps before the resume lost, or steps listed twice"
    val_steps = [int(r["step"]) for r in rows if r["val/loss"]]
    assert min(val_steps) < 8 <= max(val_steps) and len(val_steps) == len(set(val_steps)), val_steps


@pytest.mark.parametrize(("override", "message"), [
    ("ckpt_path={bad}", r"ckpt_path=.*bad\.ckpt: not a usable musictx checkpoint"),
    pytest.param("ckpt_path={missing}", r"ckpt_path=.*missing\.ckpt: no such file", marks=pytest.mark.slow),
    pytest.param("data.seq_len=0", r"data\.seq_len must be a whole number >= 1, got 0", marks=pytest.mark.slow),
    pytest.param("data.batch_size=0", r"data\.batch_size must be a whole number >= 1, got 0", marks=pytest.mark.slow),
])
def test_console_script_refuses_bad_resume_files_and_sizes(override, message, prepared_dir, tmp_path):
    (tmp_path / "bad.ckpt").write_bytes(b"PK\x03\x04 not really a checkpoint")
    override = override.format(bad=tmp_path / "bad.ckpt", missing=tmp_path / "missing.ckpt")
    cmd = [sys.executable, "-m", "musictx.commands.train", "experiment=tiny", f"data.dir={prepared_dir}", "model=lstm",
           f"hydra.run.dir={tmp_path / 'run'}", "trainer.max_steps=2", override]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("musictx-train: error: ") and re.search(message, last), last
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_the_evaluation_after_training_is_checked_before_the_training(prepared_dir, tmp_path):
    """experiment=compare with windows shorter than its evaluate.stride: refused once the net is built, before
    the fit (it was a raw "need ... stride <= context" line after every model had trained)."""
    cmd = [sys.executable, "-m", "musictx.commands.train", "experiment=tiny", f"data.dir={prepared_dir}", "model=lstm",
           f"hydra.run.dir={tmp_path / 'run'}", "trainer.max_steps=2", "data.seq_len=32", "+evaluate={stride:999}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last == ("musictx-train: error: evaluate.stride=999: more than the 32 tokens of "
                                             "each window's context (the model's own); give evaluate.stride=32 or "
                                             "less, or leave it unset (16)"), done.stderr[-3000:]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_step_count_of_the_wrong_kind_is_refused_by_its_key():
    from musictx.training.run import TrainPlan

    base = {"seed": 0, "ckpt_dir": "c", "output_dir": "o", "data_dir": "d"}
    assert TrainPlan.from_values({**base, "max_steps": 20}).max_steps == 20
    for key, value, said in (("max_steps", "abc", "trainer.max_steps must be a whole number, got 'abc'"),
                             ("warmup_steps", 2.5, "schedule.warmup_steps must be a whole number, got 2.5"),
                             ("threads", True, "threads must be a whole number, got True")):
        with pytest.raises(ValueError, match=re.escape(said)):
            TrainPlan.from_values({**base, key: value})
