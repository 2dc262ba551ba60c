"""The "did you mean" of a mistyped key comes from the keys of the configs the run chose (2026-12: with
``model=lstm`` it came from the default model's, so ``model.net.n_heads`` was "did you mean
'model.net.n_heads'?", and ``model.net.hiden_size`` was "did you mean 'model.net.vocab_size'?"). Real Hydra
composes, real errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException

from musictx.console.guard import compose_run_config, key_message

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def hint(*overrides: str) -> str:
    """The one line the guard says for the composition error of ``overrides``."""
    with pytest.raises(ConfigCompositionException) as info:
        compose_run_config("train", list(overrides))
    return key_message(info.value, "train", list(overrides))


def test_a_typo_is_matched_against_the_chosen_models_keys():
    assert hint("model=lstm", "model.net.hiden_size=4") == \
        "unknown key 'model.net.hiden_size'; did you mean 'model.net.hidden_size'?"  # was vocab_size
    assert hint("model.net.n_head=4") == "unknown key 'model.net.n_head'; did you mean 'model.net.n_heads'?"


def test_a_key_only_other_models_have_says_so_instead_of_a_near_name():
    line = hint("model=lstm", "model.net.n_heads=4")  # was "did you mean 'model.net.n_heads'?": the key it had given
    assert line.startswith("unknown key 'model.net.n_heads': model=lstm has no such key (model=transformer, "), line
    assert line.endswith("have it); conf/model/lstm.yaml lists its keys"), line
    assert "lstm_small" not in line.split("(")[1]  # only the models that have it are named


def test_a_model_an_experiment_chooses_gives_the_keys():
    line = hint("experiment=piano_lstm", "model.net.n_heads=4")  # conf/experiment/piano_lstm.yaml picks the model
    assert "model=lstm_piano has no such key" in line, line


@pytest.mark.slow  # ~10 s of real command runs; the fast suite keeps the other tests of this file
def test_each_job_of_a_sweep_gets_the_keys_of_its_own_model(tmp_path):
    """-m: the lstm job, second in the sweep, is the one without the key; its line names it before any job runs."""
    cmd = [sys.executable, "-m", "musictx.commands.train", "-m", "model=transformer,lstm", "model.net.n_heads=4",
           f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("musictx-train: error: unknown key 'model.net.n_heads': model=lstm has no such key"), last
    assert not (tmp_path / "sweep").exists()
