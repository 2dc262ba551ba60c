"""The three-model comparison (does relative attention keep the motif better?): experiment=piano_vanilla
and experiment=piano_lstm are experiment=piano with another model and nothing else, at the shipped Music
Transformer's parameter count, and the shipped model's folder is what experiment=piano builds."""

from __future__ import annotations

import json
import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from musictx.models import LSTMBaseline, MusicTransformer, VanillaTransformer
from musictx.models.attention import PlainSelfAttention, RelativeSelfAttention
from musictx.paths import CONF_DIR, PRETRAINED_DIR
from musictx.training.options import net_from_options

EXPERIMENTS = {"piano": MusicTransformer, "piano_vanilla": VanillaTransformer, "piano_lstm": LSTMBaseline}


def composed(experiment: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}", "model.net.vocab_size=390"],
                      return_hydra_config=True)
    return cfg


@pytest.fixture(scope="module")
def configs():
    return {name: composed(name) for name in EXPERIMENTS}


def test_only_the_model_and_the_run_folder_differ(configs):
    """Same data, windows, augmentation, token budget, schedule, seed and threads for all three."""
    base = OmegaConf.to_container(configs["piano"], resolve=False)
    for name in ("piano_vanilla", "piano_lstm"):
        other = OmegaConf.to_container(configs[name], resolve=False)
        assert other["hydra"]["run"]["dir"] != base["hydra"]["run"]["dir"]
        for key in set(base) | set(other):
            if key not in ("model", "hydra"):
                assert other.get(key) == base.get(key), (name, key)
        assert other["model"]["scheduler"] == base["model"]["scheduler"]
        assert other["model"]["optimizer"] == base["model"]["optimizer"]


def build(cfg):
    """The net a training run builds from ``cfg``: through the model store, from ``model.net``'s name."""
    return net_from_options(OmegaConf.to_container(cfg.model.net, resolve=True))


def test_matched_parameter_counts_and_the_attention_each_uses(configs):
    nets = {name: build(cfg) for name, cfg in configs.items()}
    counts = {name: sum(p.numel() for p in net.parameters()) for name, net in nets.items()}
    for name, net in nets.items():
        assert type(net) is EXPERIMENTS[name]
        assert abs(counts[name] / counts["piano"] - 1) < 0.005, counts
    kinds = {name: {type(m) for m in net.modules()} for name, net in nets.items()}
    assert RelativeSelfAttention in kinds["piano"] and PlainSelfAttention not in kinds["piano"]
    assert PlainSelfAttention in kinds["piano_vanilla"] and RelativeSelfAttention not in kinds["piano_vanilla"]
    assert nets["piano_vanilla"].config["positions"] == "sinusoidal"


def test_the_shipped_model_is_what_experiment_piano_builds(configs):
    """The architecture is experiment=piano's; the context is that of the last fine-tune's windows, as its
    recorded recipe says (R: ``data.seq_len=2048``; S, `musictx.training.plain`: ``"seq_len": 2048``), else the
    experiment's. Dropout is the last fine-tune's too: a training setting, off at inference."""
    shipped_json = json.loads((PRETRAINED_DIR / "piano" / "config.json").read_text())
    shipped, recipe = shipped_json["model"]["config"], shipped_json["info"].get("recipe") or ""
    built = build(configs["piano"]).config
    same = [k for k in shipped if k not in ("max_seq_len", "dropout")]
    assert {k: built[k] for k in same} == {k: shipped[k] for k in same}
    trained_at = re.search(r'data\.seq_len=(\d+)|"seq_len": (\d+)', recipe)
    assert shipped["max_seq_len"] == (int(trained_at.group(1) or trained_at.group(2)) if trained_at
                                      else built["max_seq_len"])
