"""What a researcher typing overrides met (2026-11-30): options of the wrong kind or out of range that trained on
silently (0 layers, a negative warm-up, threads=0, data.augment=maybe) or ended late in raw TypeErrors
(schedule.lr=abc, model.optimizer.weight_decay=abc), Lightning's refusals inside Hydra's "Error in call to
target", windows longer than the net's context found at the first step, trainer.enable_progress_bar=false
refused beside the config's own bar, 16-mixed silently run as bf16-mixed on the CPU, trainer=gpu on a machine
without one, and a mistyped value in a -m sweep said in Hydra's many lines. Real configs, real Trainer runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from lightning.pytorch.callbacks import ProgressBar

from musictx.commands.train_objects import build, plan_of
from musictx.console.config_help import key_help
from musictx.io.tokenizer import EventTokenizer
from musictx.paths import CONF_DIR
from musictx.training.data import MusicDataModule
from musictx.training.lit_module import MusicLitModule, NonFiniteLossError
from musictx.training.options import TrainOptionError, precision_note
from musictx.training.run import TrainPlan, train
from musictx.training.sweeps import sweep_jobs
from musictx.user_error import UserError

from .test_train import compose_train

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TINY_NET = {"name": "music_transformer", "vocab_size": 390, "n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64,
            "max_seq_len": 32}


def cli(tmp_path, *args: str) -> str:
    """The last stderr line of a refused ``musictx-train`` run, checked to be its one error line."""
    cmd = [sys.executable, "-m", "musictx.commands.train", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("musictx-train: error: ") and "MUSICTX_DEBUG" not in last, done.stderr[-3000:]
    return last.removeprefix("musictx-train: error: ")


def run_kept(cfg):
    """musictx-train's own `train` on ``cfg``, keeping the built DataModule, module and Trainer."""
    kept = []
    metrics = train(plan_of(cfg), lambda: kept.append(build(cfg)) or kept[0])
    return metrics, kept[0]


# ----- one line naming the option, before anything trains ---------------------------------------------------
@pytest.mark.parametrize(("overrides", "said"), [
    # were "... got 'abc' (ValueError; MUSICTX_DEBUG=1 shows where)" and a TypeError after the model was built
    (["model=lstm", "trainer.max_steps=abc"], "trainer.max_steps must be a whole number, got 'abc'"),
    pytest.param(["model=lstm", "schedule.lr=abc"], "schedule.lr must be a number >= 0, got 'abc'",
                 marks=pytest.mark.slow),  # each case a command of ~6 s: one stays in the default suite
    # was "Error in call to target 'lightning.pytorch.trainer.trainer.Trainer': MisconfigurationException(...)"
    pytest.param(["model=lstm", "trainer.val_check_interval=abc"],
                 "trainer: Invalid time format for `val_check_interval`: 'abc'.", marks=pytest.mark.slow),
    # was "0 cached + 64 new tokens exceed max_seq_len=32 (ValueError; ...)" at the first training step
    pytest.param(["model=transformer", "model.net.n_heads=2", "model.net.max_seq_len=32"],
                 "data.seq_len=64 is longer than model.net.max_seq_len=32, the most tokens the net takes",
                 marks=pytest.mark.slow),
])
def test_a_bad_option_is_one_line_naming_it(overrides, said, prepared_dir, tmp_path):
    last = cli(tmp_path, "experiment=tiny", f"data.dir={prepared_dir}", "model.net.d_model=32",
               "model.net.n_layers=1", "data.seq_len=64", "trainer.max_steps=2", f"hydra.run.dir={tmp_path / 'run'}",
               *overrides)
    assert last.startswith(said), last
    assert not (tmp_path / "run").exists()  # refused before a checkpoint: the run folder is gone


def test_a_mistyped_value_of_a_sweep_is_one_line_before_any_job(prepared_dir, tmp_path):
    """-m: Hydra said a mistyped choice in 20 lines of choices and search path, and only when the sweep reached it."""
    last = cli(tmp_path, "-m", "model=lstm,music_transformr", "experiment=tiny", f"data.dir={prepared_dir}",
               "trainer.max_steps=2", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert last.startswith("model=music_transformr: no such choice; did you mean model=music_transformer?"), last
    assert not (tmp_path / "sweep").exists()  # the lstm job, first in the sweep, never ran


def test_a_sweep_lists_each_value_once_and_leaves_what_only_hydra_reads():
    assert sweep_jobs(["-m", "model=a,b", "data.stretch_range=[0.9,1.1]", "schedule.lr=1,2,3", "~x"]) == [
        ["model=a", "data.stretch_range=[0.9,1.1]", "schedule.lr=1", "~x"],
        ["model=b", "data.stretch_range=[0.9,1.1]", "schedule.lr=1", "~x"],
        ["model=a", "data.stretch_range=[0.9,1.1]", "schedule.lr=2", "~x"],
        ["model=a", "data.stretch_range=[0.9,1.1]", "schedule.lr=3", "~x"]]
    assert sweep_jobs(["model=a,b"]) == []  # no -m: Hydra's own "ambiguous value" error
    assert sweep_jobs(["-m", "trainer.max_steps=range(1,3)"]) == sweep_jobs(["-m", "--cfg", "job", "model=a"]) == []


@pytest.mark.parametrize(("values", "said"), [
    ({"max_steps": -5}, "trainer.max_steps must be a whole number >= -1, got -5"),  # was Lightning's wrapped error
    ({"threads": 0}, "threads must be a whole number >= 1, got 0"),  # was silently every core
    ({"warmup_steps": -3}, "schedule.warmup_steps must be a whole number >= 0, got -3"),  # trained on
])
def test_step_counts_and_threads_out_of_range_are_refused(values, said):
    with pytest.raises(UserError, match=re.escape(said)):
        TrainPlan.from_values({"seed": 0, "ckpt_dir": "c", "output_dir": "o", "data_dir": "d", **values})


@pytest.mark.parametrize(("net", "said"), [
    ({"n_layers": 0}, "model.net.n_layers must be a whole number >= 1, got 0"),  # trained as embedding + head
    ({"n_layers": "abc"}, "model.net.n_layers must be a whole number, got 'abc'"),  # "'str' object cannot be ..."
    ({"d_model": -4}, "model.net.d_model must be a whole number >= 1, got -4"),  # "negative dimension", wrapped
    ({"dropout": "abc"}, "model.net.dropout must be a number, got 'abc'"),
    ({"d_model": 31}, "model.net: MusicTransformer cannot be built with these options (d_model=31 is not"),
])
def test_net_options_are_checked_by_kind_and_size(net, said):
    with pytest.raises(TrainOptionError, match=re.escape(said)):
        MusicLitModule({**TINY_NET, **net}, EventTokenizer())


@pytest.mark.parametrize(("schedule", "said"), [
    ({"name": "cosine", "lr": "abc", "warmup_steps": 2, "total_steps": 10}, "schedule.lr must be a number >= 0"),
    ({"name": "paper", "lr": 1.0, "warmup_steps": 10, "d_model": 32, "factor": "x"}, "schedule.factor must be"),
    ({"name": "cosine", "lr": 1e-3, "warmup_steps": 2, "total_steps": 10, "foo": 1},
     "schedule: cosine_schedule() got an unexpected keyword argument 'foo'"),
])
def test_the_schedule_is_checked_when_the_module_is_built(schedule, said):
    """Not in configure_optimizers, where it failed only once the Trainer had started (a raw TypeError)."""
    with pytest.raises(TrainOptionError, match=re.escape(said)):
        MusicLitModule(TINY_NET, EventTokenizer(), scheduler=schedule)


def test_a_bad_optimizer_option_names_the_optimizer_and_the_value(prepared_dir, tmp_path):
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "model.optimizer.weight_decay=abc")
    with pytest.raises(TrainOptionError, match=r"^model\.optimizer: .* \(weight_decay='abc'\)$"):
        run_kept(cfg)


def test_a_yes_no_data_option_must_be_true_or_false(prepared_dir):
    with pytest.raises(TrainOptionError, match=re.escape("data.augment must be true or false, got 'maybe'")):
        MusicDataModule(prepared_dir, seq_len=32, augment="maybe")  # a non-empty string was truthy: on


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a CUDA GPU")
def test_trainer_gpu_without_a_gpu_names_the_accelerator(prepared_dir, tmp_path):
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "trainer.accelerator=gpu")
    with pytest.raises(TrainOptionError, match=r"^trainer\.accelerator=gpu: torch finds no CUDA GPU here"):
        run_kept(cfg)
    assert not (tmp_path / "checkpoints").exists()


# ----- what runs is what was asked for, or a line says otherwise -------------------------------------------
def test_enable_progress_bar_false_leaves_the_configs_bar_out(prepared_dir, tmp_path):
    """Lightning refused the flag beside conf/callbacks' TQDMProgressBar; every test wrote ~callbacks.progress_bar."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[
            "experiment=tiny", f"data.dir={prepared_dir}", f"paths.output_dir={tmp_path}", "model=lstm",
            "model.net.d_model=32", "model.net.n_layers=1", "data.seq_len=32", "data.batch_size=4",
            "trainer.max_steps=2", "trainer.limit_val_batches=1", "++trainer.enable_progress_bar=false"])
    _, (_, _, trainer) = run_kept(cfg)
    assert trainer.global_step == 2 and trainer.progress_bar_callback is None
    assert not any(isinstance(c, ProgressBar) for c in trainer.callbacks)


def test_16_mixed_on_the_cpu_says_it_runs_bf16_and_does(prepared_dir, tmp_path, capsys):
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "trainer.precision=16-mixed", "trainer.max_steps=2")
    seen = []
    L.seed_everything(cfg.seed)

    def built():
        objects = build(cfg)
        objects[1].net.head.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
        return objects

    train(plan_of(cfg), built)
    err = capsys.readouterr().err
    assert "musictx-train: warning: trainer.precision=16-mixed: this run uses bf16-mixed (Lightning has no fp16 " \
           "autocast on the CPU)" in err, err
    assert seen and set(seen) == {torch.bfloat16}  # the head ran under bf16 autocast, in training and validation


def test_bf16_on_a_cpu_without_bf16_kernels_is_said():
    """The line for a CPU without oneDNN's bf16 kernels (AMD Zen 3); the CPU at hand decides in `check_built`."""
    slow = precision_note("bf16-mixed", "bf16-mixed", on_cpu=True, cpu_bf16=False)
    assert slow.startswith("musictx-train: warning: trainer.precision=bf16-mixed: this CPU has no bf16 kernels")
    assert "slower than trainer.precision=32-true" in slow and "\n" not in slow
    both = precision_note("16-mixed", "bf16-mixed", on_cpu=True, cpu_bf16=False)
    assert "this run uses bf16-mixed" in both and "no bf16 kernels" in both
    for asked, ran in (("bf16-mixed", "bf16-mixed"), ("32", "32-true"), ("bf16", "bf16-mixed"), (None, "32-true")):
        assert precision_note(asked, ran, on_cpu=True, cpu_bf16=True) is None
    assert precision_note("bf16-mixed", "bf16-mixed", on_cpu=False, cpu_bf16=False) is None  # a GPU run


def test_bf16_mixed_on_this_cpu_runs_bf16_and_says_so_only_without_kernels(prepared_dir, tmp_path, capsys):
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "trainer.precision=bf16-mixed", "trainer.max_steps=2")
    _, (_, _, trainer) = run_kept(cfg)
    assert trainer.global_step == 2 and trainer.precision == "bf16-mixed"
    assert type(trainer.precision_plugin).__name__ == "MixedPrecision" and trainer.precision_plugin.device == "cpu"
    told = "no bf16 kernels" in capsys.readouterr().err
    assert told == (not torch.ops.mkldnn._is_mkldnn_bf16_supported())


def test_fp16_weights_that_turn_nan_name_the_precision(prepared_dir, tmp_path):
    """trainer.precision=16-true: AdamW's eps is 0 in fp16, the first update gives 0/0; the error said only
    "use a different precision"."""
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "trainer.precision=16-true")
    with pytest.raises(NonFiniteLossError, match=r"at step 1 .* trainer\.precision=16-true keeps the weights and "
                                                 r"the optimizer's state in fp16, where AdamW's eps is 0"):
        run_kept(cfg)


def test_evaluate_is_a_key_of_the_config_and_must_be_a_block(prepared_dir, tmp_path):
    """`evaluate` was read by the run but not in conf/train.yaml: --help did not show it and evaluate={...} was an
    unknown key; unquoted, the shell's brace expansion made it a string that failed after training."""
    assert "evaluate=null" in key_help("train", "musictx-train")
    cfg = compose_train(prepared_dir, tmp_path, "model=lstm", "evaluate={split:test,mode:nll}")
    assert plan_of(cfg).evaluate == {"split": "test", "mode": "nll"}
    with pytest.raises(TrainOptionError, match=re.escape("evaluate must be a block of conf/evaluate.yaml's keys, "
                                                         "got 'mode:nll'; quote it for the shell")):
        plan_of(compose_train(prepared_dir, tmp_path, "model=lstm", "evaluate=mode:nll"))
