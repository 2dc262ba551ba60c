"""Attention kernels behind the models' ``attn_impl``: plain torch (and triton, optional) only, no musictx import.

- `efficient_attention.attend_efficient`: the memory-efficient relative-attention kernel over query blocks,
  registered as the ``musictx::relative_attention_v4`` op so that torch.compile keeps it as one call.
- `triton_attention.attend_triton`: the fused GPU kernel (Triton), runnable on CPU under TRITON_INTERPRET=1.

Both compute the function of `musictx.models.attention.attend_naive` for the same q, k, v and table. The
models import this floor, never the other way: a kernel is a function of tensors and knows no module.
"""
