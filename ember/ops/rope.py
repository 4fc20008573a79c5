"""Rotary position embedding (RoPE) for q and k in one launch.

``q [tokens, qo_heads, head_dim]`` and ``k [tokens, kv_heads, head_dim]`` are rotated by the
angles of ``positions [tokens]``: pair ``i`` of the first ``rotary_dim`` dims turns by
``position * inv_freq_i``. Pairs are NeoX-style ``(i, i + rotary_dim / 2)`` or, with
``interleave=True``, GPT-J-style ``(2i, 2i + 1)``. The angles come from a ``cos_sin_cache
[max_position, rotary_dim]`` (cos then sin, fp32: the vLLM / FlashInfer layout) or are computed:
``inv_freq_i = rope_theta^(-2i / rotary_dim) / rope_scale``, optionally with Llama-3.1's
frequency scaling. Device code ``csrc/include/ember/rope.cuh`` → ``csrc/ops/rope.{cc,cu}`` → one
module per dtype (``rope_bf16``, ``rope_fp16``, ``rope_fp32``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.trace import trace
from ember.trace.dense import APPLY_ROPE, APPLY_ROPE_, APPLY_ROPE_COS_SIN, APPLY_ROPE_COS_SIN_

__all__ = [
    "apply_rope",
    "apply_rope_",
    "apply_rope_with_cos_sin_cache",
    "apply_rope_with_cos_sin_cache_",
    "rope_spec",
]

DTYPES: dict[str, tuple[str, str, int]] = {
    "bf16": ("ember::bfloat16", "kDLBfloat", 16),
    "fp16": ("ember::half", "kDLFloat", 16),
    "fp32": ("float", "kDLFloat", 32),
}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}
_LLAMA31_KEYS = (
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
)


def rope_spec(dtype: str) -> KernelSpec:
    """The RoPE module for one dtype (``bf16``, ``fp16``, ``fp32``); any GPU from sm_80 on."""
    if dtype not in DTYPES:
        raise ValueError(f"rope_spec: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    ctype, code, bits = DTYPES[dtype]
    ops = CSRC_DIR / "ops"
    return KernelSpec(
        uri=f"rope_{dtype}",
        sources=(ops / "rope.cc", ops / "rope.cu"),
        archs=("sm80+",),
        cflags=(f"-DEMBER_ROPE_DL_CODE={code}", f"-DEMBER_ROPE_DL_BITS={bits}"),
        cuda_cflags=(f"-DEMBER_ROPE_DTYPE={ctype}",),
        params=(("dtype", dtype),),
    )


@register("rope")
def _specs() -> Iterator[KernelSpec]:
    for dtype in DTYPES:
        yield rope_spec(dtype)


_MODULES: dict[Any, Any] = {}


def _module(q: Any, fn: str) -> Any:
    dtype = getattr(q, "dtype", None)
    if dtype is None:
        raise TypeError(f"{fn}: `q` must be a tensor, got {type(q).__name__}")
    mod = _MODULES.get(dtype)
    if mod is None:
        name = _TORCH_NAMES.get(str(dtype))
        if name is None:
            raise TypeError(f"{fn}: `q` must be bfloat16, float16 or float32, got {dtype}")
        mod = _MODULES[dtype] = build_and_load(rope_spec(name))
    return mod


def _llama31(fn: str, scaling: Mapping[str, float] | None) -> tuple[float, float, float, float]:
    if scaling is None:
        return 0.0, 0.0, 0.0, 0.0
    missing = [k for k in _LLAMA31_KEYS if k not in scaling]
    if missing:
        raise ValueError(
            f"{fn}: `llama31_scaling` needs the keys {_LLAMA31_KEYS}, missing {missing}"
        )
    vals = tuple(float(scaling[k]) for k in _LLAMA31_KEYS)
    return vals[0], vals[1], vals[2], vals[3]


def _run(  # noqa: PLR0917 (the public functions' arguments, passed through)
    fn: str, q: Any, k: Any, positions: Any, cache: Any, rotary_dim: int | None,
    interleave: bool, theta: float, scale: float, llama31: Any, out_q: Any, out_k: Any,
) -> tuple[Any, Any]:  # fmt: skip
    mod = _module(q, fn)
    head_dim = q.shape[-1] if getattr(q, "dim", lambda: 0)() == 3 else 0
    rot = head_dim if rotary_dim is None else rotary_dim
    if not isinstance(rot, int):
        raise TypeError(f"{fn}: `rotary_dim` must be an int, got {type(rot).__name__}")
    factor, low, high, old = _llama31(fn, llama31)
    if out_q is None:
        out_q = q.new_empty(q.shape)
    if out_k is None:
        out_k = k.new_empty(k.shape)
    mod.apply(
        q, k, out_q, out_k, positions, cache, rot, bool(interleave), float(theta), float(scale),
        factor, low, high, old,
    )  # fmt: skip
    return out_q, out_k


@trace(APPLY_ROPE)
@api
def apply_rope(
    q: Any,
    k: Any,
    positions: Any,
    *,
    rotary_dim: int | None = None,
    interleave: bool = False,
    rope_theta: float = 1e4,
    rope_scale: float = 1.0,
    llama31_scaling: Mapping[str, float] | None = None,
    out_q: Any = None,
    out_k: Any = None,
) -> tuple[Any, Any]:
    """Rotate ``q`` and ``k`` by their tokens' positions, angles computed on the fly.

    Parameters
    ----------
    q, k:
        ``[tokens, qo_heads, head_dim]`` and ``[tokens, kv_heads, head_dim]`` (head counts may
        differ), bf16/fp16/fp32, the last dimension contiguous (token and head strides free);
        ``head_dim`` <= 512.
    positions:
        ``[tokens]`` int32 or int64, >= 0 (a negative position leaves its token unrotated in
        place and its outputs unwritten).
    rotary_dim:
        The leading dims that rotate (even); default ``head_dim``. The rest pass through.
    interleave:
        GPT-J pairs ``(2i, 2i+1)``; default NeoX pairs ``(i, i + rotary_dim/2)``.
    rope_theta, rope_scale:
        ``inv_freq_i = rope_theta^(-2i/rotary_dim) / rope_scale`` (computed in fp32).
    llama31_scaling:
        Llama-3.1's frequency scaling, as in the model config: ``{"factor",
        "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}``.
    out_q, out_k:
        Outputs (``q``/``k`` themselves for in place, see :func:`apply_rope_`); allocated if
        ``None``.

    Returns
    -------
    ``(out_q, out_k)``.

    Raises
    ------
    TypeError, ValueError
        Before any launch, naming the argument: dtypes, shapes, strides, ``rotary_dim``,
        ``rope_theta`` / ``rope_scale``, the scaling keys and values, devices.
    """
    return _run(
        "ember.apply_rope", q, k, positions, None, rotary_dim, interleave, rope_theta, rope_scale,
        llama31_scaling, out_q, out_k,
    )  # fmt: skip


@trace(APPLY_ROPE_)
@api
def apply_rope_(q: Any, k: Any, positions: Any, **kwargs: Any) -> None:
    """:func:`apply_rope` in place (the same keywords, without ``out_q`` / ``out_k``)."""
    apply_rope(q, k, positions, out_q=q, out_k=k, **kwargs)


@trace(APPLY_ROPE_COS_SIN)
@api
def apply_rope_with_cos_sin_cache(
    q: Any,
    k: Any,
    positions: Any,
    cos_sin_cache: Any,
    *,
    interleave: bool = False,
    out_q: Any = None,
    out_k: Any = None,
) -> tuple[Any, Any]:
    """Rotate ``q`` and ``k`` with angles from a precomputed cache.

    ``cos_sin_cache`` is ``[max_position, rotary_dim]`` fp32, contiguous: ``cos`` of the
    ``rotary_dim / 2`` pairs, then their ``sin`` (the vLLM / FlashInfer layout). A position
    outside ``[0, max_position)`` is never read: its token is left unrotated in place and its
    outputs unwritten. Otherwise as :func:`apply_rope`.
    """
    if not hasattr(cos_sin_cache, "shape"):
        raise TypeError(
            "ember.apply_rope: `cos_sin_cache` must be a tensor, "
            f"got {type(cos_sin_cache).__name__}"
        )
    if len(cos_sin_cache.shape) != 2:
        raise ValueError(
            "ember.apply_rope: `cos_sin_cache` must be [max_position, rotary_dim] (cos then sin), "
            f"got {list(cos_sin_cache.shape)}"
        )
    rot = cos_sin_cache.shape[-1]
    return _run(
        "ember.apply_rope", q, k, positions, cos_sin_cache, int(rot), interleave, 1e4, 1.0, None,
        out_q, out_k,
    )  # fmt: skip


@trace(APPLY_ROPE_COS_SIN_)
@api
def apply_rope_with_cos_sin_cache_(
    q: Any, k: Any, positions: Any, cos_sin_cache: Any, *, interleave: bool = False
) -> None:
    """:func:`apply_rope_with_cos_sin_cache` in place."""
    apply_rope_with_cos_sin_cache(
        q, k, positions, cos_sin_cache, interleave=interleave, out_q=q, out_k=k
    )
