"""The batch-1 decoding engine beside the models: the same logits as their general forward with a KV cache,
laid out for one-row steps (fused projections read once, a cache buffer read in place).

``engine``: `FastDecoder` (``step``, ``step_together``, ``step_catching_up``), `fast_decoder` and
`reference_steps`; ``weights``: what a step reads, gathered once per decoder; ``ops``: the cache layout, the
four-op attention and its several-query form for a cache catching up. Imports
`musictx.models` (the modules whose parameters it reads), never the other way.
"""

from musictx.decoding.engine import FastDecoder, fast_decoder, reference_steps

__all__ = ["FastDecoder", "fast_decoder", "reference_steps"]
