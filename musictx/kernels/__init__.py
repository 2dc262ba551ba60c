"""Faster kernels for the models' relative attention, registered into `musictx.models.attention.KERNELS`
when this package is imported (the model loader and training import it; the models never import it).

- `efficient_attention.attend_efficient`: the blockwise kernel of `musictx.models.attention.attend_blockwise`
  as the ``musictx::relative_attention_v4`` op (one call under torch.compile, repacked inputs, a hand
  written backward, fp32 statistics under autocast), registered as impl "efficient".
- `triton_attention.attend_triton`: the fused GPU kernel (Triton), runnable on CPU under TRITON_INTERPRET=1,
  registered as impl "triton" (and so picked by "auto" on CUDA) when the triton package is installed.

Both compute the function of `musictx.models.attention.attend_naive` for the same q, k, v and table. The
kernel files themselves are functions of tensors and import only torch (and triton).
"""

from importlib.util import find_spec

from torch import Tensor

from musictx.kernels.efficient_attention import attend_efficient
from musictx.models.attention import register_kernel


def _attend_triton(q: Tensor, k: Tensor, v: Tensor, rel_emb: Tensor, dropout_p: float = 0.0,
                   block_size: int = 0) -> Tensor:
    """`attend_triton` in the registry's signature; its own tiles, not the efficient kernel's block size."""
    from musictx.kernels.triton_attention import attend_triton  # lazy: importing triton is slow, CPUs never need it

    return attend_triton(q, k, v, rel_emb, dropout_p)


register_kernel("efficient", attend_efficient)
if find_spec("triton") is not None:
    register_kernel("triton", _attend_triton)
