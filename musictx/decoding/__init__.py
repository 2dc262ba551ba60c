"""The decoding engine: a network, a prompt and options in, sampled ids out, its hooks reshaping each draw.

The public face, what the tasks, the app and evaluation use (imported on first use, so that option checking
and ``--help`` read `DecodingOptions` without loading torch):

- `generate` (``sampling``): the KV-cached sampler; `GenerationInterrupted` keeps what Ctrl-C left; `eval_mode`
  (the net in eval mode for a block, each module's own flag put back: scoring uses it too).
- `DecodingOptions`, `SamplingOptions`: the draw's settings, and those plus every hook's options.
- the hook kinds (``hook``): `LogitsHook` reshapes the logits, `StopRule` ends samples, `DecoderWrapper` wraps
  what the sampler steps, `Grammar` also names a lone next id; `HookSpec` describes one; ``hooks/`` holds each
  hook and ``hooks.registry`` builds a run's list.
- `GenerateError`: bad input, the message naming the option or the file.

Inside: ``engine``/``ops``/``weights`` (`FastDecoder`: batch-1 steps with fused projections), ``window`` (the
sliding window over the net), ``filters`` (temperature, top-k, nucleus), ``cursor`` (the metrical hooks' one
view of the stream). Imports `musictx.models` and `musictx.io`, never the tasks or the run above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from musictx.lazy import public_dir, public_face

# the public face: name -> the module under musictx.decoding that defines it, imported when first asked for, so that
# ``--help`` and the option checks, which read this package's light modules, load no torch
_PUBLIC = {
    "DecodingOptions": "decoding_options",
    "FastDecoder": "engine",
    "fast_decoder": "engine",
    "reference_steps": "engine",
    "GenerateError": "errors",
    "DecoderWrapper": "hook",
    "Grammar": "hook",
    "HookSpec": "hook",
    "LogitsHook": "hook",
    "StopRule": "hook",
    "loose_ids": "hooks.copy_cache",
    "mixture_nll": "hooks.copy_cache",
    "parse_density": "hooks.density",
    "HOLD_SECONDS": "hooks.final_chord",
    "ShiftClock": "hooks.length",
    "steps_in": "hooks.length",
    "RecallGuidanceOptions": "hooks.recall_guidance",
    "repeat_plan": "hooks.repeat_echo",
    "check_seed": "option_fields",
    "finite_number": "option_fields",
    "raise_first": "option_fields",
    "whole_number": "option_fields",
    "GenerationInterrupted": "sampling",
    "eval_mode": "sampling",
    "generate": "sampling",
    "SamplingOptions": "sampling_options",
    "context_length": "window",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:  # for readers and type checkers: where each name lives
    from musictx.decoding.decoding_options import DecodingOptions
    from musictx.decoding.engine import FastDecoder, fast_decoder, reference_steps
    from musictx.decoding.errors import GenerateError
    from musictx.decoding.hook import DecoderWrapper, Grammar, HookSpec, LogitsHook, StopRule
    from musictx.decoding.hooks.copy_cache import loose_ids, mixture_nll
    from musictx.decoding.hooks.density import parse_density
    from musictx.decoding.hooks.final_chord import HOLD_SECONDS
    from musictx.decoding.hooks.length import ShiftClock, steps_in
    from musictx.decoding.hooks.recall_guidance import RecallGuidanceOptions
    from musictx.decoding.hooks.repeat_echo import repeat_plan
    from musictx.decoding.option_fields import check_seed, finite_number, raise_first, whole_number
    from musictx.decoding.sampling import GenerationInterrupted, eval_mode, generate
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.decoding.window import context_length


__getattr__ = public_face(__name__, _PUBLIC)
__dir__ = public_dir(globals(), _PUBLIC)
