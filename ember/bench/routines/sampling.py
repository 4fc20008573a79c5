"""Bench routines ``softmax`` (logits over per-row temperatures to fp32 probabilities) and
``sampling_from_probs`` (one token per row; checked by support: every drawn token has p > 0).

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

__all__ = ["row_arguments", "sampling_from_probs", "softmax", "torch_softmax"]

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


# --- sampling_from_probs --------------------------------------------------------------------

SAMPLE = "sampling_from_probs"
_SAMPLE_BACKENDS = {"ember": ("default",), "torch": ("default",), "flashinfer": ("default",)}


def row_arguments(dtype_help: str) -> Callable[[argparse.ArgumentParser], None]:
    """The options of the per-row sampling routines (this one and the filters'):
    ``--shapes RxV`` (default 128 and 1 rows of Llama-3's vocabulary) and ``--dtypes``."""

    def arguments(p: argparse.ArgumentParser) -> None:
        shape_arguments(
            p,
            shapes=int_shapes(2, "sampling", "RxV"),
            default="128x128256,1x128256",
            meaning="RxV: rows x vocabulary",
            dtypes="fp32",
            dtype_help=dtype_help,
        )

    return arguments


def _sample_case(ctx: BenchContext, shape: tuple[int, ...], dtype: str) -> Case:
    rows, vocab = shape
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        logits = 4 * torch.randn(rows, vocab, device=device)
        logits[:, ::3] = float("-inf")  # a third of the vocabulary has probability 0
        return {"probs": torch.softmax(logits, dim=-1)}

    return Case(
        routine=SAMPLE,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        # NOTE: a draw is random; what must hold is that every token has probability > 0
        reference=lambda i: (_torch().ones(rows),),
        outputs=lambda i, result: (
            (i["probs"].gather(1, result.reshape(rows, 1).long()).reshape(rows) > 0).float(),
        ),
        nbytes=rows * vocab * 4 + rows * 4,
        params={"check": "support (p > 0 at every drawn token)"},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source="support check",
        tolerance=(0.0, 0.0),
    )


def _sample_impl(backend: str, variant: str) -> Impl | Skip:
    if backend == "ember":
        import ember

        return Impl(
            "ember",
            variant,
            lambda i: functools.partial(ember.sampling_from_probs, i["probs"], seed=1),
            ember.__version__,
        )
    if backend == "torch":
        torch = _torch()
        return Impl(
            "torch",
            variant,
            lambda i: functools.partial(torch.multinomial, i["probs"], 1),
            torch.__version__,
        )
    try:
        fi = importlib.import_module("flashinfer")
        fn = importlib.import_module("flashinfer.sampling").sampling_from_probs
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer.sampling is not usable ({exc})")
    return Impl("flashinfer", variant, lambda i: functools.partial(fn, i["probs"]), fi.__version__)


@routine(
    SAMPLE,
    help="one token per row from probabilities",
    backends=_SAMPLE_BACKENDS,
    arguments=row_arguments("probabilities dtype: fp32"),
)
def sampling_from_probs(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape."""
    return each_case(
        args,
        _SAMPLE_BACKENDS,
        lambda shape, dtype: _sample_case(ctx, shape, dtype),
        lambda shape, dtype, backend, variant: _sample_impl(backend, variant),
    )
