"""Fixtures for the generation tests: tiny random nets, a seed MIDI file, and a checkpoint trained for a few
steps with the real configs and the real Lightning Trainer.

A test module imports the ``fixture_*`` functions; pytest knows them by their ``name`` (so that a test's
argument does not shadow the imported function)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir

from musictx.io.tokenizer import EventTokenizer
from musictx.models import build_model
from musictx.paths import CONF_DIR

from .helpers import write_random_midi

VOCAB = EventTokenizer().vocab_size
TINY = {
    "music_transformer": dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0, max_rel_dist=8),
    "transformer": dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0),
    "lstm": dict(d_model=32, hidden_size=32, n_layers=2, dropout=0.0),
}
CKPT_CONTEXT = 32  # max_seq_len of the trained checkpoint: generating more exercises the sliding window


def tiny_net(name: str, max_seq_len: int = 16, seed: int = 0) -> torch.nn.Module:
    """A randomly initialised net of `musictx.models`, its output layer scaled so that logits spread over a
    few nats (as a trained net's do) rather than sitting near uniform, where float rounding could tie."""
    torch.manual_seed(seed)
    extra = {} if name == "lstm" else {"max_seq_len": max_seq_len}
    net = build_model(name, VOCAB, **TINY[name], **extra).eval()
    with torch.no_grad():
        net.head.weight.mul_(30.0 if name != "lstm" else 10.0)
    return net


@pytest.fixture(name="seed_midi")
def fixture_seed_midi(tmp_path) -> Path:
    """A 6-second random piano performance with sustain pedal."""
    return write_random_midi(tmp_path / "seed.mid", seed=3, n_notes=30, seconds=6.0)


@pytest.fixture(name="tiny_checkpoint", scope="session")
def fixture_tiny_checkpoint(prepared_dir, tmp_path_factory) -> Path:
    """last.ckpt of a 1-layer Music Transformer (context 32) trained 4 steps with conf/train.yaml."""
    return train_tiny(prepared_dir, tmp_path_factory.mktemp("gen_train"), seq_len=CKPT_CONTEXT, steps=4, val_every=2)


def train_tiny(data_dir, out: Path, seq_len: int, steps: int, val_every: int) -> Path:
    """last.ckpt of a 1-layer Music Transformer trained ``steps`` steps on ``data_dir`` with conf/train.yaml
    and the real Lightning Trainer."""
    overrides = ["experiment=tiny", f"data.dir={data_dir}", f"paths.output_dir={out}", "logger=none",
                 f"data.seq_len={seq_len}", "data.batch_size=4", "data.num_workers=0", "model.net.n_layers=1",
                 "model.net.d_model=32", "model.net.n_heads=2", "model.net.d_ff=64", f"trainer.max_steps={steps}",
                 f"trainer.val_check_interval={val_every}", "trainer.limit_val_batches=1",
                 "++trainer.enable_progress_bar=false", "++trainer.enable_model_summary=false",
                 "~callbacks.progress_bar"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    from musictx.commands.train_objects import build

    L.seed_everything(cfg.seed)
    datamodule, module, trainer = build(cfg)
    trainer.fit(module, datamodule=datamodule)
    ckpt = out / "checkpoints" / "last.ckpt"
    assert ckpt.is_file(), f"training wrote no {ckpt}"
    return ckpt
