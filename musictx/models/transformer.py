"""Decoder-only Transformers over event-token ids: Music Transformer (relative attention) and the vanilla
Transformer baseline (absolute positions, plain causal attention). Both share `Block` and `_DecoderLM`.

Choices: pre-LayerNorm blocks (LN -> attention -> residual; LN -> FFN(GELU) -> residual) and a final LN,
which train stably without warm-up tricks. Token embeddings are drawn N(0, 1/d_model) and multiplied by
sqrt(d_model) (tensor2tensor's convention, which the paper used): unit-variance embeddings that the
sinusoidal positions of the vanilla model (amplitude 1) do not drown. Other weights N(0, 0.02), with
the residual output projections shrunk by 1/sqrt(2 * n_layers); input and output embeddings untied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from musictx.models.attention import BLOCK_SIZE, PlainSelfAttention, RelativeSelfAttention
from musictx.models.ids import check_ids
from musictx.models.kv_cache import KVCache

CONTEXT = 2048  # max_seq_len, the paper's; ``data.seq_len`` in conf/data/default.yaml, which the models follow


@dataclass
class DecoderCache:
    """Incremental-decoding state of a decoder: one KVCache per layer. Made by `init_cache()`."""

    layers: list[KVCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Number of tokens fed so far (positions are counted from the first of them)."""
        return self.layers[0].length if self.layers else 0


class Block(nn.Module):
    """Pre-LN Transformer block around any self-attention module taking (x, cache)."""

    def __init__(self, attn: nn.Module, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), attn
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        x = x + self.drop(self.attn(self.ln1(x), cache))  # (B, T, d_model)
        return x + self.drop(self.ff(self.ln2(x)))

class _DecoderLM(nn.Module):
    """Token embedding -> blocks -> final LN -> vocabulary head; subclasses add positions.

    Calling protocol (same for every musictx model):
      net(ids)                -> logits (B, T, V)            training / scoring
      net(ids, cache=state)   -> (logits (B, T, V), state)   incremental decoding
    where `state = net.init_cache()` starts a new sequence; ids are then the tokens *after* those
    already in the state (a whole prompt, then one token per step). The state is updated in place and
    also returned. It holds at most `max_seq_len` tokens: for longer pieces start a new state and re-feed
    the last tokens (positions count from the first token of a state).
    """

    name = ""
    # whether decoding steps on a CPU run this net's block products in int8 (`musictx.decoding.weights`):
    # set where its weights were stored in int8 (the model store), not part of its config or state
    int8_steps = False

    def __init__(self, config: dict, vocab_size: int, d_model: int, n_layers: int, dropout: float,
                 max_seq_len: int, gradient_checkpointing: bool):
        super().__init__()
        self.config = dict(config)
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.gradient_checkpointing = gradient_checkpointing
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList()  # filled by the subclass
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def _init_weights(self, n_layers: int) -> None:
        for name, p in self.named_parameters():
            if p.dim() < 2 or name.endswith("rel_emb"):
                continue  # biases, LayerNorms and relative tables keep their own init
            std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("attn.proj.weight", "ff.2.weight")) else 0.02
            nn.init.normal_(p, std=std)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
        nn.init.normal_(self.tok_emb.weight, std=self.tok_emb.embedding_dim**-0.5)

    def get_config(self) -> dict:
        """Constructor arguments: `build_model(net.name, **net.get_config())` rebuilds the model."""
        return dict(self.config)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def init_cache(self, cache_class: type[KVCache] = KVCache) -> DecoderCache:
        """Empty decoding state for `net(ids, cache=state)`; tensors are allocated on first use. A decoding
        engine may ask for its own `KVCache` subclass (a buffer layout for its steps)."""
        return DecoderCache([cache_class(capacity=self.max_seq_len) for _ in self.blocks])

    def _positions(self, x: Tensor, start: int) -> Tensor:
        """Add position information to the embeddings x (B, T, d_model) of positions start..start+T-1."""
        return x

    def forward(self, ids: Tensor, cache: DecoderCache | None = None):
        """ids (B, T) long -> logits (B, T, V); with `cache`, returns (logits, cache). See class doc."""
        start = 0 if cache is None else cache.length
        check_ids(ids, self.vocab_size, values=start == 0)
        self._check_room(start, ids.shape[1])
        x = self.tok_emb(ids) * math.sqrt(self.tok_emb.embedding_dim)  # (B, T, d_model)
        x = self.drop(self._positions(x, start))
        for i, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache.layers[i]
            if self.gradient_checkpointing and self.training and cache is None:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x, layer_cache)
        logits = self.head(self.ln_f(x))  # (B, T, V)
        return logits if cache is None else (logits, cache)

    def _check_room(self, cached: int, new: int) -> None:
        if cached + new > self.max_seq_len:
            raise ValueError(f"{cached} cached + {new} new tokens exceed max_seq_len={self.max_seq_len}")

    @torch.no_grad()
    def attention_probs(self, ids: Tensor, rows) -> Tensor:
        """Attention of the positions `rows` over ids (B, T): (n_layers, B, H, R, T), each layer's own
        probabilities for its real input (see `_SelfAttention.attention_probs`). Eval mode, no cache."""
        x = self.tok_emb(ids) * math.sqrt(self.tok_emb.embedding_dim)
        x = self._positions(x, 0)
        maps = []
        for block in self.blocks:
            maps.append(block.attn.attention_probs(block.ln1(x), rows))
            x = block(x)
        return torch.stack(maps)


class MusicTransformer(_DecoderLM):
    """Decoder-only Transformer with relative self-attention (Huang et al. 2018).

    max_rel_dist defaults to max_seq_len // 2; attn_impl is "efficient" (memory-efficient kernel),
    "skew" (the paper's) or "naive" (reference); attn_block_size is the efficient kernel's query block.
    """

    name = "music_transformer"

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 512,
        n_layers: int = 6,
        n_heads: int = 8,
        d_ff: int = 1024,
        dropout: float = 0.1,
        max_seq_len: int = CONTEXT,
        max_rel_dist: int | None = None,
        attn_impl: str = "efficient",
        attn_block_size: int = BLOCK_SIZE,
        gradient_checkpointing: bool = False,
    ):
        max_rel_dist = max_rel_dist or max_seq_len // 2
        config = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff,
                      dropout=dropout, max_seq_len=max_seq_len, max_rel_dist=max_rel_dist, attn_impl=attn_impl,
                      attn_block_size=attn_block_size, gradient_checkpointing=gradient_checkpointing)
        super().__init__(config, vocab_size, d_model, n_layers, dropout, max_seq_len, gradient_checkpointing)
        for _ in range(n_layers):
            attn = RelativeSelfAttention(d_model, n_heads, max_rel_dist, dropout, attn_impl, attn_block_size)
            self.blocks.append(Block(attn, d_model, d_ff, dropout))
        self._init_weights(n_layers)

    def set_attn_impl(self, impl: str) -> None:
        """Switch every layer's attention kernel (e.g. to "skew" to compare); weights are unchanged."""
        for block in self.blocks:
            block.attn.impl = impl
        self.config["attn_impl"] = impl


def sinusoidal_positions(n_pos: int, d_model: int) -> Tensor:
    """(n_pos, d_model) sin/cos timing signal of Vaswani et al. 2017."""
    pos = torch.arange(n_pos, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_pos, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return table


class VanillaTransformer(_DecoderLM):
    """The paper's "Transformer baseline": absolute positions and plain causal attention (SDPA).

    positions: "sinusoidal" (fixed, as in the paper) or "learned".
    """

    name = "transformer"

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 512,
        n_layers: int = 6,
        n_heads: int = 8,
        d_ff: int = 1024,
        dropout: float = 0.1,
        max_seq_len: int = CONTEXT,
        positions: str = "sinusoidal",
        gradient_checkpointing: bool = False,
    ):
        if positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', not {positions!r}")
        config = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff,
                      dropout=dropout, max_seq_len=max_seq_len, positions=positions,
                      gradient_checkpointing=gradient_checkpointing)
        super().__init__(config, vocab_size, d_model, n_layers, dropout, max_seq_len, gradient_checkpointing)
        for _ in range(n_layers):
            self.blocks.append(Block(PlainSelfAttention(d_model, n_heads, dropout), d_model, d_ff, dropout))
        if positions == "learned":
            self.pos_emb = nn.Parameter(torch.zeros(max_seq_len, d_model))
        else:
            self.register_buffer("pos_emb", sinusoidal_positions(max_seq_len, d_model), persistent=False)
        self._init_weights(n_layers)

    def _positions(self, x: Tensor, start: int) -> Tensor:
        return x + self.pos_emb[start : start + x.shape[1]]
