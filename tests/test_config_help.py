"""``--help`` of the Hydra commands: each lists its own keys with what they do, read from its YAML."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from musictx.console.config_help import key_help, read_keys

TRAINING_GROUPS = ("trainer=", "schedule=", "callbacks=", "logger=", "experiment=", "Configuration groups")


def _help(command: str, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / command
    assert exe.exists(), f"{exe}: install the project (pip install -e .) to get its console scripts"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(exe), *(args or ["--help"])], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("command, line", [
    ("musictx-generate", "length_seconds=30                 stop a sample after this much NEW music"),
    ("musictx-evaluate", "continuation.length_seconds=20"),
    ("musictx-evaluate", "motif.window_seconds=5            the curve has one point per window after the seed"),
])
def test_help_lists_the_commands_own_keys(command, line):
    done = _help(command)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert f"usage: {command} [key=value ...]" in out and line in out
    assert not any(group in out for group in TRAINING_GROUPS), out
    assert "--hydra-help" in out  # Hydra's own flags are one flag away


def test_short_flag_and_extra_overrides_still_give_help():
    done = _help("musictx-attention", "top=2", "-h")
    assert done.returncode == 0 and "until_seconds=null" in done.stdout and "draw the window" in done.stdout


def test_train_help_names_its_groups_and_their_choices():
    text = key_help("train", "musictx-train")
    assert "model=music_transformer" in text and "lstm_small" in text
    assert "ckpt_path=null           resume from this checkpoint" in text
    assert "hydra.run.dir=outputs" not in text and "_self_" not in text  # defaults and hydra blocks are not keys


def test_read_keys_joins_comments_and_names_nested_keys():
    text = """# tool: what it does
#   tool a=1
defaults:
  - _self_
  - model: big            # not a key
  - override hydra/job_logging: stdout
a: 1        # the first key,
            # said on two lines
block:      # a block of keys
  inner: x  # one inside
  plain: 2
hydra:
  run:
    dir: out   # Hydra's, not the command's
"""
    header, keys, groups = read_keys(text)
    assert header == ["tool: what it does", "  tool a=1"] and groups == [("model", "big")]
    assert [(k.name, k.value, k.note) for k in keys] == [
        ("a", "1", "the first key, said on two lines"), ("block", "", "a block of keys"),
        ("block.inner", "x", "one inside"), ("block.plain", "2", "")]
