"""Sampling: softmax with temperature and sampling from probabilities (top-k/top-p come next).

Device code ``csrc/include/ember/sampling.cuh`` → ``csrc/ops/sampling.{cc,cu}`` → one module per
logits dtype (``sampling_bf16``, ``sampling_fp16``, ``sampling_fp32``). The softmax uses
thread-block clusters, so the family needs sm_90 or newer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR

__all__ = ["sampling_from_probs", "sampling_spec", "softmax"]

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
        sources=(ops / "sampling.cc", ops / "sampling.cu"),
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


def softmax(logits: Any, temperature: Any = None, *, out: Any = None) -> Any:
    """``softmax(logits / temperature)`` over the last dimension, in fp32, reading the logits once.

    Parameters
    ----------
    logits:
        ``[rows, vocab]`` bf16/fp16/fp32 on a CUDA device (sm_90+), last dimension contiguous;
        ``vocab`` up to ~464 000 (a row is held in the shared memory of one 8-CTA cluster).
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
    if temperature is None:
        mod.softmax(logits, out, None, 1.0)
    elif isinstance(temperature, int | float):
        mod.softmax(logits, out, None, float(temperature))
    else:
        mod.softmax(logits, out, temperature, 1.0)
    return out


def _float32() -> Any:
    import torch

    return torch.float32


def sampling_from_probs(
    probs: Any,
    *,
    seed: int | None = None,
    offset: int = 0,
    generator: Any = None,
    out: Any = None,
) -> Any:
    """One token per row, index ``i`` drawn with probability ``probs[i] / sum(probs)``.

    Inverse-CDF sampling over the row held in one cluster's shared memory (a single read of the
    probabilities, no sort). Reproducible: the uniform of row ``r`` is Philox4x32-10 of
    ``(seed, offset, r)``, so the same ``seed`` and ``offset`` give the same tokens on any GPU;
    advance ``offset`` between steps. Nothing synchronises the host.

    Parameters
    ----------
    probs:
        ``[rows, vocab]`` fp32 on a CUDA device (sm_90+), non-negative (need not sum to 1), last
        dimension contiguous.
    seed:
        The Philox key; default: drawn from ``generator`` (a CPU ``torch.Generator``, or torch's
        default CPU generator), which costs no device synchronisation.
    offset:
        The Philox counter (>= 0).
    out:
        Optional int32 ``[rows]`` output.

    Returns
    -------
    int32 ``[rows]``: token indices; an element of probability 0 is never drawn; a row whose sum
    is 0 or not finite gets -1.
    """
    fn = "ember.sampling_from_probs"
    import torch

    if not isinstance(probs, torch.Tensor):
        raise TypeError(f"{fn}: `probs` must be a torch.Tensor, got {type(probs).__name__}")
    if not isinstance(offset, int) or not 0 <= offset < 2**63:
        raise ValueError(f"{fn}: `offset` must be an int in [0, 2^63), got {offset!r}")
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    elif not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"{fn}: `seed` must be an int in [0, 2^63), got {seed!r}")
    mod = _module_fp32(fn)  # probabilities are fp32: one module serves every logits dtype
    if out is None:
        out = torch.empty(probs.shape[0] if probs.dim() >= 1 else 0, dtype=torch.int32,
                          device=probs.device)  # fmt: skip
    mod.sampling_from_probs(probs, out, seed, offset)
    return out


def _module_fp32(fn: str) -> Any:
    import torch

    return _module(torch.empty(0), fn)
