"""Gated activations: ``silu_and_mul``, ``gelu_and_mul``, ``gelu_tanh_and_mul``.

``out = act(x[..., :d]) * x[..., d:]`` for ``x`` of last dimension ``2 * d`` (the fused gate/up
projection's output), computed in fp32. Device code ``csrc/include/ember/act.cuh`` → kernel unit
``csrc/ops/act.cu`` and binding ``csrc/ops/act.cc`` → one module per dtype (``act_bf16``,
``act_fp16``, ``act_fp32``) → the functions below.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.trace import trace
from ember.trace.dense import GELU_AND_MUL, GELU_TANH_AND_MUL, SILU_AND_MUL

__all__ = ["act_spec", "gelu_and_mul", "gelu_tanh_and_mul", "silu_and_mul"]

# dtype name -> (C++ storage type, DLPack code, bits)
DTYPES: dict[str, tuple[str, str, int]] = {
    "bf16": ("ember::bfloat16", "kDLBfloat", 16),
    "fp16": ("ember::half", "kDLFloat", 16),
    "fp32": ("float", "kDLFloat", 32),
}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}


def act_spec(dtype: str) -> KernelSpec:
    """The gated-activation module for one dtype (``bf16``, ``fp16``, ``fp32``); sm_80 on."""
    if dtype not in DTYPES:
        raise ValueError(f"act_spec: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    ctype, code, bits = DTYPES[dtype]
    ops = CSRC_DIR / "ops"
    return KernelSpec(
        uri=f"act_{dtype}",
        sources=(ops / "act.cc", ops / "act.cu"),
        archs=("sm80+",),
        cflags=(f"-DEMBER_ACT_DL_CODE={code}", f"-DEMBER_ACT_DL_BITS={bits}"),
        cuda_cflags=(f"-DEMBER_ACT_DTYPE={ctype}",),
        params=(("dtype", dtype),),
    )


@register("act")
def _specs() -> Iterator[KernelSpec]:
    for dtype in DTYPES:
        yield act_spec(dtype)


_MODULES: dict[Any, Any] = {}  # torch dtype -> loaded module


def _module(x: Any, fn: str) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise TypeError(f"{fn}: `x` must be a tensor, got {type(x).__name__}")
    mod = _MODULES.get(dtype)
    if mod is None:
        name = _TORCH_NAMES.get(str(dtype))
        if name is None:
            raise TypeError(f"{fn}: `x` must be bfloat16, float16 or float32, got {dtype}")
        mod = _MODULES[dtype] = build_and_load(act_spec(name))
    return mod


def _gated(name: str, x: Any, out: Any) -> Any:
    fn = f"ember.{name}"
    mod = _module(x, fn)
    if out is None:
        if x.dim() < 1 or x.shape[-1] % 2:
            raise ValueError(
                f"{fn}: `x` must be [..., 2 * d] (an even last dimension), got {list(x.shape)}"
            )
        out = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
    getattr(mod, name)(x, out)
    return out


@trace(SILU_AND_MUL)
@api
def silu_and_mul(x: Any, *, out: Any = None) -> Any:
    """``silu(x[..., :d]) * x[..., d:]`` (SwiGLU's gate), computed in fp32.

    Parameters
    ----------
    x:
        ``[..., 2 * d]``, bf16, fp16 or fp32 on a CUDA device; the last dimension contiguous and
        the leading ones flattening to rows (any row stride). Rows, halves and ``out`` that are
        16-byte aligned move 16 bytes per access; others one element.
    out:
        Optional ``[..., d]`` output of ``x``'s dtype; allocated if ``None``.

    Returns
    -------
    ``out``.

    Raises
    ------
    TypeError
        A dtype is unsupported or ``out``'s differs.
    ValueError
        An odd last dimension, a mismatched ``out`` shape, a non-contiguous last dimension,
        leading dimensions that do not flatten to rows, or a device mismatch.

    Examples
    --------
    >>> h = ember.silu_and_mul(gate_up)          # doctest: +SKIP
    """
    return _gated("silu_and_mul", x, out)


@trace(GELU_AND_MUL)
@api
def gelu_and_mul(x: Any, *, out: Any = None) -> Any:
    """``gelu(x[..., :d]) * x[..., d:]`` with the exact (erf) GELU; as :func:`silu_and_mul`."""
    return _gated("gelu_and_mul", x, out)


@trace(GELU_TANH_AND_MUL)
@api
def gelu_tanh_and_mul(x: Any, *, out: Any = None) -> Any:
    """``gelu_tanh(x[..., :d]) * x[..., d:]`` (GELU's tanh approximation, GeGLU as in Gemma);
    as :func:`silu_and_mul`."""
    return _gated("gelu_tanh_and_mul", x, out)
