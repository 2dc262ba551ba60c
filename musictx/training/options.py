"""Checks of musictx-train's options that Lightning, torch or the nets would otherwise take as given or refuse late.

Each refusal is a `TrainOptionError` (a `UserError`: the commands print it as one line) that names the option as
it is written on the command line. Why here rather than where each value is used: a string or a zero reached the
optimizer or a tensor shape and ended, after the model and the Trainer were built, in a TypeError such as
"'<=' not supported between instances of 'float' and 'str'"; a zero layer count or a negative warm-up trained on
without a word.
"""

from __future__ import annotations

import torch
from lightning.pytorch.callbacks import ProgressBar
from torch import nn

from musictx.checkpoints.net_specs import BUILD_ERRORS, argument_problem, is_number, is_whole
from musictx.models import MODELS
from musictx.user_error import UserError


class TrainOptionError(UserError):
    """A training option of the wrong kind or out of range; the message names it."""


def check_flag(key: str, value) -> None:
    """A yes/no option: a string such as 'maybe' was truthy, and so silently on."""
    if not isinstance(value, bool):
        raise TrainOptionError(f"{key} must be true or false, got {value!r}")


# The keys of each schedule (lit_module.make_schedule) and the least each may be; `total_steps` is
# ${trainer.max_steps} in the configs, so a bad value there is named as that too.
SCHEDULE_LOWS = {"lr": 0.0, "warmup_steps": 0, "factor": 0.0, "d_model": 1, "min_ratio": 0.0}


def check_schedule(config: dict) -> None:
    """The numbers of a ``schedule`` config: the optimizer's lr is ``schedule.lr`` (conf/model/optimizer), so a
    string there was found by AdamW only when the fit began, in a raw TypeError."""
    for key, low in SCHEDULE_LOWS.items():
        value = config.get(key)
        if value is None:
            continue
        whole = isinstance(low, int)
        if not (is_whole(value) if whole else is_number(value)) or value < low:
            kind = "a whole number" if whole else "a number"
            raise TrainOptionError(f"schedule.{key} must be {kind} >= {low:g}, got {value!r}")


def net_from_options(config: dict) -> nn.Module:
    """The net of a training config's ``model.net`` (``name`` and the constructor's arguments), each option
    checked as a stored model's are (`musictx.checkpoints.net_specs.argument_problem`), named as an option."""
    config = dict(config)
    name = config.pop("name", None)
    if name not in MODELS:
        raise TrainOptionError(f"model.net.name={name!r}: not one of musictx's models {sorted(MODELS)}")
    cls = MODELS[name]
    problem = argument_problem(cls, config)
    if problem:
        raise TrainOptionError(f"model.net.{problem[0]} {problem[1]}")
    try:
        return cls(**config)
    except BUILD_ERRORS as err:  # e.g. n_heads that does not divide d_model
        raise TrainOptionError(f"model.net: {cls.__name__} cannot be built with these options ({err})") from None


def check_accelerator(accelerator) -> None:
    """``trainer=gpu`` (or ``experiment=paper_recall``, which picks it) where torch sees no CUDA device: Lightning's
    own refusal came wrapped in Hydra's "Error in call to target" and said only "No supported gpu backend found!"."""
    if str(accelerator).lower() in ("gpu", "cuda") and not torch.cuda.is_available():
        build = " (this torch is a CPU-only build)" if torch.version.cuda is None else ""
        raise TrainOptionError(f"trainer.accelerator={accelerator}: torch finds no CUDA GPU here{build}; to train on "
                               "the CPU leave trainer= out, or add trainer.accelerator=cpu")


def check_window_fits(seq_len: int, net: nn.Module) -> None:
    """Train windows longer than the net's context were found at the first step ("0 cached + 128 new tokens
    exceed max_seq_len=64"), after the Trainer had started; the LSTM has no limit (max_seq_len None)."""
    limit = getattr(net, "max_seq_len", None)
    if limit is not None and seq_len > limit:
        raise TrainOptionError(f"data.seq_len={seq_len} is longer than model.net.max_seq_len={limit}, the most "
                               "tokens the net takes; lower data.seq_len or raise model.net.max_seq_len (by default "
                               "it follows data.seq_len)")


def without_hidden_progress_bar(callbacks: list, enable_progress_bar) -> list:
    """``trainer.enable_progress_bar=false`` asks for no bar, but conf/callbacks/default.yaml adds one, and
    Lightning refused the pair ("found `TQDMProgressBar` in callbacks list"): the flag wins, the bar is left out."""
    if enable_progress_bar is not False:
        return callbacks
    return [c for c in callbacks if not isinstance(c, ProgressBar)]


# Lightning's shorthands for trainer.precision, as its Trainer names what it runs (trainer.precision)
PRECISION_NAMES = {"16": "16-mixed", "bf16": "bf16-mixed", "32": "32-true", "64": "64-true"}


def precision_note(asked, ran: str, on_cpu: bool, cpu_bf16: bool) -> str | None:
    """One warning line when the run's precision is not quite what ``trainer.precision`` asked for, else None:
    Lightning turns 16-mixed into bf16-mixed on the CPU (it has no fp16 autocast there), and on a CPU without
    oneDNN's bf16 kernels (no AVX-512, e.g. AMD Zen 3) bf16 is emulated, slower than fp32, with the LSTM's
    recurrent layers in fp32 (musictx.models.lstm). ``cpu_bf16``: torch.ops.mkldnn._is_mkldnn_bf16_supported()."""
    said = []
    if asked is not None and PRECISION_NAMES.get(str(asked), str(asked)) != ran:
        why = " (Lightning has no fp16 autocast on the CPU)" if on_cpu and ran == "bf16-mixed" else ""
        said.append(f"this run uses {ran}{why}")
    if on_cpu and ran.startswith("bf16") and not cpu_bf16:
        said.append("this CPU has no bf16 kernels (oneDNN's need AVX-512, which e.g. AMD Zen 3 lacks): bf16 is "
                    "emulated, usually slower than trainer.precision=32-true, and an LSTM's recurrent layers run in "
                    "fp32")
    if not said:
        return None
    return f"musictx-train: warning: trainer.precision={asked}: {'; '.join(said)}"
