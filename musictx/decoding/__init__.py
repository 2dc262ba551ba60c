"""The decoding engine: a network, a prompt and options in, sampled ids out, its hooks reshaping each draw.

The public face, what the tasks, the app and evaluation use (imported on first use, so that option checking
and ``--help`` read `DecodingOptions` without loading torch):

- `generate` (``sampling``): the KV-cached sampler; `GenerationInterrupted` keeps what Ctrl-C left.
- `DecodingOptions`, `SamplingOptions`: the draw's settings, and those plus every hook's options.
- the hook kinds (``hook``): `LogitsHook` reshapes the logits, `StopRule` ends samples, `DecoderWrapper` wraps
  what the sampler steps; `HookSpec` describes one; ``hooks/`` holds each hook and ``hooks.registry`` builds
  a run's list.
- `GenerateError`: bad input, the message naming the option or the file.

Inside: ``engine``/``ops``/``weights`` (`FastDecoder`: batch-1 steps with fused projections), ``window`` (the
sliding window over the net), ``filters`` (temperature, top-k, nucleus), ``cursor`` (the metrical hooks' one
view of the stream). Imports `musictx.models` and `musictx.io`, never the tasks or the run above it.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "generate": "sampling", "GenerationInterrupted": "sampling",
    "DecodingOptions": "decoding_options", "SamplingOptions": "sampling_options",
    "LogitsHook": "hook", "StopRule": "hook", "DecoderWrapper": "hook", "HookSpec": "hook",
    "GenerateError": "errors",
    "FastDecoder": "engine", "fast_decoder": "engine", "reference_steps": "engine",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    """`musictx.decoding.generate` and the rest, imported from their module when first asked for."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'musictx.decoding' has no attribute {name!r}")
    return getattr(importlib.import_module(f"musictx.decoding.{_PUBLIC[name]}"), name)
