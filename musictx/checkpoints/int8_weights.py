"""Weights stored in int8: a large model's block products (the Linear layers inside its blocks) as int8 with one
scale per output row, the rest in fp16, so that a 6 x 512 Music Transformer fits in ~20 MB instead of 32 MB.

Loading gives fp32 weights again (each row's int8 values times its scale) and marks the net ``int8_steps``: its
decoding steps then run those products on the CPU's int8 kernels (`musictx.decoding.weights.Int8Product`),
which quantize the stored rows again to the very same int8 values. What both cost in nats is measured in
docs/piano-paper-size.md.
"""

from __future__ import annotations

import torch
from torch import nn

SCALE_SUFFIX = ".int8_scale"  # the key of a stored row scale: the weight's own key and this


def int8_keys(net: nn.Module) -> set[str]:
    """The state-dict keys of the weights stored in int8: every Linear's weight inside the net's blocks."""
    blocks = getattr(net, "blocks", None)
    if blocks is None:
        raise ValueError(f"int8 weights are for the Transformers' blocks; {type(net).__name__} has none")
    return {f"blocks.{name}.weight" for name, module in blocks.named_modules() if isinstance(module, nn.Linear)}


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 values (out, in), fp32 scales (out,)): symmetric, each row's largest magnitude at 127."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127).clamp_min(1e-12)
    return torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8), scales


def to_int8_state(net: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` for storage: the block products' weights as int8 plus their scales, everything else fp16."""
    keys, stored = int8_keys(net), {}
    for name, value in state.items():
        if name in keys:
            stored[name], stored[name + SCALE_SUFFIX] = quantize_rows(value)
        else:
            stored[name] = value.detach().to(torch.float16)
    return {name: value.contiguous() for name, value in stored.items()}


def from_int8_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The fp32 state of stored int8 weights (`to_int8_state`): each int8 weight times its row scales."""
    out = {}
    for name, value in state.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = state.get(name + SCALE_SUFFIX)
        if value.dtype == torch.int8:
            if scale is None or scale.shape != value.shape[:1]:
                raise ValueError(f"int8 weight {name} has no row scales ({name + SCALE_SUFFIX}) of its rows")
            out[name] = value.float() * scale.float()[:, None]
        else:
            out[name] = value.float()
    return out
