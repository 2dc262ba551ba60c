"""The fused kernels compile for a Hopper GPU (sm_90, the H100/H200 the device tool lends) right here, with no
GPU: Triton's own front end, LLVM and its bundled ptxas, fed the argument types each caller hands over.

Eager Triton passes Python floats (the softmax scale, the dropout rate) as fp32; torch.compile's Inductor
passes them as fp64. On the H200 (2026-11-26) the fp64 scale promoted the fp32 accumulators inside the loops
and Triton refused to compile `_fwd_kernel` under torch.compile. The CPU interpreter cannot see that (it
runs numpy, no types are checked), so this test compiles for real, in a fresh process: the interpreter
(TRITON_INTERPRET=1, set by test_triton_attention.py) swaps every kernel for an interpreted one.
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'musictx[gpu]')")

KERNELS = ("_fwd_kernel", "_bwd_kv_kernel", "_bwd_q_kernel")
CONSTANTS = ("BM", "BN", "BD", "BW", "DROPOUT", "PREC")  # ta._meta's


def _signature(arg_names: list[str], float_type: str) -> dict[str, str]:
    """Triton's type string of each argument, as a bf16 autocast step hands them over."""
    fp32_pointers = {"E", "LSE", "DELTA", "DE"}  # the table, the log-sum-exp, rowsum(dO * O), dE
    types = {}
    for name in arg_names:
        if name in CONSTANTS:
            types[name] = "constexpr"
        elif name in ("scale", "p_drop"):
            types[name] = float_type
        elif name == "SEED":
            types[name] = "*i64"
        elif name[0].isupper():
            types[name] = "*fp32" if name in fp32_pointers else "*bf16"
        else:
            types[name] = "i32"  # strides and sizes
    return types


def compile_all() -> None:
    """Compiles each kernel for sm_90 with fp32 and with fp64 float arguments, dropout on and off; prints one
    line per build."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from musictx.kernels import triton_attention as ta

    for float_type in ("fp32", "fp64"):
        for name in KERNELS:
            kernel = getattr(ta, name)
            block = 64 if name == "_fwd_kernel" else 32  # attend_triton's block_fwd / block_bwd
            for dropout in (0.0, 0.1):
                constants = ta._meta(64, block, dropout, torch.bfloat16)  # what TritonRelativeAttention launches
                warps = constants.pop("num_warps")
                source = ASTSource(kernel, _signature(kernel.arg_names, float_type), constants)
                built = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
                print(f"ok {name} {float_type} dropout={dropout} ptx {len(built.asm['ptx'])} chars", flush=True)


def test_the_kernels_compile_for_sm90_with_eager_and_inductor_argument_types():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600)
    built = [line for line in run.stdout.splitlines() if line.startswith("ok ")]
    assert run.returncode == 0 and len(built) == 12, run.stdout[-3000:] + run.stderr[-3000:]


if __name__ == "__main__":
    compile_all()
