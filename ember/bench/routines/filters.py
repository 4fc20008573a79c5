"""Bench routines for the filtered samplers, renormalisation and masking, one per op:

``top_k_sampling_from_probs``, ``top_p_sampling_from_probs``, ``min_p_sampling_from_probs``,
``top_k_top_p_sampling_from_probs``, ``sampling_from_logits``,
``top_k_top_p_sampling_from_logits``, ``top_k_renorm_probs``, ``top_p_renorm_probs``,
``top_k_mask_logits``.

A shape is ``RxV``: rows x vocabulary. Probabilities are ``softmax(4 * randn)`` (peaked, like a
model's); logits ``4 * randn``. Parameters (scalars for every row): ``top_k`` 50, ``top_p`` 0.9,
``min_p`` 0.1, as in the issue's acceptance rows.

Backends
--------
``ember``
    The ``ember`` function of the same name.
``torch`` / ``torch_compile``
    What users write without a sampling library: sort the row, mask by rank / cumulative mass /
    ratio to the maximum, then ``torch.multinomial`` (samplers), renormalise (renorm) or mask
    (``torch.topk``'s k-th value); eager and compiled.
``flashinfer``
    ``flashinfer.sampling.<op>`` (0.5.3; ``top_k_first`` order for top-k + top-p).

Checks: renorm and mask outputs against the exact reference of the kept set
(``ember.testing.reference.filter_threshold_ref``); a sampler's draws are checked by support:
each drawn token must be in the kept set of a slightly looser filter (``top_p`` + 0.02,
``min_p`` x 0.98, the logits' probabilities in fp64), which every correct definition of the
boundary passes.

Bytes moved: the input read once; renorm and mask also write the output once.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ember.bench.case import Case, Impl, Inputs, Skip, format_shape, itemsize, torch_dtype
from ember.bench.routines import Work, routine
from ember.bench.routines.common import each_case
from ember.bench.routines.sampling import row_arguments

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = ["OPS", "torch_filtered_sample", "torch_renorm", "torch_top_k_mask"]

_BACKENDS = {
    "ember": ("default",),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default",),
}


@dataclass(frozen=True)
class Op:
    kind: str  # "sample", "renorm" or "mask"
    logits: bool  # the input is logits (else probabilities)
    params: dict[str, Any]
    help: str


OPS: dict[str, Op] = {
    "top_k_sampling_from_probs": Op("sample", False, {"top_k": 50}, "top-k sampling"),
    "top_p_sampling_from_probs": Op("sample", False, {"top_p": 0.9}, "top-p sampling"),
    "min_p_sampling_from_probs": Op("sample", False, {"min_p": 0.1}, "min-p sampling"),
    "top_k_top_p_sampling_from_probs": Op(
        "sample", False, {"top_k": 50, "top_p": 0.9}, "top-k then top-p sampling"
    ),
    "sampling_from_logits": Op("sample", True, {}, "sampling from logits"),
    "top_k_top_p_sampling_from_logits": Op(
        "sample", True, {"top_k": 50, "top_p": 0.9}, "top-k then top-p sampling from logits"
    ),
    "top_k_renorm_probs": Op("renorm", False, {"top_k": 50}, "top-k renormalisation"),
    "top_p_renorm_probs": Op("renorm", False, {"top_p": 0.9}, "top-p renormalisation"),
    "top_k_mask_logits": Op("mask", True, {"top_k": 50}, "top-k logits mask"),
}


def _torch() -> Any:
    import torch

    return torch


def _sorted_keep(probs: Any, top_k: int, top_p: float, min_p: float) -> tuple[Any, Any]:
    """(sorted probabilities with the filtered-out ones zeroed, their indices)."""
    torch = _torch()
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    kept = sorted_p
    if top_k:
        rank = torch.arange(sorted_p.shape[-1], device=probs.device)
        kept = torch.where(rank < top_k, kept, 0.0)
    if top_p < 1.0:
        before = kept.cumsum(-1) - kept
        kept = torch.where(before < top_p * kept.sum(-1, keepdim=True), kept, 0.0)
    if min_p:
        kept = torch.where(sorted_p >= min_p * sorted_p[:, :1], kept, 0.0)
    return kept, idx


def torch_filtered_sample(
    x: Any,
    *,
    logits: bool,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    keep: Callable[..., tuple[Any, Any]] = _sorted_keep,
) -> Any:
    """Sort, mask, ``torch.multinomial``: a filtered sampler in plain torch (``keep``: the
    softmax-sort-mask step, compiled for the ``torch_compile`` backend)."""
    torch = _torch()
    kept, idx = keep(x, logits, top_k, top_p, min_p)
    return idx.gather(1, torch.multinomial(kept, 1))[:, 0]


def _softmax_keep(x: Any, logits: bool, top_k: int, top_p: float, min_p: float) -> Any:
    torch = _torch()
    probs = torch.softmax(x.float(), -1) if logits else x
    return _sorted_keep(probs, top_k, top_p, min_p)


def torch_renorm(
    probs: Any,
    *,
    top_k: int = 0,
    top_p: float = 1.0,
    keep: Callable[..., tuple[Any, Any]] = _sorted_keep,
) -> Any:
    """Sort, mask, scatter back and renormalise."""
    torch = _torch()
    kept, idx = keep(probs, top_k, top_p, 0.0)
    out = torch.zeros_like(probs).scatter_(1, idx, kept)
    return out / out.sum(-1, keepdim=True)


def torch_top_k_mask(logits: Any, *, top_k: int) -> Any:
    """``torch.topk``'s k-th value as the threshold (ties kept)."""
    torch = _torch()
    kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


_arguments = row_arguments("input dtype: fp32 (probabilities are fp32; logits may be bf16/fp16)")


def _finite(masked: Any) -> Any:
    """The harness refuses non-finite outputs: compare -inf (masked) as -1e30 in fp32."""
    return masked.float().nan_to_num(neginf=-1e30)


def _outputs(op: Op) -> Callable[[Inputs, Any], tuple[Any, ...]]:
    if op.kind == "sample":
        return functools.partial(_support, op)
    if op.kind == "mask":
        return lambda i, r: (_finite(r),)
    return lambda i, r: (r,)


def _support(op: Op, inputs: Inputs, result: Any) -> tuple[Any, ...]:
    from ember.testing.reference import filter_threshold_ref

    torch = _torch()
    x = inputs["x"]
    probs = torch.softmax(x.double(), -1).float() if op.logits else x
    loose = dict(op.params)
    if "top_p" in loose:
        loose["top_p"] = min(1.0, float(loose["top_p"]) + 0.02)
    if "min_p" in loose:
        loose["min_p"] = float(loose["min_p"]) * 0.98
    thr = filter_threshold_ref(probs, **loose)
    picked = probs.gather(1, result.reshape(-1, 1).long().clamp(0, x.shape[1] - 1))[:, 0]
    ok = (result >= 0) & (result < x.shape[1]) & (picked >= thr) & (picked > 0)
    return (ok.float(),)


def _reference(op: Op, inputs: Inputs) -> tuple[Any, ...]:
    from ember.testing.reference import filter_threshold_ref

    torch = _torch()
    x = inputs["x"]
    rows = x.shape[0]
    if op.kind == "sample":
        return (torch.ones(rows, device=x.device),)
    if op.kind == "mask":
        thr = filter_threshold_ref(x.float(), mass=False, **op.params)
        masked = torch.where(x.float() >= thr[:, None], x.float(), float("-inf")).to(x.dtype)
        return (_finite(masked),)
    thr = filter_threshold_ref(x, **op.params)
    kept = torch.where(x >= thr[:, None], x.double(), 0.0)
    return ((kept / kept.sum(-1, keepdim=True)).float(),)


def _case(name: str, op: Op, ctx: BenchContext, shape: tuple[int, ...], dtype: str) -> Case:
    rows, vocab = shape
    device = ctx.device
    in_bytes = itemsize(dtype) if op.logits else 4

    def make_inputs() -> Inputs:
        torch = _torch()
        logits = 4 * torch.randn(rows, vocab, device=device)
        return {"x": logits.to(torch_dtype(dtype)) if op.logits else torch.softmax(logits, -1)}

    out_bytes = rows * 4 if op.kind == "sample" else rows * vocab * in_bytes
    return Case(
        routine=name,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=functools.partial(_reference, op),
        outputs=_outputs(op),
        nbytes=rows * vocab * in_bytes + out_bytes,
        params=dict(op.params),
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source=(
            "support check (draws in the loosened kept set)"
            if op.kind == "sample"
            else "exact kept set (filter_threshold_ref), fp64 renormalisation"
        ),
        tolerance=(0.0, 0.0) if op.kind != "renorm" else (1e-5, 1e-8),
    )


def _torch_fn(op: Op, compiled: bool) -> Callable[..., Any]:
    """The plain-torch op; ``compiled``: its sort-and-mask step through ``torch.compile``
    (``torch.multinomial`` and the scatter stay eager)."""
    torch = _torch()
    if op.kind == "sample":
        keep = torch.compile(_softmax_keep, dynamic=False) if compiled else _softmax_keep
        return functools.partial(torch_filtered_sample, logits=op.logits, keep=keep, **op.params)
    if op.kind == "renorm":
        keep = torch.compile(_sorted_keep, dynamic=False) if compiled else _sorted_keep
        return functools.partial(torch_renorm, keep=keep, **op.params)
    mask = functools.partial(torch_top_k_mask, **op.params)
    return torch.compile(mask, dynamic=False) if compiled else mask


def _build(name: str, op: Op, dtype: str, backend: str, variant: str) -> Impl | Skip:
    torch = _torch()
    if backend == "ember":
        import ember

        fn = getattr(ember, name)
        kwargs: dict[str, Any] = dict(op.params)
        if op.kind == "sample":
            kwargs["seed"] = 1
        call = functools.partial(fn, **kwargs)
        return Impl("ember", variant, lambda i: functools.partial(call, i["x"]), ember.__version__)
    if backend in {"torch", "torch_compile"}:
        if backend == "torch_compile":
            torch._dynamo.reset()
        fn = _torch_fn(op, backend == "torch_compile")
        return Impl(backend, variant, lambda i: functools.partial(fn, i["x"]), torch.__version__)
    try:
        fi = importlib.import_module("flashinfer")
        fi_fn = getattr(importlib.import_module("flashinfer.sampling"), name)
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer.sampling.{name} is not usable ({exc})")
    if op.logits and op.kind == "sample" and dtype != "fp32":
        return Skip("flashinfer", variant, "FlashInfer's samplers take fp32 logits")
    args = tuple(op.params.values())
    return Impl(
        "flashinfer",
        variant,
        lambda i: functools.partial(fi_fn, i["x"], *args),
        getattr(fi, "__version__", ""),
    )


def _register(name: str, op: Op) -> None:
    def run(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
        return each_case(
            args,
            _BACKENDS,
            lambda shape, dtype: _case(name, op, ctx, shape, dtype),
            lambda shape, dtype, backend, variant: _build(name, op, dtype, backend, variant),
        )

    run.__name__ = name
    run.__doc__ = f"Every selected backend at every shape: {op.help}."
    routine(name, help=op.help, backends=_BACKENDS, arguments=_arguments)(run)


for _name, _op in OPS.items():
    _register(_name, _op)
