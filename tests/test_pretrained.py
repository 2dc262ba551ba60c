"""The shipped piano model: loads from the package without unpickling anything, gives the NLL its card
states on a fixed sample of real performances, is the default of musictx-generate, and fine-tunes."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import lightning as L
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

import musictx
from musictx.checkpoints.model_store import shipped_models
from musictx.evaluation.spot_check import sample_nll
from musictx.io.token_store import write_split
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.models import MusicTransformer
from musictx.paths import CONF_DIR, PRETRAINED_DIR

from .helpers import PIANO_DIR, needs_shared, write_random_midi

pytestmark = pytest.mark.skipif("piano" not in shipped_models(), reason="no shipped piano model in this checkout")
CARD = PRETRAINED_DIR / "piano"
MOTIF = PRETRAINED_DIR.parent / "assets" / "motif.mid"


def test_loads_from_the_package_without_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("loading the shipped model unpickled something")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    net, tok = musictx.load_pretrained("piano")
    assert isinstance(net, MusicTransformer) and not net.training
    assert isinstance(tok, EventTokenizer) and net.vocab_size == tok.vocab_size == 390
    assert net.max_seq_len >= 1024 and (CARD / "README.md").is_file()
    assert (CARD / "model.safetensors").stat().st_size < 25e6


@needs_shared
def test_spot_check_nll_matches_the_card():
    info = json.loads((CARD / "config.json").read_text())["info"]["spot_check"]
    net, tok = musictx.load_pretrained("piano")
    got = sample_nll(net, tok, [PIANO_DIR / f for f in info["files"]], info["tokens_per_file"])
    assert got["tokens"] == info["tokens"]
    assert got["nll"] == pytest.approx(info["nll"], abs=0.01)
    assert got["nll"] < 3.2  # far below the uniform log(390) = 5.97


def test_generate_picks_the_shipped_model_that_fits_the_seed(tmp_path):
    """The bundled motif (on a 16th grid) goes to pop when it is installed; a rubato performance to piano."""
    rubato = write_random_midi(tmp_path / "rubato.mid", seed=3, n_notes=30, seconds=6.0)
    expected = [(MOTIF, "pop" if "pop" in shipped_models() else "piano"), (rubato, "piano")]
    for k, (seed, name) in enumerate(expected):
        out = tmp_path / f"out{k}"
        done = subprocess.run([sys.executable, "-m", "musictx.commands.generate", f"seed_midi={seed}",
                               "length_seconds=4", "num_samples=1", "audio=false", f"output_dir={out}",
                               f"hydra.run.dir={out}"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads((out / "generation.json").read_text())
        assert record["model_source"] == "shipped" and record["checkpoint"] == name
        assert f"model: {name} (" in done.stdout
        assert (out / "sample_00.mid").stat().st_size > 0 and record["samples"][0]["notes"] > 0


def _real_dataset(out, tok: EventTokenizer):
    """A prepared dataset of a few real performances (train and validation share them: a loss check)."""
    out.mkdir(parents=True)
    files = sorted(PIANO_DIR.rglob("*.mid"))[:: 97][:4]
    pieces = [np.append(tok.encode(f)[:3000], tok.eos_id) for f in files]
    for split in ("train", "validation", "test"):
        write_split(out, split, pieces, [f.name for f in files])
    tok.save(out / "tokenizer.json")
    (out / "manifest.json").write_text(json.dumps({"tokenizer": tok.to_dict(), "splits": {}}))
    return out


def _finetune_cfg(data_dir, out):
    overrides = ["init_from=piano", f"data.dir={data_dir}", f"paths.output_dir={out}", "logger=none",
                 "data.seq_len=256", "data.batch_size=2", "data.num_workers=0", "trainer.max_steps=2",
                 "trainer.val_check_interval=2", "trainer.limit_val_batches=2", "trainer.num_sanity_val_steps=0",
                 "schedule=constant", "schedule.lr=1e-5", "++trainer.enable_progress_bar=false",
                 "++trainer.enable_model_summary=false", "~callbacks.progress_bar"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("train", overrides=overrides), overrides


@needs_shared
def test_finetuning_starts_from_the_pretrained_loss(tmp_path):
    from musictx.commands.train_objects import build

    cfg, overrides = _finetune_cfg(_real_dataset(tmp_path / "data", EventTokenizer()), tmp_path / "run")
    L.seed_everything(0)
    datamodule, module, trainer = build(cfg, overrides)
    assert module.net.get_config()["d_model"] == musictx.load_pretrained("piano")[0].get_config()["d_model"]
    trainer.fit(module, datamodule=datamodule)
    assert trainer.callback_metrics["val/loss"] < 3.5  # from scratch it would start at ~log(390) = 5.97


@needs_shared
def test_finetuning_refuses_another_tokenizer(tmp_path):
    from musictx.commands.train_objects import build

    cfg, overrides = _finetune_cfg(_real_dataset(tmp_path / "data", EventTokenizer({"velocity_bins": 16})),
                                   tmp_path / "run")
    with pytest.raises(TokenizerMismatchError, match=r"init_from=piano.*velocity_bins"):
        build(cfg, overrides)
