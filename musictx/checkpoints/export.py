"""A Lightning checkpoint -> a model folder (config.json + model.safetensors) that
`musictx.checkpoints.model_store.load_model` and every command's ``checkpoint=`` accept, with no pickle to load.

    musictx-export outputs/piano/train/checkpoints/best-*.ckpt musictx/pretrained/piano --dtype float16
"""

from __future__ import annotations

from musictx.checkpoints.model_store import load_checkpoint, save_model_folder


def export(checkpoint: str, output_dir: str, dtype: str = "float16", info: dict | None = None,
           max_shard_mb: float | None = None):
    """Write the model folder of ``checkpoint``; ``info`` joins the step and source in config.json; with
    ``max_shard_mb``, weights larger than that are split into files of at most that size."""
    net, tokenizer, meta = load_checkpoint(checkpoint)
    info = {"global_step": meta.get("global_step"), "source_checkpoint": str(checkpoint), **(info or {})}
    return save_model_folder(net, tokenizer, output_dir, dtype=dtype, info=info, max_shard_mb=max_shard_mb)
