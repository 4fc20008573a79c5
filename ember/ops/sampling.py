"""Sampling: softmax with temperature; sampling from probabilities or logits under top-k / top-p /
min-p filters; top-k/top-p renormalisation and top-k masking. No sort anywhere.

Device code ``csrc/include/ember/{softmax,sampling_filter}.cuh`` (shared pieces in
``sampling.cuh``) → ``csrc/ops/sampling.{cc,cu}`` and one ``sampling_filter_<mode>.cu`` a filter
mode → one module per logits dtype (``sampling_bf16``, ``sampling_fp16``, ``sampling_fp32``).
The softmax uses thread-block clusters, so the family needs sm_90 or newer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.trace import trace
from ember.trace.sampling import (
    MIN_P_SAMPLING_FROM_PROBS,
    SAMPLING_FROM_LOGITS,
    SAMPLING_FROM_PROBS,
    SOFTMAX,
    TOP_K_MASK_LOGITS,
    TOP_K_RENORM_PROBS,
    TOP_K_SAMPLING_FROM_PROBS,
    TOP_K_TOP_P_SAMPLING_FROM_LOGITS,
    TOP_K_TOP_P_SAMPLING_FROM_PROBS,
    TOP_P_RENORM_PROBS,
    TOP_P_SAMPLING_FROM_PROBS,
)

__all__ = [
    "min_p_sampling_from_probs",
    "sampling_from_logits",
    "sampling_from_probs",
    "sampling_spec",
    "softmax",
    "top_k_mask_logits",
    "top_k_renorm_probs",
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_logits",
    "top_k_top_p_sampling_from_probs",
    "top_p_renorm_probs",
    "top_p_sampling_from_probs",
]

DTYPES: dict[str, tuple[str, str, int]] = {
    "bf16": ("ember::bfloat16", "kDLBfloat", 16),
    "fp16": ("ember::half", "kDLFloat", 16),
    "fp32": ("float", "kDLFloat", 32),
}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}


def sampling_spec(dtype: str) -> KernelSpec:
    """The sampling module for one logits dtype (``bf16``, ``fp16``, ``fp32``); sm_90 on."""
    if dtype not in DTYPES:
        raise ValueError(f"sampling_spec: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    ctype, code, bits = DTYPES[dtype]
    ops = CSRC_DIR / "ops"
    return KernelSpec(
        uri=f"sampling_{dtype}",
        sources=(
            ops / "sampling.cc",
            ops / "sampling.cu",
            ops / "sampling_filter_logits.cu",
            ops / "sampling_filter_mask.cu",
            ops / "sampling_filter_probs.cu",
            ops / "sampling_filter_renorm.cu",
        ),
        archs=("sm90+",),
        cflags=(f"-DEMBER_SAMPLING_DL_CODE={code}", f"-DEMBER_SAMPLING_DL_BITS={bits}"),
        cuda_cflags=(f"-DEMBER_SAMPLING_DTYPE={ctype}",),
        params=(("dtype", dtype),),
    )


@register("sampling")
def _specs() -> Iterator[KernelSpec]:
    for dtype in DTYPES:
        yield sampling_spec(dtype)


_MODULES: dict[Any, Any] = {}


def _module(x: Any, fn: str) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise TypeError(f"{fn}: `logits` must be a tensor, got {type(x).__name__}")
    mod = _MODULES.get(dtype)
    if mod is None:
        name = _TORCH_NAMES.get(str(dtype))
        if name is None:
            raise TypeError(f"{fn}: `logits` must be bfloat16, float16 or float32, got {dtype}")
        mod = _MODULES[dtype] = build_and_load(sampling_spec(name))
    return mod


@trace(SOFTMAX)
@api
def softmax(logits: Any, temperature: Any = None, *, out: Any = None) -> Any:
    """``softmax(logits / temperature)`` over the last dimension, in fp32, reading the logits once.

    Parameters
    ----------
    logits:
        ``[rows, vocab]`` bf16/fp16/fp32 on a CUDA device (sm_90+), last dimension contiguous;
        ``vocab`` up to ~464 000 (a row is held in the shared memory of one 8-CTA cluster;
        aligned rows of 16 385-65 536 with many rows take clusters of 2 or 4; 48+ aligned rows
        of ~114 700-131 072 take 8 CTAs of a cooperative grid that exchange through global
        memory, which fills all 132 SMs where 8-CTA clusters fill 120).
    temperature:
        ``None`` (1), a float > 0, or an fp32 tensor ``[rows]`` of per-row temperatures (> 0;
        not checked, to keep the call free of synchronisation).
    out:
        Optional fp32 ``[rows, vocab]`` output; allocated if ``None``.

    Returns
    -------
    The probabilities (``out`` when given). A row of all ``-inf`` gives NaN.

    Raises
    ------
    TypeError, ValueError
        Before any launch, naming the argument.
    """
    fn = "ember.softmax"
    mod = _module(logits, fn)
    if out is None:
        out = logits.new_empty(logits.shape, dtype=_float32())
    ws = None
    if logits.dim() == 2:  # (other ranks: the binding names the bad shape)
        ws = _softmax_workspace(logits, mod.softmax_workspace_words(*logits.shape))
    if temperature is None:
        mod.softmax(logits, out, None, 1.0, ws)
    elif isinstance(temperature, int | float):
        mod.softmax(logits, out, None, float(temperature), ws)
    else:
        mod.softmax(logits, out, temperature, 1.0, ws)
    return out


def _softmax_workspace(logits: Any, words: int) -> Any:
    """The int32 workspace of the grid softmax (``softmax_grid_kernel`` for fp32 logits,
    ``softmax_reg_kernel`` for 16-bit ones; ``words`` from the module: 48 or more rows
    of about 114 700-131 072 elements), or None. Uninitialised: the binding zeroes the counts
    with ``cudaMemsetAsync`` before the launch (a graph captures it with the kernel). One a call,
    from the caching allocator, so that concurrent streams never share one."""
    if words == 0:
        return None
    import torch

    return torch.empty(int(words), dtype=torch.int32, device=logits.device)


def _float32() -> Any:
    import torch

    return torch.float32


def _check_seed(fn: str, seed: int | None, offset: int, generator: Any) -> int:
    import torch

    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**63:
        raise ValueError(f"{fn}: `offset` must be an int in [0, 2^63), got {offset!r}")
    if seed is None:
        return int(torch.randint(0, 2**62, (1,), generator=generator).item())
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ValueError(f"{fn}: `seed` must be an int in [0, 2^63), got {seed!r}")
    return seed


_FLT_MIN = 1.1754943508222875e-38


def _scalar_or_tensor(fn: str, name: str, value: Any, off: float, kind: str) -> tuple[Any, float]:
    """``(tensor or None, scalar)`` for a filter parameter; scalars are checked here, tensors
    (read on the device, per row) by the binding's dtype/shape checks."""
    import torch

    if value is None:
        return None, off
    if isinstance(value, torch.Tensor):
        return value, off
    if kind == "top_k":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
            raise ValueError(f"{fn}: `top_k` must be an int in [0, 2^31) or an int32 [rows] "
                             f"tensor, got {value!r}")  # fmt: skip
        return None, float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{fn}: `{name}` must be a float or a float32 [rows] tensor, "
                        f"got {type(value).__name__}")  # fmt: skip
    v = float(value)
    if kind == "temperature":
        if not (v >= _FLT_MIN and v < float("inf")):
            raise ValueError(f"{fn}: `temperature` must be a finite float32 > 0 (>= {_FLT_MIN}),"
                             f" got {value!r}")  # fmt: skip
    elif not 0.0 <= v <= 1.0:
        raise ValueError(f"{fn}: `{name}` must be in [0, 1], got {value!r}")
    return None, v


def _check_rows(fn: str, bad: Any, what: str) -> None:
    import torch

    rows = torch.nonzero(bad).flatten().tolist()
    if rows:
        shown = rows[:8]
        more = f" and {len(rows) - 8} more" if len(rows) > 8 else ""
        raise ValueError(f"{fn}: rows {shown}{more} {what}")


def _sample(
    fn: str,
    x: Any,
    *,
    from_logits: bool,
    temperature: Any,
    top_k: Any,
    top_p: Any,
    min_p: Any,
    seed: int | None,
    offset: int,
    generator: Any,
    out: Any,
    check: bool,
) -> Any:
    import torch

    arg = "logits" if from_logits else "probs"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: `{arg}` must be a torch.Tensor, got {type(x).__name__}")
    t_tensor, t_scalar = _scalar_or_tensor(fn, "temperature", temperature, 1.0, "temperature")
    k_tensor, k_scalar = _scalar_or_tensor(fn, "top_k", top_k, 0.0, "top_k")
    p_tensor, p_scalar = _scalar_or_tensor(fn, "top_p", top_p, 1.0, "top_p")
    m_tensor, m_scalar = _scalar_or_tensor(fn, "min_p", min_p, 0.0, "min_p")
    seed = _check_seed(fn, seed, offset, generator)
    # probabilities are fp32: the fp32 module serves them whatever the logits dtype
    mod = _module(x, fn) if from_logits else _module_fp32(fn)
    if out is None:
        out = torch.empty(x.shape[0] if x.dim() >= 1 else 0, dtype=torch.int32, device=x.device)
    mod.sample(x, out, from_logits, t_tensor, t_scalar, k_tensor, int(k_scalar), p_tensor, p_scalar,
               m_tensor, m_scalar, seed, offset, fn)  # fmt: skip
    if check:
        what = "NaN or Inf logits" if from_logits else "NaN, Inf or negative probabilities"
        _check_rows(fn, out < 0, f"have {what} or no mass")
    return out


@trace(SAMPLING_FROM_PROBS)
@api
def sampling_from_probs(
    probs: Any,
    *,
    top_k: Any = None,
    top_p: Any = None,
    min_p: Any = None,
    seed: int | None = None,
    offset: int = 0,
    generator: Any = None,
    out: Any = None,
    check: bool = False,
) -> Any:
    """One token per row, index ``i`` drawn with probability ``probs[i] / sum(kept probs)``.

    Inverse-CDF sampling in index order, a single read of the probabilities, no sort: the row
    held in one cluster's shared memory or, with a filter and 48 rows or more (vocabularies of
    32 768 or more, 16-byte aligned rows), streamed by one CTA a row that keeps only the values
    at or above the row maximum's 2^-16 (a row they cannot answer is sampled the first way).
    Both keep exactly the same set; the draws agree except where the target falls within fp32
    rounding of a token's edge. Filters (each a scalar for every row or a ``[rows]`` tensor,
    read on the device; combine freely):

    - ``top_k``: keep the ``k`` largest (ties at the ``k``-th value are all kept); int or int32
      tensor; ``0`` (or a tensor value ``<= 0`` or ``>= vocab``) keeps all.
    - ``top_p``: then keep the largest probabilities whose mass first reaches ``top_p`` of the
      mass kept so far (ties kept together; at least the largest); float in ``[0, 1]`` or fp32
      tensor; ``1`` (or a tensor value ``>= 1`` or NaN) keeps all, ``0`` keeps the maximum.
    - ``min_p``: keep probabilities ``>= min_p * max``; float in ``[0, 1]`` or fp32 tensor.

    Thresholds come from a radix select over fixed-point masses (64-bit integer sums), so they
    do not depend on the order of the GPU's atomics; top-p without top-k takes its share of the
    row's fp64 sum (in the same fixed point). Reproducible: the uniform of row ``r`` is
    Philox4x32-10 of ``(seed, offset, r)``, so the same ``seed`` and ``offset`` give the same
    tokens on any GPU; advance ``offset`` between steps. Nothing synchronises the host unless
    ``check`` is set.

    Parameters
    ----------
    probs:
        ``[rows, vocab]`` fp32 on a CUDA device (sm_90+), non-negative (need not sum to 1), last
        dimension contiguous, ``vocab`` up to ~464 000.
    seed:
        The Philox key; default: drawn from ``generator`` (a CPU ``torch.Generator``, or torch's
        default CPU generator), which costs no device synchronisation.
    offset:
        The Philox counter (>= 0).
    out:
        Optional int32 ``[rows]`` output.
    check:
        Synchronise after the launch and raise ``ValueError`` naming the rows marked invalid.

    Returns
    -------
    int32 ``[rows]``: token indices; an element of probability 0 is never drawn. A row with a
    NaN, infinite or negative value, or whose sum is 0, gets -1 (``check=True``: an error).
    """
    return _sample(
        "ember.sampling_from_probs", probs, from_logits=False, temperature=None, top_k=top_k,
        top_p=top_p, min_p=min_p, seed=seed, offset=offset, generator=generator, out=out,
        check=check,
    )  # fmt: skip


@trace(SAMPLING_FROM_LOGITS)
@api
def sampling_from_logits(
    logits: Any,
    temperature: Any = None,
    *,
    top_k: Any = None,
    top_p: Any = None,
    min_p: Any = None,
    seed: int | None = None,
    offset: int = 0,
    generator: Any = None,
    out: Any = None,
    check: bool = False,
) -> Any:
    """One token per row from ``softmax(logits / temperature)``, in one kernel: the logits are
    read once and no probabilities are written. Filters, seeds and output as
    :func:`sampling_from_probs` (top-k/top-p/min-p apply to the tempered probabilities). With
    ``top_k`` or ``min_p``, fp32 logits and 48 rows or more, each row is streamed through one
    CTA that keeps only the logits within 11.25 of the running maximum (top-p alone needs the
    whole row's mass, so it takes the cluster path), with the same kept set and draws as
    :func:`sampling_from_probs` describes for its two paths.

    ``logits``: ``[rows, vocab]`` bf16/fp16/fp32; ``temperature``: ``None`` (1), a float > 0 or
    an fp32 ``[rows]`` tensor. ``-inf`` logits are never drawn; a row with a NaN or ``+inf``
    logit, or all ``-inf``, gets -1 (``check=True``: an error).
    """
    return _sample(
        "ember.sampling_from_logits", logits, from_logits=True, temperature=temperature,
        top_k=top_k, top_p=top_p, min_p=min_p, seed=seed, offset=offset, generator=generator,
        out=out, check=check,
    )  # fmt: skip


@trace(TOP_K_SAMPLING_FROM_PROBS)
@api
def top_k_sampling_from_probs(probs: Any, top_k: Any, **kwargs: Any) -> Any:
    """:func:`sampling_from_probs` with ``top_k`` (FlashInfer's name)."""
    return sampling_from_probs(probs, top_k=top_k, **kwargs)


@trace(TOP_P_SAMPLING_FROM_PROBS)
@api
def top_p_sampling_from_probs(probs: Any, top_p: Any, **kwargs: Any) -> Any:
    """:func:`sampling_from_probs` with ``top_p`` (FlashInfer's name)."""
    return sampling_from_probs(probs, top_p=top_p, **kwargs)


@trace(MIN_P_SAMPLING_FROM_PROBS)
@api
def min_p_sampling_from_probs(probs: Any, min_p: Any, **kwargs: Any) -> Any:
    """:func:`sampling_from_probs` with ``min_p`` (FlashInfer's name)."""
    return sampling_from_probs(probs, min_p=min_p, **kwargs)


@trace(TOP_K_TOP_P_SAMPLING_FROM_PROBS)
@api
def top_k_top_p_sampling_from_probs(probs: Any, top_k: Any, top_p: Any, **kwargs: Any) -> Any:
    """:func:`sampling_from_probs` with ``top_k`` then ``top_p`` (FlashInfer's name)."""
    return sampling_from_probs(probs, top_k=top_k, top_p=top_p, **kwargs)


@trace(TOP_K_TOP_P_SAMPLING_FROM_LOGITS)
@api
def top_k_top_p_sampling_from_logits(
    logits: Any, top_k: Any, top_p: Any, temperature: Any = None, **kwargs: Any
) -> Any:
    """:func:`sampling_from_logits` with ``top_k`` then ``top_p`` (FlashInfer's name)."""
    return sampling_from_logits(logits, temperature, top_k=top_k, top_p=top_p, **kwargs)


def _filter(fn: str, x: Any, *, renorm: bool, top_k: Any, top_p: Any, out: Any, check: bool) -> Any:
    import torch

    arg = "probs" if renorm else "logits"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: `{arg}` must be a torch.Tensor, got {type(x).__name__}")
    k_tensor, k_scalar = _scalar_or_tensor(fn, "top_k", top_k, 0.0, "top_k")
    p_tensor, p_scalar = _scalar_or_tensor(fn, "top_p", top_p, 1.0, "top_p")
    mod = _module_fp32(fn) if renorm else _module(x, fn)
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    mod.filter_rows(x, out, renorm, k_tensor, int(k_scalar), p_tensor, p_scalar, fn)
    if check:
        what = "NaN, Inf or negative probabilities or no mass" if renorm else "a NaN logit"
        _check_rows(fn, torch.isnan(out).any(-1), f"have {what}")
    return out


@trace(TOP_K_RENORM_PROBS)
@api
def top_k_renorm_probs(probs: Any, top_k: Any, *, out: Any = None, check: bool = False) -> Any:
    """The ``top_k`` largest probabilities of each row (ties at the ``k``-th value all kept),
    renormalised to sum to 1; the rest 0. ``probs``: fp32 ``[rows, vocab]``; ``top_k`` an int
    (0 keeps all) or an int32 ``[rows]`` tensor. A row with NaN, Inf or negative values, or no
    mass, becomes all NaN (``check=True``: an error). ``out``: optional fp32 output."""
    return _filter(
        "ember.top_k_renorm_probs",
        probs,
        renorm=True,
        top_k=top_k,
        top_p=None,
        out=out,
        check=check,
    )


@trace(TOP_P_RENORM_PROBS)
@api
def top_p_renorm_probs(probs: Any, top_p: Any, *, out: Any = None, check: bool = False) -> Any:
    """The largest probabilities whose mass first reaches ``top_p`` of the row's (ties kept
    together), renormalised to sum to 1; the rest 0. ``top_p`` a float in ``[0, 1]`` or an fp32
    ``[rows]`` tensor. Bad rows as :func:`top_k_renorm_probs`."""
    return _filter(
        "ember.top_p_renorm_probs",
        probs,
        renorm=True,
        top_k=None,
        top_p=top_p,
        out=out,
        check=check,
    )


@trace(TOP_K_MASK_LOGITS)
@api
def top_k_mask_logits(logits: Any, top_k: Any, *, out: Any = None, check: bool = False) -> Any:
    """The ``top_k`` largest logits of each row (ties at the ``k``-th value all kept), the rest
    ``-inf``; bf16/fp16/fp32, ``out`` of the same dtype. A row with a NaN logit becomes all NaN
    (``check=True``: an error)."""
    return _filter(
        "ember.top_k_mask_logits",
        logits,
        renorm=False,
        top_k=top_k,
        top_p=None,
        out=out,
        check=check,
    )


def _module_fp32(fn: str) -> Any:
    import torch

    return _module(torch.empty(0), fn)
