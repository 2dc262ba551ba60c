"""Start training from saved weights (``musictx-train init_from=piano``): the net of a shipped model, a
model folder or a checkpoint, with a fresh optimizer and schedule.

The architecture is the saved model's: its shape-giving fields (sizes, vocabulary, relative distance)
are kept, while run settings of the training config (dropout, attention kernel, block size, context
length, gradient checkpointing) apply. A command-line override of a shape field that disagrees with
the weights, another model type, or a dataset made with another tokenizer config stops the run with a
message that names the field; a reference that names no usable model, with one naming ``init_from``.
A context length other than the saved model's is said in one line (`context_note`): it follows
``data.seq_len``, and the README's fine-tune command (``data.seq_len=1024``) halved ``piano``'s 2,048 unsaid.
"""

from __future__ import annotations

from torch import nn

from musictx.checkpoints.model_store import load_model
from musictx.checkpoints.net_specs import ModelLoadError, build_net
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.training.vocab_growth import grow_rows, is_grown
from musictx.user_error import UserError

# Constructor arguments that a training run may change without touching a weight's shape.
RUN_FIELDS = ("dropout", "attn_impl", "attn_block_size", "gradient_checkpointing", "max_seq_len")


class InitFromError(UserError):
    """Saved weights that cannot start this run; the message names the field."""


def overridden_fields(overrides: list[str]) -> dict[str, str]:
    """{"model.net.d_model": "512", "model": "lstm", ...} of Hydra's command-line overrides."""
    pairs = (o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
    return {k: v for k, v in pairs}


def init_net_from(ref: str, net_config: dict, data_tokenizer: EventTokenizer,
                  overrides: dict[str, str]) -> tuple[nn.Module, dict]:
    """(a net holding the weights of ``ref``, the saved model's meta) for a run whose config asks for
    ``net_config`` (the composed ``model.net``: ``name`` and constructor arguments) on data of
    ``data_tokenizer``. The meta's "notes" are lines for the run to say (`context_note`)."""
    net_config = dict(net_config)
    model_name = net_config.pop("name", None)
    saved_net, saved_tok, meta = _load(ref)
    saved_state = saved_net.state_dict()
    grown = is_grown(saved_tok, data_tokenizer)  # infill sentinels or pedal ids added: the embedding grows
    try:
        if not grown:
            saved_tok.check_compatible(data_tokenizer, what="the training data")
    except TokenizerMismatchError as err:
        raise TokenizerMismatchError(f"init_from={ref}: {err}") from None
    saved_name = meta["model"].get("name")
    if "model" in overrides and model_name not in (None, saved_name):
        raise InitFromError(f"init_from={ref} holds a {saved_name!r} model but model={overrides['model']} "
                            f"builds a {model_name!r}; drop model= to fine-tune it")
    config = dict(meta["model"]["config"])
    if grown:
        saved_state = grow_rows(saved_state, saved_tok.vocab_size, data_tokenizer.vocab_size)
        config["vocab_size"] = data_tokenizer.vocab_size
    for key, value in net_config.items():
        if key in RUN_FIELDS and key in config:
            config[key] = value
        elif f"model.net.{key}" in overrides and config.get(key, value) != value:
            raise InitFromError(f"init_from={ref}: model.net.{key}={value} changes a weight shape; the saved "
                                f"model has {key}={config.get(key)!r}")
    net = build_net({"name": saved_name, "config": config})
    own = net.state_dict()
    for name, tensor in saved_state.items():
        if name in own and own[name].shape != tensor.shape:
            raise InitFromError(f"init_from={ref}: weight {name} has shape {tuple(tensor.shape)} in the saved "
                                f"model but {tuple(own[name].shape)} with this config ({_diff(meta, config)})")
    net.load_state_dict(saved_state)
    net.learnt_programs = getattr(saved_net, "learnt_programs", None)  # the parts it knows go on with it
    note = context_note(ref, meta["model"]["config"].get("max_seq_len"), config.get("max_seq_len"), overrides)
    return net, {**meta, "notes": [note] if note else []}


def _load(ref: str):
    """`load_model`, its error naming the option: "pian: no such file ..." did not say which option held it."""
    try:
        return load_model(ref)
    except ModelLoadError as err:
        said = str(err)  # most start with the reference; a shipped model's may start with its file instead
        raise InitFromError(f"init_from={said}" if said.startswith(f"{ref}:") else f"init_from={ref}: {said}") from None


def context_note(ref: str, saved: int | None, new: int | None, overrides: dict[str, str]) -> str | None:
    """The line saying the fine-tuned model takes another context than the saved one (None: the same, or
    asked for with ``model.net.max_seq_len``): the sampler slides its window at that length, so a shorter one
    forgets the seed sooner, and the checkpoint keeps it."""
    if saved is None or new is None or new == saved or "model.net.max_seq_len" in overrides:
        return None
    hint = f"; model.net.max_seq_len={saved} keeps it" if new < saved else ""
    return (f"init_from={ref}: its context of {saved} tokens becomes {new} (model.net.max_seq_len follows "
            f"data.seq_len){hint}")


def _diff(meta: dict, config: dict) -> str:
    saved = meta["model"]["config"]
    changed = [f"{k}: {saved.get(k)!r} -> {v!r}" for k, v in config.items() if saved.get(k) != v]
    return ", ".join(changed) or "no field differs"
