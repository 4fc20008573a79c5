"""RMSNorm and fused add + RMSNorm.

Device code ``csrc/include/ember/norm.cuh`` → kernels ``csrc/ops/norm_{rmsnorm,fused}.cu`` and
binding ``csrc/ops/norm.cc`` (three translation units, compiled in parallel) → one module per
dtype (``norm_bf16``, ``norm_fp16``, ``norm_fp32``) → the functions below.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.trace import trace
from ember.trace.dense import FUSED_ADD_RMSNORM, RMSNORM

__all__ = ["DTYPES", "fused_add_rmsnorm_", "norm_spec", "plan_for", "rmsnorm"]

# dtype name -> (C++ storage type, DLPack code, bits)
DTYPES: dict[str, tuple[str, str, int]] = {
    "bf16": ("ember::bfloat16", "kDLBfloat", 16),
    "fp16": ("ember::half", "kDLFloat", 16),
    "fp32": ("float", "kDLFloat", 32),
}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}


def norm_spec(dtype: str) -> KernelSpec:
    """The norm module for one dtype (``bf16``, ``fp16`` or ``fp32``); any GPU from sm_80 on."""
    if dtype not in DTYPES:
        raise ValueError(f"norm_spec: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    ctype, code, bits = DTYPES[dtype]
    ops = CSRC_DIR / "ops"
    return KernelSpec(
        uri=f"norm_{dtype}",
        sources=(ops / "norm.cc", ops / "norm_rmsnorm.cu", ops / "norm_fused.cu"),
        archs=("sm80+",),
        cflags=(f"-DEMBER_NORM_DL_CODE={code}", f"-DEMBER_NORM_DL_BITS={bits}"),
        cuda_cflags=(f"-DEMBER_NORM_DTYPE={ctype}",),
        params=(("dtype", dtype),),
    )


@register("norm")
def _specs() -> Iterator[KernelSpec]:
    for dtype in DTYPES:
        yield norm_spec(dtype)


_MODULES: dict[Any, Any] = {}  # torch dtype -> loaded module (rmsnorm, rmsnorm_alloc, ...)
# NOTE: the eager hot path looks its function up in these directly (one dict subscript, no
# attribute access): ~0.1 us of a ~6 us call on the H200 host (docs/perf/notes/norm.md, v4).
_ALLOC: dict[Any, Any] = {}
_INTO: dict[Any, Any] = {}
_FUSED: dict[Any, Any] = {}


def _functions(x: Any, fn: str) -> Any:
    """The module for ``x``'s dtype (its functions as attributes), built on first use."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise TypeError(f"{fn}: `x` must be a tensor, got {type(x).__name__}")
    return _functions_for_dtype(dtype, fn)


def _functions_for_dtype(dtype: Any, fn: str) -> Any:
    """The module for a torch dtype (cached per dtype; fills the hot-path tables)."""
    if dtype in _MODULES:
        return _MODULES[dtype]
    name = _TORCH_NAMES.get(str(dtype))
    if name is None:
        raise TypeError(f"{fn}: `x` must be bfloat16, float16 or float32, got {dtype}")
    mod = build_and_load(norm_spec(name))
    _MODULES[dtype] = mod
    _ALLOC[dtype] = mod.rmsnorm_alloc
    _INTO[dtype] = mod.rmsnorm
    _FUSED[dtype] = mod.fused_add_rmsnorm
    return mod


@trace(RMSNORM)
@api
def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None) -> Any:
    """Root-mean-square normalisation over the last dimension.

    ``out = x / sqrt(mean(x**2, -1) + eps) * weight``, computed in fp32.

    Parameters
    ----------
    x:
        ``[tokens, hidden]``, or ``[tokens, heads, head_dim]`` for per-head (QK) norm; bf16, fp16
        or fp32 on a CUDA device. Rows may be strided; the last dimension must be contiguous.
    weight:
        ``[hidden]``, contiguous, same dtype and device as ``x``.
    eps:
        Added to the mean square, ``>= 0``.
    out:
        Optional output of ``x``'s shape and dtype (may be ``x`` itself); allocated if ``None``.

    Returns
    -------
    The normalised tensor (``out`` when given).

    Raises
    ------
    TypeError
        A dtype is unsupported or differs between tensors.
    ValueError
        Ranks, shapes, devices, strides or the hidden size are unsupported (hidden up to 65536
        for 16-byte aligned rows of bf16/fp16, 32768 for fp32; 8192 otherwise).

    Notes
    -----
    On sm_90 and newer the kernel launches as a programmatic dependent (PDL): it may start while
    the previous kernel on the stream is finishing and waits for that kernel's writes before its
    first load, so results are as with an ordinary launch; inside a CUDA graph this overlaps
    consecutive launches (about 0.6 µs per decode-sized call on an H200).

    Examples
    --------
    >>> y = ember.rmsnorm(x, w, eps=1e-6)          # doctest: +SKIP
    """
    if out is None:
        try:
            alloc = _ALLOC[x.dtype]
        except (KeyError, AttributeError):
            alloc = _functions(x, "ember.rmsnorm").rmsnorm_alloc
        return alloc(x, weight, eps)
    try:
        into = _INTO[x.dtype]
    except (KeyError, AttributeError):
        into = _functions(x, "ember.rmsnorm").rmsnorm
    into(x, weight, out, eps)
    return out


@trace(FUSED_ADD_RMSNORM)
@api
def fused_add_rmsnorm_(x: Any, residual: Any, weight: Any, eps: float = 1e-6) -> None:
    """In place: ``residual += x``, then ``x = rmsnorm(residual, weight, eps)``.

    The sum is rounded to the residual's dtype before it is normalised, so ``x`` is exactly the
    norm of what ``residual`` now holds. Shapes, dtypes and raises as :func:`rmsnorm`;
    ``residual`` has ``x``'s shape.

    Examples
    --------
    >>> ember.fused_add_rmsnorm_(hidden, residual, w)   # doctest: +SKIP
    """
    try:
        fused = _FUSED[x.dtype]
    except (KeyError, AttributeError):
        fused = _functions(x, "ember.fused_add_rmsnorm_").fused_add_rmsnorm
    fused(x, residual, weight, eps)


def plan_for(dtype: Any, hidden: int, rows: int = 8192, *, aligned: bool = True) -> tuple[int, ...]:
    """The launch plan for ``rows`` rows of a hidden size.

    ``(vec, vectors per thread, threads per row, rows per block, early weight)``; empty when
    unsupported. For tests and the benchmark harness.
    """
    return tuple(_functions_for_dtype(dtype, "plan_for").plan_for(hidden, rows, aligned))
