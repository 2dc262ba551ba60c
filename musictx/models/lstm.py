"""LSTM language model over event-token ids: the Performance RNN baseline (Oore et al. 2018)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from musictx.models.ids import check_ids


def _cpu_bf16_lstm_unsupported(x: Tensor) -> bool:
    """True under CPU bf16 autocast on a CPU whose oneDNN has no bf16 LSTM (no AVX-512 bf16, e.g. Zen 3):
    there nn.LSTM fails with "could not create a primitive descriptor for the LSTM forward"."""
    if x.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return False
    if torch.get_autocast_dtype("cpu") != torch.bfloat16:
        return False
    return not torch.ops.mkldnn._is_mkldnn_bf16_supported()


@dataclass
class LSTMState:
    """Incremental-decoding state of `LSTMBaseline`: (h, c) of every layer, each (n_layers, B, hidden)."""

    h: Tensor | None = None
    c: Tensor | None = None
    length: int = 0  # tokens fed so far; kept so every model's state answers `.length`


class LSTMBaseline(nn.Module):
    """Embedding -> stacked LSTM -> dropout -> vocabulary head.

    Same calling protocol as the Transformers: net(ids) -> logits (B, T, V);
    net(ids, cache=state) -> (logits, state) with `state = net.init_cache()` to start. `max_seq_len` is
    None: the state has no length limit.
    """

    name = "lstm"

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 512,
        hidden_size: int = 512,
        n_layers: int = 3,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.config = dict(vocab_size=vocab_size, d_model=d_model, hidden_size=hidden_size, n_layers=n_layers,
                           dropout=dropout)
        self.vocab_size, self.max_seq_len = vocab_size, None
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        # nn.LSTM applies dropout between layers only; the outer Dropouts cover input and output
        self.lstm = nn.LSTM(d_model, hidden_size, n_layers, dropout=dropout if n_layers > 1 else 0.0,
                            batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def get_config(self) -> dict:
        """Constructor arguments: `build_model(net.name, **net.get_config())` rebuilds the model."""
        return dict(self.config)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def init_cache(self) -> LSTMState:
        """Empty decoding state for `net(ids, cache=state)`."""
        return LSTMState()

    def forward(self, ids: Tensor, cache: LSTMState | None = None):
        """ids (B, T) long -> logits (B, T, V); with `cache`, returns (logits, cache) updated in place."""
        check_ids(ids, self.vocab_size, values=cache is None or cache.length == 0)
        x = self.drop(self.tok_emb(ids))  # (B, T, d_model)
        hc = None if cache is None or cache.h is None else (cache.h, cache.c)
        if _cpu_bf16_lstm_unsupported(x):
            y, (h, c) = self._lstm_fp32(x, hc)
        else:
            y, (h, c) = self.lstm(x, hc)  # (B, T, hidden)
        logits = self.head(self.drop(y))  # (B, T, V)
        if cache is None:
            return logits
        cache.h, cache.c, cache.length = h, c, cache.length + ids.shape[1]
        return logits, cache

    def _lstm_fp32(self, x: Tensor, hc):
        """The recurrent layers in fp32 with autocast off (the head stays under autocast), told once."""
        if not getattr(LSTMBaseline, "_told_fp32", False):
            LSTMBaseline._told_fp32 = True
            warnings.warn("this CPU has no bf16 LSTM kernel (oneDNN needs AVX-512 bf16): under bf16-mixed the "
                          "LSTM layers run in fp32, the embedding and head in bf16", stacklevel=3)
        with torch.autocast("cpu", enabled=False):
            hc = None if hc is None else tuple(t.float() for t in hc)
            return self.lstm(x.float(), hc)
