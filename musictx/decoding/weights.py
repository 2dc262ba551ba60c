"""What a decoding step reads, gathered once per `FastDecoder`: at batch 1, looking up a submodule's
parameter costs about as much as a small op, so a step reads these fields instead of walking the modules.

The products' weights are taken as (in, out) operands in the layout a one-row product runs fastest on
(`matvec_operand`: for most of them a copy). A decoder therefore sees the parameters as they were when it
was made; the sampler makes one per call.

With ``int8``, the blocks' four products run as int8 products instead (`Int8Product`: the weight's rows
quantized once, each step's activations on the fly), which a step of a large model is bound by: the bytes of
its weights. The head and the attention's relative table stay fp32.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from musictx.decoding.ops import decode_table, matvec_operand
from musictx.models.attention import RelativeSelfAttention
from musictx.models.transformer import Block, VanillaTransformer

# attention impls whose one-query case `decode_attention` computes (on CPU tensors)
FAST_IMPLS = ("efficient", "auto")


class Int8Product:
    """``x @ W.T + b`` of a Linear with its weight W (out, in) in int8, one scale per output row, for the CPU's
    int8 kernels (FBGEMM): each call quantizes the activations x (rows, in) to 8 bits on the fly (7 of them, as
    those kernels ask on x86 to keep their sums from saturating) and returns fp32."""

    __slots__ = ("packed",)

    def __init__(self, weight: Tensor, bias: Tensor):
        scales = (weight.detach().float().abs().amax(dim=1) / 127).clamp_min(1e-12).double()  # (out,)
        zeros = torch.zeros(len(scales), dtype=torch.long)
        with warnings.catch_warnings():  # torch's quantized tensors warn that they are to move to torchao
            warnings.simplefilter("ignore", UserWarning)
            rows = torch.quantize_per_channel(weight.detach().float(), scales, zeros, 0, torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(rows, bias.detach().float())

    def __call__(self, x: Tensor) -> Tensor:
        return torch.ops.quantized.linear_dynamic(x, self.packed, True)  # (rows, out) fp32


@dataclass(slots=True, frozen=True)
class AttentionWeights:
    """One attention layer: its projections, and ``table`` (`decode_table`) where `decode_attention` serves
    its steps; None: the layer's own one-query kernel (`attend`) does."""

    layer: nn.Module
    n_heads: int
    d_head: int
    qkv_wt: Tensor  # (d_model, 3 * H * D)
    qkv_b: Tensor
    proj_wt: Tensor  # (H * D, d_model)
    proj_b: Tensor
    table: Tensor | None  # (H, D, M)
    qkv_int8: Int8Product | None = None  # the products in int8 (module docstring); None: fp32
    proj_int8: Int8Product | None = None


@dataclass(slots=True, frozen=True)
class BlockWeights:
    """One pre-LN block: its two LayerNorms, its feed-forward products and its attention."""

    ln1_w: Tensor
    ln1_b: Tensor
    ln1_eps: float
    ln2_w: Tensor
    ln2_b: Tensor
    ln2_eps: float
    fc1_wt: Tensor  # (d_model, d_ff)
    fc1_b: Tensor
    fc2_wt: Tensor  # (d_ff, d_model)
    fc2_b: Tensor
    attn: AttentionWeights
    fc1_int8: Int8Product | None = None  # the products in int8 (module docstring); None: fp32
    fc2_int8: Int8Product | None = None


@dataclass(slots=True, frozen=True)
class NetWeights:
    """The whole decoder: the token table already multiplied by sqrt(d_model) (the same product at every
    step), absolute positions (None for relative attention), the blocks, the final LN and the head."""

    emb: Tensor  # (V, d_model)
    positions: Tensor | None  # (max_seq_len, d_model)
    blocks: tuple[BlockWeights, ...]
    ln_shape: tuple[int, ...]
    ln_w: Tensor
    ln_b: Tensor
    ln_eps: float
    head_t: Tensor  # (d_model, V)


def _int8(linear: nn.Module, int8: bool) -> Int8Product | None:
    return Int8Product(linear.weight, linear.bias) if int8 else None


def _operand(linear: nn.Module, int8: bool) -> Tensor:
    """The fp32 (in, out) operand of a product (`matvec_operand`); where its int8 twin steps, a view only: the
    steps never read it, so no copy is made."""
    return linear.weight.t() if int8 else matvec_operand(linear.weight)


def attention_weights(layer: nn.Module, int8: bool = False) -> AttentionWeights:
    fast = isinstance(layer, RelativeSelfAttention) and layer.impl in FAST_IMPLS and not layer.rel_emb.is_cuda
    return AttentionWeights(layer, layer.n_heads, layer.d_head, _operand(layer.qkv, int8), layer.qkv.bias,
                            _operand(layer.proj, int8), layer.proj.bias,
                            decode_table(layer.rel_emb) if fast else None, _int8(layer.qkv, int8),
                            _int8(layer.proj, int8))


def block_weights(block: Block, int8: bool = False) -> BlockWeights:
    fc1, _, fc2 = block.ff
    return BlockWeights(block.ln1.weight, block.ln1.bias, block.ln1.eps, block.ln2.weight, block.ln2.bias,
                        block.ln2.eps, _operand(fc1, int8), fc1.bias, _operand(fc2, int8), fc2.bias,
                        attention_weights(block.attn, int8), _int8(fc1, int8), _int8(fc2, int8))


@torch.no_grad()
def net_weights(net: nn.Module, int8: bool = False) -> NetWeights:
    """The tensors of a `MusicTransformer` or `VanillaTransformer` that its decoding steps read; ``int8``: the
    blocks' products as `Int8Product` (CPU only)."""
    if int8 and net.head.weight.is_cuda:
        raise ValueError("int8 decoding steps run on the CPU's int8 kernels: the net is on a GPU")
    emb, ln = net.tok_emb.weight, net.ln_f
    positions = net.pos_emb if isinstance(net, VanillaTransformer) else None
    return NetWeights(emb * math.sqrt(emb.shape[1]), positions, tuple(block_weights(b, int8) for b in net.blocks),
                      tuple(ln.normalized_shape), ln.weight, ln.bias, ln.eps, matvec_operand(net.head.weight))
