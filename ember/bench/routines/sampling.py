"""Bench routine ``softmax``: softmax of logits over per-row temperatures, fp32 probabilities.

A shape is ``RxV``: rows (requests) x vocabulary. Temperatures are a ``[R]`` fp32 tensor in
``[0.3, 1.3)``.

Backends
--------
``ember``
    ``ember.softmax(logits, temperature)``.
``torch`` / ``torch_compile``
    ``torch.softmax(logits.float() / temperature[:, None], -1)``, eager and compiled.
``flashinfer``
    ``flashinfer.sampling.softmax(logits, temperature)``.

Bytes moved: the logits read once, the fp32 probabilities written once, the temperatures.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ember.bench.case import Case, Impl, Inputs, Skip, format_shape, itemsize, torch_dtype
from ember.bench.routines import Work, routine
from ember.bench.routines.common import each_case, int_shapes, shape_arguments

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = ["softmax", "torch_softmax"]

SOFTMAX = "softmax"
_BACKENDS = {
    "ember": ("default",),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default",),
}


def _torch() -> Any:
    import torch

    return torch


def torch_softmax(logits: Any, temperature: Any) -> Any:
    """What users write: fp32 softmax of the temperature-scaled logits."""
    return _torch().softmax(logits.float() / temperature[:, None], dim=-1)


def _arguments(p: argparse.ArgumentParser) -> None:
    shape_arguments(
        p,
        shapes=int_shapes(2, "softmax", "RxV"),
        default="128x128256,1x128256,32x151936",
        meaning="RxV: rows x vocabulary",
        dtypes="fp32",
        dtype_help="logits dtype: fp32, bf16 or fp16",
    )


def _case(ctx: BenchContext, shape: tuple[int, ...], dtype: str) -> Case:
    rows, vocab = shape
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        return {
            "logits": (4 * torch.randn(rows, vocab, device=device)).to(torch_dtype(dtype)),
            "temperature": torch.rand(rows, device=device) + 0.3,
        }

    return Case(
        routine=SOFTMAX,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=lambda i: (
            _torch()
            .softmax(i["logits"].double() / i["temperature"].double()[:, None], dim=-1)
            .float(),
        ),
        outputs=lambda i, result: (result,),
        nbytes=rows * vocab * (itemsize(dtype) + 4) + rows * 4,
        params={"temperature": "per-row tensor"},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source="torch.softmax in fp64",
        tolerance=(1e-4, 1e-6),
    )


def _ember(variant: str, dtype: str) -> Impl | Skip:
    import ember

    return Impl(
        "ember",
        variant,
        lambda i: functools.partial(ember.softmax, i["logits"], i["temperature"]),
        ember.__version__,
    )


def _torch_eager(variant: str, dtype: str) -> Impl | Skip:
    return Impl(
        "torch",
        variant,
        lambda i: functools.partial(torch_softmax, i["logits"], i["temperature"]),
        _torch().__version__,
    )


def _torch_compile(variant: str, dtype: str) -> Impl | Skip:
    torch = _torch()
    torch._dynamo.reset()
    compiled = torch.compile(torch_softmax, dynamic=False)
    return Impl(
        "torch_compile",
        variant,
        lambda i: functools.partial(compiled, i["logits"], i["temperature"]),
        torch.__version__,
    )


def _flashinfer(variant: str, dtype: str) -> Impl | Skip:
    if dtype != "fp32":
        return Skip("flashinfer", variant, "FlashInfer's softmax takes fp32 logits")
    try:
        fi = importlib.import_module("flashinfer")
        fn = importlib.import_module("flashinfer.sampling").softmax
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer.sampling.softmax is not usable ({exc})")
    return Impl(
        "flashinfer",
        variant,
        lambda i: functools.partial(fn, i["logits"], i["temperature"]),
        getattr(fi, "__version__", ""),
    )


_BUILDERS: dict[str, Callable[[str, str], Impl | Skip]] = {
    "ember": _ember,
    "torch": _torch_eager,
    "torch_compile": _torch_compile,
    "flashinfer": _flashinfer,
}


@routine(SOFTMAX, help="softmax with per-row temperature", backends=_BACKENDS, arguments=_arguments)
def softmax(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape and dtype."""
    return each_case(
        args,
        _BACKENDS,
        lambda shape, dtype: _case(ctx, shape, dtype),
        lambda shape, dtype, backend, variant: _BUILDERS[backend](variant, dtype),
    )
