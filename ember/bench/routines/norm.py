"""Bench routines of the norm family: ``rmsnorm``, ``fused_add_rmsnorm`` and ``host``.

Backends
--------
``ember``
    ``ember.rmsnorm(x, w, eps)`` (variant ``default``, allocates its output) and
    ``ember.rmsnorm(x, w, eps, out=...)`` (variant ``out``); ``ember.fused_add_rmsnorm_``.
``torch``
    Eager, the standard formulation: ``x.float()``, ``pow(2).mean(-1)``, ``rsqrt``, ``* w``,
    cast back.
``torch_compile``
    ``torch.compile(..., dynamic=False)`` of the eager function, compiled once per shape and
    dtype (the first call, inside the reference check, before any timing).
``flashinfer``
    ``flashinfer.norm.rmsnorm`` / ``fused_add_rmsnorm``; variant ``pdl`` passes
    ``enable_pdl=True`` where the signature takes it.
``liger``
    ``LigerRMSNormFunction.apply`` with ``casting_mode="llama"``, arguments bound from its
    signature at run time; Liger has no fused add + rmsnorm.
``torch_add`` (``host`` only)
    ``x + x``: the host cost of the cheapest allocating torch op.

Bytes moved: rmsnorm reads ``x`` and ``w`` and writes the output; fused add + rmsnorm reads and
writes both ``x`` and ``residual`` and reads ``w``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import inspect
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ember.bench.case import (
    Case,
    Impl,
    Inputs,
    Skip,
    format_shape,
    itemsize,
    parse_dtype,
    parse_shape,
    torch_dtype,
)
from ember.bench.routines import Work, expand_backends, routine

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = ["BUILDERS", "fused_add_rmsnorm", "host", "rmsnorm"]

RMSNORM, FUSED, HOST = "rmsnorm", "fused_add_rmsnorm", "host"

_NORM_BACKENDS = {
    "ember": ("default", "out"),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default", "pdl"),
    "liger": ("default",),
}
_FUSED_BACKENDS = {
    "ember": ("default",),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default", "pdl"),
    "liger": ("default",),
}
_HOST_BACKENDS = {
    "ember": ("default",),
    "torch_add": ("default",),
    "flashinfer": ("default",),
    "torch": ("default",),
}


# --- arguments -----------------------------------------------------------------------------------


def _csv(parse: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def convert(text: str) -> list[Any]:
        try:
            items = [parse(p) for p in text.split(",") if p.strip()]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        return items

    return convert


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _norm_arguments(default_shapes: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--shapes",
            type=_csv(parse_shape),
            default=_csv(parse_shape)(default_shapes),
            help=f"tokens x hidden (or tokens x heads x head_dim), comma-separated "
            f"(default {default_shapes})",
        )
        p.add_argument(
            "--dtypes",
            type=_csv(parse_dtype),
            default=["bf16"],
            help="bf16, fp16, fp32, comma-separated (default bf16)",
        )
        p.add_argument("--eps", type=_positive_float, default=1e-6, help="default 1e-6")

    return add


# --- the math ------------------------------------------------------------------------------------


def _torch() -> Any:
    import torch

    return torch


def torch_rmsnorm(x: Any, weight: Any, eps: float) -> Any:
    """The standard formulation: fp32 math, ``* weight`` in fp32, cast back to ``x.dtype``."""
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    return (h * _torch().rsqrt(var + eps) * weight.float()).to(x.dtype)


def torch_fused_add_rmsnorm(x: Any, residual: Any, weight: Any, eps: float) -> None:
    """``residual += x``; ``x = rmsnorm(residual)`` (normalising the fp32 sum), in place."""
    s = x.float() + residual.float()
    residual.copy_(s)
    var = s.pow(2).mean(-1, keepdim=True)
    x.copy_(s * _torch().rsqrt(var + eps) * weight.float())


def _local_rmsnorm_ref(x: Any, weight: Any, eps: float) -> Any:
    h = x.double()
    rms = h.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
    return (h * rms * weight.double()).to(x.dtype)


def _local_fused_ref(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    s = x.double() + residual.double()
    rms = s.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
    return (s * rms * weight.double()).to(x.dtype), s.to(residual.dtype)


@functools.cache
def _references() -> tuple[Callable[..., Any], Callable[..., Any], str]:
    try:
        from ember.testing.reference import fused_add_rmsnorm_ref, rmsnorm_ref

        return rmsnorm_ref, fused_add_rmsnorm_ref, "ember.testing.reference"
    except Exception:
        return _local_rmsnorm_ref, _local_fused_ref, "local fp64 (ember.testing.reference absent)"


# --- cases ---------------------------------------------------------------------------------------


def _case(ctx: BenchContext, op: str, shape: tuple[int, ...], dtype: str, eps: float) -> Case:
    numel, hidden, e = math.prod(shape), shape[-1], itemsize(dtype)
    fused = op == FUSED
    rms_ref, fused_ref, source = _references()
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        td = torch_dtype(dtype)
        inputs: Inputs = {"x": torch.randn(shape, dtype=td, device=device)}
        if fused:
            inputs["residual"] = torch.randn(shape, dtype=td, device=device)
        inputs["weight"] = (1.0 + 0.25 * torch.randn(hidden, device=device)).to(td)
        return inputs

    def reference(inp: Inputs) -> tuple[Any, ...]:
        if fused:
            out, res = fused_ref(inp["x"], inp["residual"], inp["weight"], eps)
            return (out, res)
        return (rms_ref(inp["x"], inp["weight"], eps),)

    def outputs(inp: Inputs, result: Any) -> tuple[Any, ...]:
        return (inp["x"], inp["residual"]) if fused else (result,)

    return Case(
        routine=op,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=reference,
        outputs=outputs,
        nbytes=(4 if fused else 2) * numel * e + hidden * e,
        params={"eps": eps},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype, "--eps", repr(eps)),
        reference_source=source,
    )


# --- backends ------------------------------------------------------------------------------------

Builder = Callable[[str, str, float], Impl | Skip]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _import(module: str) -> Any:
    """Import an optional backend; ``ImportError`` (with the reason) when it is not usable."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise
    except Exception as exc:
        raise ImportError(f"importing {module} failed: {type(exc).__name__}: {exc}") from exc


def _ember(op: str, variant: str, eps: float) -> Impl | Skip:
    import ember

    name = "fused_add_rmsnorm_" if op == FUSED else "rmsnorm"
    fn = getattr(ember, name, None)
    if fn is None:
        return Skip("ember", variant, f"ember.{name} is not in this build of ember")
    version = ember.__version__

    if op == FUSED:
        return Impl(
            "ember",
            variant,
            lambda i: functools.partial(fn, i["x"], i["residual"], i["weight"], eps),
            version,
        )
    if variant == "out":

        def prepare_out(i: Inputs) -> Callable[[], Any]:
            # NOTE: poisoned, so an element the kernel never writes fails the reference check.
            out = _torch().full_like(i["x"], math.nan)
            return functools.partial(fn, i["x"], i["weight"], eps, out=out)

        return Impl("ember", variant, prepare_out, version)
    return Impl(
        "ember", variant, lambda i: functools.partial(fn, i["x"], i["weight"], eps), version
    )


def _torch_eager(op: str, variant: str, eps: float) -> Impl | Skip:
    version = _torch().__version__
    if op == FUSED:
        return Impl(
            "torch",
            variant,
            lambda i: functools.partial(
                torch_fused_add_rmsnorm, i["x"], i["residual"], i["weight"], eps
            ),
            version,
        )
    return Impl(
        "torch",
        variant,
        lambda i: functools.partial(torch_rmsnorm, i["x"], i["weight"], eps),
        version,
    )


def _torch_compile(op: str, variant: str, eps: float) -> Impl | Skip:
    torch = _torch()
    # NOTE: a fresh dynamo state per case: every shape/dtype compiles once, and dynamo's
    # recompile limit (8 per function) can never make a later case fall back to eager.
    torch._dynamo.reset()
    if op == FUSED:

        def fused(x: Any, residual: Any, weight: Any) -> None:
            torch_fused_add_rmsnorm(x, residual, weight, eps)

        compiled_fused = torch.compile(fused, dynamic=False)
        return Impl(
            "torch_compile",
            variant,
            lambda i: functools.partial(compiled_fused, i["x"], i["residual"], i["weight"]),
            torch.__version__,
        )

    def norm(x: Any, weight: Any) -> Any:
        return torch_rmsnorm(x, weight, eps)

    compiled = torch.compile(norm, dynamic=False)
    return Impl(
        "torch_compile",
        variant,
        lambda i: functools.partial(compiled, i["x"], i["weight"]),
        torch.__version__,
    )


def _flashinfer(op: str, variant: str, eps: float) -> Impl | Skip:
    try:
        _import("flashinfer")
        fi_norm = _import("flashinfer.norm")
    except ImportError as exc:
        return Skip("flashinfer", variant, f"flashinfer is not importable ({exc})")
    version = getattr(importlib.import_module("flashinfer"), "__version__", "") or _dist_version(
        "flashinfer-python"
    )
    name = "fused_add_rmsnorm" if op == FUSED else "rmsnorm"
    fn = getattr(fi_norm, name, None)
    if fn is None:
        return Skip("flashinfer", variant, f"flashinfer {version} has no flashinfer.norm.{name}")
    kwargs: dict[str, Any] = {"eps": eps}
    if variant == "pdl":
        try:
            accepts = "enable_pdl" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            accepts = False
        if not accepts:
            return Skip("flashinfer", variant, f"flashinfer {version}: no enable_pdl parameter")
        kwargs["enable_pdl"] = True
    if op == FUSED:
        return Impl(
            "flashinfer",
            variant,
            lambda i: functools.partial(fn, i["x"], i["residual"], i["weight"], **kwargs),
            version,
        )
    return Impl(
        "flashinfer",
        variant,
        lambda i: functools.partial(fn, i["x"], i["weight"], **kwargs),
        version,
    )


def liger_arguments(forward: Callable[..., Any], eps: float) -> list[Any] | str:
    """Positional arguments after ``X, W`` for ``LigerRMSNormFunction.apply``, bound by name.

    ``forward`` is ``LigerRMSNormFunction.forward``; its parameter list differs across Liger
    versions. Returns the list, or a reason string when a required parameter is unknown.
    """
    params = list(inspect.signature(forward).parameters.values())[1:]  # drop ctx
    if len(params) < 2:
        return f"unexpected signature {inspect.signature(forward)}"
    wanted = {"eps": eps, "offset": 0.0, "casting_mode": "llama"}
    args: list[Any] = []
    last = -1
    for idx, p in enumerate(params[2:]):
        if p.name in wanted:
            args.append(wanted[p.name])
            last = idx
        elif p.default is not inspect.Parameter.empty:
            args.append(p.default)
        else:
            return f"required parameter {p.name!r} of {inspect.signature(forward)} is unknown"
    if "eps" not in [p.name for p in params]:
        return f"no eps parameter in {inspect.signature(forward)}"
    return args[: last + 1]


def _liger(op: str, variant: str, eps: float) -> Impl | Skip:
    if op == FUSED:
        return Skip("liger", variant, "Liger has no fused add + rmsnorm")
    try:
        mod = _import("liger_kernel.ops.rms_norm")
    except ImportError as exc:
        return Skip("liger", variant, f"liger_kernel is not importable ({exc})")
    fn_cls = getattr(mod, "LigerRMSNormFunction", None)
    if fn_cls is None:
        return Skip("liger", variant, "liger_kernel.ops.rms_norm has no LigerRMSNormFunction")
    extra = liger_arguments(fn_cls.forward, eps)
    if isinstance(extra, str):
        return Skip("liger", variant, f"LigerRMSNormFunction: {extra}", error=True)
    apply = fn_cls.apply
    return Impl(
        "liger",
        variant,
        lambda i: functools.partial(apply, i["x"], i["weight"], *extra),
        _dist_version("liger-kernel"),
    )


def _torch_add(op: str, variant: str, eps: float) -> Impl | Skip:
    def twice(i: Inputs) -> tuple[Any, ...]:
        return (i["x"] + i["x"],)

    return Impl(
        "torch_add",
        variant,
        lambda i: functools.partial(operator.add, i["x"], i["x"]),
        _torch().__version__,
        reference=twice,
    )


#: Backend name -> builder ``(op, variant, eps) -> Impl | Skip``.
BUILDERS: dict[str, Builder] = {
    "ember": _ember,
    "torch": _torch_eager,
    "torch_compile": _torch_compile,
    "flashinfer": _flashinfer,
    "liger": _liger,
    "torch_add": _torch_add,
}


def _work(
    ctx: BenchContext, args: argparse.Namespace, op: str, known: Mapping[str, Sequence[str]]
) -> Iterator[Work]:
    pairs = expand_backends(args.backends, known)
    for shape in args.shapes:
        for dtype in args.dtypes:
            case = _case(ctx, op, tuple(shape), dtype, args.eps)
            for backend, variant in pairs:
                try:
                    impl = BUILDERS[backend](op, variant, args.eps)
                except Exception as exc:
                    impl = Skip(backend, variant, f"{type(exc).__name__}: {exc}", error=True)
                yield case, impl


@routine(
    RMSNORM,
    help="y = x / rms(x) * w over the last dimension",
    backends=_NORM_BACKENDS,
    arguments=_norm_arguments("1x4096,128x4096,8192x4096,8192x8192"),
)
def rmsnorm(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend of ``rmsnorm`` at every shape and dtype."""
    return _work(ctx, args, RMSNORM, _NORM_BACKENDS)


@routine(
    FUSED,
    help="residual += x; x = rmsnorm(residual), in place",
    backends=_FUSED_BACKENDS,
    arguments=_norm_arguments("1x4096,128x4096,8192x4096,8192x8192"),
)
def fused_add_rmsnorm(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend of ``fused_add_rmsnorm_`` at every shape and dtype."""
    return _work(ctx, args, FUSED, _FUSED_BACKENDS)


@routine(
    HOST,
    help="host time per eager call: allocating rmsnorm vs torch x + x vs flashinfer",
    backends=_HOST_BACKENDS,
    arguments=_norm_arguments("1x128"),
    timer="host",
)
def host(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Host wall time per call of a tiny allocating rmsnorm, next to ``x + x``."""
    return _work(ctx, args, HOST, _HOST_BACKENDS)
