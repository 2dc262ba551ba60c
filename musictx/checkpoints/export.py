"""A Lightning checkpoint -> a model folder (config.json + model.safetensors) that
`musictx.checkpoints.model_store.load_model` and every command's ``checkpoint=`` accept, with no pickle to load;
or a model folder stored again in another dtype (``--dtype int8``: `musictx.checkpoints.int8_weights`).

    musictx-export outputs/piano/train/checkpoints/best-*.ckpt musictx/pretrained/piano --dtype float16
    musictx-export my_models/big my_models/big_int8 --dtype int8
"""

from __future__ import annotations

from pathlib import Path

from musictx.checkpoints.model_store import (
    ModelLoadError,
    load_checkpoint,
    load_model_folder,
    resolve,
    save_model_folder,
)

MODEL_CARD = "README.md"  # a model folder's card: its figures are those of its own weights


def export(checkpoint: str, output_dir: str, dtype: str = "float16", info: dict | None = None,
           max_shard_mb: float | None = None):
    """Write the model folder of ``checkpoint`` (a .ckpt, a model folder or a shipped model's name: a folder's info
    and critic kept); ``info`` joins the step and source in config.json; with ``max_shard_mb``, weights larger than
    that are split into files of at most that size."""
    kind, path = resolve(checkpoint)
    if kind != "checkpoint":
        net, tokenizer, meta = load_model_folder(path)
        info = {**meta["info"], "source_folder": str(path), **(info or {})}
    else:
        net, tokenizer, meta = load_checkpoint(checkpoint)
        info = {"global_step": meta.get("global_step"), "source_checkpoint": str(checkpoint), **(info or {})}
    try:
        return save_model_folder(net, tokenizer, output_dir, dtype=dtype, info=info, max_shard_mb=max_shard_mb)
    except ValueError as err:  # a dtype the net cannot be stored in (int8 for an LSTM)
        raise ModelLoadError(f"{checkpoint}: {err}") from None


def card_left_out(checkpoint: str) -> Path | None:
    """The model card of the folder ``checkpoint`` names, which an export does not copy (its figures are those of the
    source's weights, not of the new dtype's); None where there is none."""
    kind, path = resolve(checkpoint)
    card = path / MODEL_CARD
    return card if kind != "checkpoint" and card.is_file() else None
