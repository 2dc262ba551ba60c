"""A Lightning checkpoint -> a model folder (config.json + model.safetensors) that
`musictx.checkpoints.model_store.load_model` and every command's ``checkpoint=`` accept, with no pickle to load;
or a model folder stored again in another dtype (``--dtype int8``: `musictx.checkpoints.int8_weights`).

    musictx-export outputs/piano/train/checkpoints/best-*.ckpt musictx/pretrained/piano --dtype float16
    musictx-export my_models/big my_models/big_int8 --dtype int8
"""

from __future__ import annotations

import json
from pathlib import Path

from musictx.checkpoints.model_store import (
    CONFIG_FILE,
    ModelLoadError,
    load_checkpoint,
    load_model_folder,
    resolve,
    save_model_folder,
)

MODEL_CARD = "README.md"  # a model folder's card: its figures are those of its own weights
# info keys that say how the weights were trained, as true of them in any dtype; every other key (val_nll, test_nll,
# spot_check, earlier weights' records, a key not known here) may be a figure of the source's weights, so it is
# kept under SOURCE_FIGURES
TRAINING_KEYS = ("global_step", "tokens_seen", "windows", "data", "recipe", "gpu", "train_s", "tokens_per_s",
                 "shards_back", "source_checkpoint", "shipped_from_window")
SOURCE_FIGURES = "source_figures"


def export(checkpoint: str, output_dir: str, dtype: str = "float16", info: dict | None = None,
           max_shard_mb: float | None = None):
    """Write the model folder of ``checkpoint`` (a .ckpt, a model folder or a shipped model's name: a folder's info
    and critic kept); ``info`` joins the step and source in config.json; with ``max_shard_mb``, weights larger than
    that are split into files of at most that size."""
    kind, path = resolve(checkpoint)
    if kind != "checkpoint":
        net, tokenizer, meta = load_model_folder(path)
        own = source_info(meta["info"], _stored_dtype(path), dtype, path)
        info = {**own, "source_folder": str(path), **(info or {})}
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


def _stored_dtype(folder: Path) -> str | None:
    """The dtype a model folder's weights are stored in (its config.json, which loading has read already)."""
    return json.loads((folder / CONFIG_FILE).read_text()).get("weights_dtype")


def source_info(info: dict, source_dtype: str | None, dtype: str, folder: Path) -> dict:
    """A model folder's ``info`` for its export in ``dtype``: as it is when the dtype is the source's (the same
    weights); else its measured figures moved under ``source_figures``, labelled with the source's dtype and
    folder, so that an int8 folder does not hold the float16 weights' NLL as if it were its own."""
    figures = {k: v for k, v in info.items() if k not in TRAINING_KEYS}
    if source_dtype == dtype or not figures:
        return dict(info)
    note = (f"measured on the {source_dtype or 'unknown'} weights of {folder}, not on these {dtype} weights; "
            "musictx-evaluate checkpoint=<this folder> mode=nll measures these")
    return {**{k: v for k, v in info.items() if k in TRAINING_KEYS},
            SOURCE_FIGURES: {"weights_dtype": source_dtype, "folder": str(folder), "note": note, **figures}}


def left_with_source(checkpoint: str, output_dir: str | Path, dtype: str) -> str | None:
    """One line on what of the source's figures the exported folder does not claim as its own: the model card left
    behind (`card_left_out`), the measured figures of another dtype kept under ``info.source_figures``; None when
    neither."""
    card = card_left_out(checkpoint)
    source = json.loads((Path(output_dir) / CONFIG_FILE).read_text()).get("info", {}).get(SOURCE_FIGURES)
    said = [f"its model card ({card}) is not copied"] if card is not None else []
    if source is not None:
        keys = ", ".join(k for k in source if k not in ("weights_dtype", "folder", "note"))
        said.append(f"its figures ({keys}) are kept in config.json as info.{SOURCE_FIGURES}: the "
                    f"{source['weights_dtype']} source weights', not these {dtype} ones (musictx-evaluate "
                    f"checkpoint={output_dir} mode=nll data.dir=... nll.max_songs=N measures these)")
    elif said:
        said[0] += ": its figures are the source weights'"
    return "; ".join(said) or None
