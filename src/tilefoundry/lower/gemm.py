"""Which matmuls the GEMM schedule takes (lower/matmul.py's ``_cuda_gemm``, cuda/ops/matmul_gmma.cuh): many rows
of 16-bit operands on a Hopper GPU, through the tensor cores.

The passes that fuse other ops into a matmul's call ask here first: a GEMM reads its first operand as stored, with
no reduction after it in the call (prologue.py, reduce_epilogue.py leave those ops stages of their own), and two
weights a call only as a pair of 2-D products (pairs.py), and dispatch.py's ``row_variants`` splits a function whose
matmuls' row count may fall on either side of CUDA_GEMM_MIN_ROWS.
"""

from __future__ import annotations

from ..ir.types.dim import dim_range
from ..target import CudaTarget, Target
from .program import Op

# Rows from which a matmul of 16-bit operands takes the GEMM schedule (fewer: the decode step's GEMV).
CUDA_GEMM_MIN_ROWS = 17


def gemm_target(target: Target) -> bool:
    """Whether ``target`` runs the GEMM schedule: a Hopper GPU's sm_90a (wgmma)."""
    return isinstance(target, CudaTarget) and target.arch == "sm_90a"


def gemm_operands(op: Op, target: Target) -> bool:
    """Whether matmul ``op`` is of the kind the GEMM schedule computes, its row count aside: a ``gemm_target``, both
    operands of one 16-bit float type accumulated in f32."""
    if not gemm_target(target) or op.op != "matmul":
        return False
    a, b = op.inputs[0].type, op.inputs[1].type
    return a.dtype == b.dtype and a.dtype.name in ("bf16", "f16") and op.attrs["acc_dtype"].name == "f32"


def gemm_rows(op: Op, target: Target) -> bool:
    """Whether matmul ``op`` is one the GEMM schedule takes where its layouts allow (``_cuda_gemm``): an sm_90a
    target (wgmma), at least CUDA_GEMM_MIN_ROWS rows whatever value the row count's DimVars take, both operands of
    one 16-bit float type accumulated in f32. Such a matmul keeps its rms_norm and its reductions out of its call,
    and pairs only as 2-D products (module docstring)."""
    if not gemm_operands(op, target):
        return False
    a = op.inputs[0].type
    rows = dim_range(a.shape[-2]) if a.rank >= 2 else (1, 1)
    return rows is not None and rows[0] >= CUDA_GEMM_MIN_ROWS
