"""Kernels that need more than torch: `triton_attention.attend_triton`, the fused relative-attention kernel
for CUDA GPUs (Triton), runnable on CPU under TRITON_INTERPRET=1.

Importing this package registers nothing. `musictx.models.attention.RelativeSelfAttention` imports the
kernel itself on first use with impl "triton" (or "auto" on CUDA) when the triton package is installed.
The memory-efficient blockwise kernel is plain torch and lives with the model
(`musictx.models.efficient_attention`).
"""
