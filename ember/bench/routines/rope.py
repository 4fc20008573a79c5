"""Bench routine ``rope``: RoPE on q and k, in place, angles from a cos/sin cache.

A shape is ``TxHQxHKxD``: tokens, query heads, kv heads, head_dim (``rotary_dim = head_dim``,
NeoX pairs, positions random in ``[0, 32768)``).

Backends
--------
``ember``
    ``ember.apply_rope_with_cos_sin_cache_`` (variant ``default``) and ``ember.apply_rope_``
    with computed angles (variant ``computed``; same angles up to fp32 rounding).
``torch`` / ``torch_compile``
    The reference formulation (gather cos/sin rows, rotate halves, write back in place), eager
    and compiled once per shape.
``flashinfer``
    ``flashinfer.rope.apply_rope_with_cos_sin_cache_inplace`` (vLLM/SGLang signature).

Bytes moved: q and k read and written once, the cos/sin rows of the positions and the
positions read.
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

__all__ = ["cos_sin_cache", "rope", "torch_rope_"]

ROPE = "rope"
MAX_POSITION = 32768
_BACKENDS = {
    "ember": ("default", "computed"),
    "torch": ("default",),
    "torch_compile": ("default",),
    "flashinfer": ("default",),
}


def _torch() -> Any:
    import torch

    return torch


def cos_sin_cache(
    max_position: int, rotary_dim: int, theta: float = 1e4, device: Any = None
) -> Any:
    """``[max_position, rotary_dim]`` fp32: cos of the pairs' angles, then sin (vLLM layout)."""
    torch = _torch()
    inv_freq = 1.0 / theta ** (
        torch.arange(0, rotary_dim, 2, dtype=torch.float32, device=device) / rotary_dim
    )
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32, device=device), inv_freq)
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def torch_rope_(q: Any, k: Any, positions: Any, cache: Any) -> None:
    """NeoX RoPE in place, computed in fp32: what users write without a kernel."""
    half = cache.shape[-1] // 2
    cs = cache[positions]
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    for t in (q, k):
        x1, x2 = t[..., :half].float(), t[..., half : 2 * half].float()
        t[..., :half] = (x1 * cos - x2 * sin).to(t.dtype)
        t[..., half : 2 * half] = (x2 * cos + x1 * sin).to(t.dtype)


def _arguments(p: argparse.ArgumentParser) -> None:
    shape_arguments(
        p,
        shapes=int_shapes(4, "rope", "TxHQxHKxD", lambda s: "D must be even" if s[3] % 2 else None),
        default="8192x32x8x128,1x32x8x128,64x32x8x128",
        meaning="TxHQxHKxD: tokens x query heads x kv heads x head_dim",
    )


def _case(ctx: BenchContext, shape: tuple[int, ...], dtype: str) -> Case:
    tokens, hq, hk, dim = shape
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        td = torch_dtype(dtype)
        return {
            "q": torch.randn(tokens, hq, dim, device=device).to(td),
            "k": torch.randn(tokens, hk, dim, device=device).to(td),
            "positions": torch.randint(0, MAX_POSITION, (tokens,), device=device),
            "cache": cos_sin_cache(MAX_POSITION, dim, device=device),
        }

    def reference(i: Inputs) -> tuple[Any, ...]:
        q, k = i["q"].clone(), i["k"].clone()
        torch_rope_(q, k, i["positions"], i["cache"])
        return (q, k)

    from ember.testing import tolerances

    return Case(
        routine=ROPE,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=reference,
        # NOTE: in place: the outputs are the inputs after the call (the check runs on a copy)
        outputs=lambda i, result: (i["q"], i["k"]),
        nbytes=2 * tokens * (hq + hk) * dim * itemsize(dtype) + tokens * (dim * 4 + 8),
        params={"rotary_dim": dim, "layout": "neox", "max_position": MAX_POSITION},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source="ember.bench.routines.rope.torch_rope_ in fp32",
        tolerance=tolerances(torch_dtype(dtype)),
    )


def _ember(variant: str) -> Impl | Skip:
    import ember

    if variant == "computed":
        return Impl(
            "ember",
            variant,
            lambda i: functools.partial(ember.apply_rope_, i["q"], i["k"], i["positions"]),
            ember.__version__,
        )
    return Impl(
        "ember",
        variant,
        lambda i: functools.partial(
            ember.apply_rope_with_cos_sin_cache_, i["q"], i["k"], i["positions"], i["cache"]
        ),
        ember.__version__,
    )


def _torch_eager(variant: str) -> Impl | Skip:
    return Impl(
        "torch",
        variant,
        lambda i: functools.partial(torch_rope_, i["q"], i["k"], i["positions"], i["cache"]),
        _torch().__version__,
    )


def _torch_compile(variant: str) -> Impl | Skip:
    torch = _torch()
    torch._dynamo.reset()
    compiled = torch.compile(torch_rope_, dynamic=False)
    return Impl(
        "torch_compile",
        variant,
        lambda i: functools.partial(compiled, i["q"], i["k"], i["positions"], i["cache"]),
        torch.__version__,
    )


def _flashinfer(variant: str) -> Impl | Skip:
    try:
        fi = importlib.import_module("flashinfer")
        fn = importlib.import_module("flashinfer.rope").apply_rope_with_cos_sin_cache_inplace
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer.rope is not usable ({exc})")

    def prepare(i: Inputs) -> Callable[[], Any]:
        q, k = i["q"], i["k"]
        t, dim = q.shape[0], q.shape[-1]
        return functools.partial(
            fn, i["positions"], q.view(t, -1), k.view(t, -1), dim, i["cache"], True
        )

    return Impl("flashinfer", variant, prepare, getattr(fi, "__version__", ""))


_BUILDERS: dict[str, Callable[[str], Impl | Skip]] = {
    "ember": _ember,
    "torch": _torch_eager,
    "torch_compile": _torch_compile,
    "flashinfer": _flashinfer,
}


@routine(
    ROPE, help="RoPE on q and k in place (cos/sin cache)", backends=_BACKENDS, arguments=_arguments
)
def rope(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape and dtype."""
    return each_case(
        args,
        _BACKENDS,
        lambda shape, dtype: _case(ctx, shape, dtype),
        lambda shape, dtype, backend, variant: _BUILDERS[backend](variant),
    )
