"""Sequence models over event-token ids, as the papers write them. Only torch is imported here (the fused Triton
kernel of `musictx.kernels`, torch's companion, is imported by the attention module on first use when
installed), and the batch-1 decoding fast path lives above, in `musictx.decoding`, and reads these modules'
parameters.

Every model (`MusicTransformer`, `VanillaTransformer`, `LSTMBaseline`) follows one protocol:

    logits = net(ids)                       # ids (B, T) long -> logits (B, T, V); training / scoring
    state = net.init_cache()                # empty decoding state
    logits, state = net(prompt, cache=state)    # feed the prompt (B, T0)
    logits, state = net(next_ids, cache=state)  # then (B, 1) per step; logits (B, t_new, V)

The state is updated in place and returned; `state.length` counts the tokens fed so far. Positions
count from the first token of a state, so when `state.length` reaches `net.max_seq_len` (None for the
LSTM: no limit) a sampler starts a fresh state and re-feeds the last tokens it wants to keep; feeding
more than `max_seq_len` tokens into one state raises ValueError, as do ids that are not (B, T) integers inside
the vocabulary (`ids.check_ids`).

Rebuilding: every model has `net.name`, `net.get_config()` (its constructor arguments, JSON-friendly)
and `num_params()`, so `build_model(net.name, **net.get_config())` recreates it from a checkpoint.
"""

from __future__ import annotations

from torch import nn

from musictx.models.attention import PlainSelfAttention, RelativeSelfAttention
from musictx.models.kv_cache import KVCache
from musictx.models.lstm import LSTMBaseline, LSTMState
from musictx.models.transformer import DecoderCache, MusicTransformer, VanillaTransformer

# A model's identity is its class's `name`, written once there; configs and checkpoints refer to it.
MODELS: dict[str, type[nn.Module]] = {cls.name: cls for cls in (MusicTransformer, VanillaTransformer, LSTMBaseline)}


def build_model(name: str, vocab_size: int, **kwargs) -> nn.Module:
    """Build the model registered as `name` ("music_transformer", "transformer", "lstm")."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name](vocab_size=vocab_size, **kwargs)


__all__ = [
    "MODELS",
    "DecoderCache",
    "KVCache",
    "LSTMBaseline",
    "LSTMState",
    "MusicTransformer",
    "PlainSelfAttention",
    "RelativeSelfAttention",
    "VanillaTransformer",
    "build_model",
]
