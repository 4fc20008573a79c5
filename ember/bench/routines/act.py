"""Bench routines of the gated activations: ``silu_and_mul``, ``gelu_and_mul``,
``gelu_tanh_and_mul``.

A shape is ``TxD``: tokens x the output width ``d`` (the input is ``[T, 2 * D]``).

Backends
--------
``ember``
    ``ember.<op>(x)`` (variant ``default``, allocates) and ``ember.<op>(x, out=...)`` (``out``).
``torch``
    Eager: ``act(x[..., :d]) * x[..., d:]`` with ``torch.nn.functional`` (``silu``, ``gelu``,
    ``gelu(approximate="tanh")``).
``torch_compile``
    ``torch.compile(..., dynamic=False)`` of the eager function, once per shape and dtype.
``flashinfer``
    ``flashinfer.activation.<op>`` (FlashInfer has all three).
``liger``
    ``LigerFusedGateUpSiLUMulFunction`` (silu, reads the fused tensor) and ``LigerGELUMulFunction``
    (tanh GELU, on the two halves, which Liger makes contiguous); Liger has no erf GELU.

Bytes moved: ``x`` read once, the output written once.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ember.bench.case import Case, Impl, Inputs, Skip, format_shape, itemsize, torch_dtype
from ember.bench.routines import Work, routine
from ember.bench.routines.common import each_case, int_shapes, shape_arguments

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = ["OPS", "gelu_and_mul", "gelu_tanh_and_mul", "silu_and_mul"]

OPS = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")
_BACKENDS = {
    "ember": ("default", "out"),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default",),
    "liger": ("default",),
}


def _torch() -> Any:
    import torch

    return torch


def torch_act_and_mul(op: str, x: Any) -> Any:
    """The eager formulation users write (also what ``torch.compile`` compiles)."""
    f = _torch().nn.functional
    d = x.shape[-1] // 2
    g, u = x[..., :d], x[..., d:]
    if op == "silu_and_mul":
        return f.silu(g) * u
    if op == "gelu_and_mul":
        return f.gelu(g) * u
    return f.gelu(g, approximate="tanh") * u


def _reference(op: str, x: Any) -> Any:
    xf = x.float()
    return torch_act_and_mul(op, xf).to(x.dtype)


def _arguments(p: argparse.ArgumentParser) -> None:
    shape_arguments(
        p,
        shapes=int_shapes(2, "activation", "TxD"),
        default="8192x14336,1x14336,16x14336,64x14336",
        meaning="TxD: tokens x output width (input [T, 2D])",
    )


def _case(op: str, ctx: BenchContext, shape: tuple[int, ...], dtype: str) -> Case:
    tokens, d = shape
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        return {"x": (2 * torch.randn(tokens, 2 * d, device=device)).to(torch_dtype(dtype))}

    from ember.testing import tolerances

    return Case(
        routine=op,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=lambda i: (_reference(op, i["x"]),),
        outputs=lambda i, result: (result,),
        nbytes=3 * tokens * d * itemsize(dtype),
        params={},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source=f"torch.nn.functional in fp32 ({op})",
        tolerance=tolerances(torch_dtype(dtype)),
    )


def _ember(op: str, variant: str) -> Impl | Skip:
    import ember

    fn = getattr(ember, op)
    if variant == "out":

        def prepare(i: Inputs) -> Callable[[], Any]:
            x = i["x"]
            out = _torch().full((*x.shape[:-1], x.shape[-1] // 2), math.nan, dtype=x.dtype,
                                device=x.device)  # fmt: skip
            return functools.partial(fn, x, out=out)

        return Impl("ember", variant, prepare, ember.__version__)
    return Impl("ember", variant, lambda i: functools.partial(fn, i["x"]), ember.__version__)


def _torch_eager(op: str, variant: str) -> Impl | Skip:
    return Impl(
        "torch",
        variant,
        lambda i: functools.partial(torch_act_and_mul, op, i["x"]),
        _torch().__version__,
    )


def _torch_compile(op: str, variant: str) -> Impl | Skip:
    torch = _torch()
    torch._dynamo.reset()  # NOTE: one compile per case, never the recompile limit
    compiled = torch.compile(functools.partial(torch_act_and_mul, op), dynamic=False)
    return Impl(
        "torch_compile", variant, lambda i: functools.partial(compiled, i["x"]), torch.__version__
    )


def _flashinfer(op: str, variant: str) -> Impl | Skip:
    try:
        fi = importlib.import_module("flashinfer")
        fn = getattr(importlib.import_module("flashinfer.activation"), op)
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer.activation.{op} is not usable ({exc})")
    return Impl(
        "flashinfer",
        variant,
        lambda i: functools.partial(fn, i["x"]),
        getattr(fi, "__version__", ""),
    )


def _liger(op: str, variant: str) -> Impl | Skip:
    if op == "gelu_and_mul":
        return Skip("liger", variant, "Liger has no erf GELU-and-mul")
    try:
        if op == "silu_and_mul":
            mod = importlib.import_module("liger_kernel.ops.swiglu")
            fused = mod.LigerFusedGateUpSiLUMulFunction

            def prepare(i: Inputs) -> Callable[[], Any]:
                return functools.partial(fused.apply, i["x"])

        else:
            mod = importlib.import_module("liger_kernel.ops.geglu")
            halves = mod.LigerGELUMulFunction

            def prepare(i: Inputs) -> Callable[[], Any]:
                d = i["x"].shape[-1] // 2
                return functools.partial(halves.apply, i["x"][..., :d], i["x"][..., d:])

    except Exception as exc:
        return Skip("liger", variant, f"liger-kernel is not usable ({exc})")
    try:
        version = importlib.metadata.version("liger-kernel")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return Impl("liger", variant, prepare, version)


_BUILDERS: dict[str, Callable[[str, str], Impl | Skip]] = {
    "ember": _ember,
    "torch": _torch_eager,
    "torch_compile": _torch_compile,
    "flashinfer": _flashinfer,
    "liger": _liger,
}


def _work(op: str, ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    return each_case(
        args,
        _BACKENDS,
        lambda shape, dtype: _case(op, ctx, shape, dtype),
        lambda shape, dtype, backend, variant: _BUILDERS[backend](op, variant),
    )


def _register(op: str) -> Callable[[BenchContext, argparse.Namespace], Iterable[Work]]:
    def run(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
        """Every selected backend at every shape and dtype."""
        return _work(op, ctx, args)

    run.__name__ = op
    return routine(
        op, help=f"{op}: act(x[..., :d]) * x[..., d:]", backends=_BACKENDS, arguments=_arguments
    )(run)


silu_and_mul = _register("silu_and_mul")
gelu_and_mul = _register("gelu_and_mul")
gelu_tanh_and_mul = _register("gelu_tanh_and_mul")
