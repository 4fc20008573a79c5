"""Bench routine ``decode``: batch decode attention over a paged KV cache.

Backends
--------
``ember``
    ``ember.ops.decode.plan_batch_decode`` once per case (outside the timed region), then
    ``batch_decode(q, kv_cache, plan, out=...)`` timed.
``flashinfer`` (variants ``cuda_cores``, ``tensor_cores``)
    ``BatchDecodeWithPagedKVCacheWrapper`` with ``use_tensor_cores`` off and on: the issue's
    baseline is the faster of the two per shape, which the report marks ``(best)``.

A shape is ``BxLxHQxHKxDxP``: batch, tokens per request (the mean for ``--lengths pareto``),
query heads, KV heads, head_dim, page size. Pages are shuffled across the cache.

Bytes moved: every attended K and V row once, ``q`` read, the output written, the page indices.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ember.bench.case import (
    Case,
    Impl,
    Inputs,
    Skip,
    format_shape,
    itemsize,
    torch_dtype,
)
from ember.bench.routines import Work, routine
from ember.bench.routines.common import each_case, int_shapes, shape_arguments
from ember.testing.reference import page_table

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = ["append_kv", "decode", "decode_lengths", "merge_states", "parse_decode_shape"]

DECODE, APPEND, MERGE = "decode", "append_kv", "merge_states"
_APPEND_BACKENDS = {"ember": ("default",), "flashinfer": ("default",)}
_MERGE_BACKENDS = {"ember": ("default",), "flashinfer": ("default",)}
_BACKENDS = {"ember": ("default",), "flashinfer": ("cuda_cores", "tensor_cores")}
_KV_BYTES = {"same": None, "e4m3": 1}


def parse_decode_shape(text: str) -> tuple[int, ...]:
    """``"64x4096x32x8x128x16"`` -> ``(B, L, HQ, HK, D, P)``, all positive, HQ a multiple of HK."""
    parts = text.strip().lower().split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"decode shape {text!r}: expected BxLxHQxHKxDxP integers") from None
    if len(shape) != 6 or min(shape) < 1:
        raise ValueError(f"decode shape {text!r}: expected 6 positive integers BxLxHQxHKxDxP")
    if shape[2] % shape[3]:
        raise ValueError(f"decode shape {text!r}: HQ={shape[2]} is not a multiple of HK={shape[3]}")
    return shape


def decode_lengths(batch: int, mean: int, dist: str, seed: int = 0) -> list[int]:
    """Tokens per request: all ``mean`` (uniform) or Pareto(1.5) with that mean, capped at 16x."""
    if dist == "uniform":
        return [mean] * batch
    rng = random.Random(seed)
    scale = mean / 3.0  # Pareto(alpha=1.5) has mean 3 * x_m
    return [max(1, min(16 * mean, int(scale * rng.paretovariate(1.5)))) for _ in range(batch)]


def _arguments(p: argparse.ArgumentParser) -> None:
    default = "64x4096x32x8x128x16"

    def shapes(text: str) -> list[tuple[int, ...]]:
        try:
            return [parse_decode_shape(s) for s in text.split(",") if s.strip()]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    shape_arguments(
        p,
        shapes=shapes,
        default=default,
        meaning="BxLxHQxHKxDxP",
        dtype_help="q dtype: bf16 or fp16",
    )
    p.add_argument(
        "--kv-dtype",
        choices=sorted(_KV_BYTES),
        default="same",
        help="KV cache dtype: the q dtype, or fp8 e4m3 (default same)",
    )
    p.add_argument(
        "--lengths",
        choices=("uniform", "pareto"),
        default="uniform",
        help="per-request lengths (default uniform)",
    )
    p.add_argument("--layout", choices=("NHD", "HND"), default="NHD", help="default NHD")


def _torch() -> Any:
    import torch

    return torch


def _cache_shape(pages: int, page: int, hk: int, dim: int, layout: str) -> tuple[int, ...]:
    """The combined K/V cache shape: ``[pages, 2, page, hk, dim]`` (NHD), else ``hk`` first."""
    return (pages, 2, page, hk, dim) if layout == "NHD" else (pages, 2, hk, page, dim)


def _case(ctx: BenchContext, shape: tuple[int, ...], dtype: str, args: argparse.Namespace) -> Case:
    batch, mean, hq, hk, dim, page = shape
    lengths = decode_lengths(batch, mean, args.lengths)
    fp8 = args.kv_dtype == "e4m3"
    e_q, e_kv = itemsize(dtype), 1 if fp8 else itemsize(dtype)
    h_indptr, h_last = page_table(lengths, page)
    total_pages = int(h_indptr[-1])
    device = ctx.device
    layout = args.layout

    def make_inputs() -> Inputs:
        torch = _torch()
        td = torch_dtype(dtype)
        cache = torch.randn(_cache_shape(total_pages, page, hk, dim, layout), device=device)
        cache = cache.to(torch.float8_e4m3fn) if fp8 else cache.to(td)
        order = torch.randperm(total_pages, device="cpu").to(torch.int32)
        return {
            "q": torch.randn(batch, hq, dim, device=device).to(td),
            "cache": cache,
            "indptr": h_indptr.to(device),
            "indices": order.to(device),
            "last": h_last.to(device),
            "h_indptr": h_indptr,
            "h_last": h_last,
        }

    def reference(i: Inputs) -> tuple[Any, ...]:
        from ember.testing.reference import batch_decode_ref

        out, _ = batch_decode_ref(
            i["q"],
            i["cache"][:, 0],
            i["cache"][:, 1],
            i["indptr"],
            i["indices"],
            i["h_last"],
            layout=layout,
        )
        return (out.to(i["q"].dtype),)

    kv_bytes = sum(lengths) * hk * dim * 2 * e_kv
    return Case(
        routine=DECODE,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=reference,
        outputs=lambda i, result: (result,),
        nbytes=kv_bytes + 2 * batch * hq * dim * e_q + 4 * total_pages,
        params={"kv_dtype": args.kv_dtype, "lengths": args.lengths, "layout": layout},
        cli=(
            "--shapes",
            format_shape(shape),
            "--dtypes",
            dtype,
            "--kv-dtype",
            args.kv_dtype,
            "--lengths",
            args.lengths,
            "--layout",
            layout,
        ),
        reference_source="ember.testing.reference.batch_decode_ref (fp64)",
        tolerance=(2e-2, 2e-2),
    )


def _ember(shape: tuple[int, ...], variant: str, args: argparse.Namespace) -> Impl | Skip:
    import ember
    from ember.ops import decode as dec

    _, _, hq, hk, dim, page = shape

    def prepare(i: Inputs) -> Callable[[], Any]:
        torch = _torch()
        ws = dec.DecodeWorkspace(
            i["q"].device, max_batch=i["q"].shape[0], num_qo_heads=hq, head_dim=dim
        )
        plan = dec.plan_batch_decode(
            i["indptr"],
            i["indices"],
            i["last"],
            num_qo_heads=hq,
            num_kv_heads=hk,
            head_dim=dim,
            page_size=page,
            workspace=ws,
            q_dtype=i["q"].dtype,
            kv_dtype="e4m3" if args.kv_dtype == "e4m3" else None,
            layout=args.layout,
            host_indptr=i["h_indptr"],
            host_last_page_len=i["h_last"],
        )
        out = torch.full_like(i["q"], math.nan)  # poisoned: an unwritten element fails the check
        return functools.partial(dec.batch_decode, i["q"], i["cache"], plan, out=out)

    return Impl("ember", variant, prepare, ember.__version__)


def _flashinfer_attr(name: str, variant: str) -> tuple[Any, Any] | Skip:
    """``(flashinfer, flashinfer.<name>)``, or the Skip that says why the peer cannot run."""
    try:
        fi = importlib.import_module("flashinfer")
    except Exception as exc:
        return Skip("flashinfer", variant, f"flashinfer is not importable ({exc})")
    attr = getattr(fi, name, None)
    if attr is None:
        return Skip("flashinfer", variant, f"no flashinfer.{name}")
    return fi, attr


def _flashinfer(shape: tuple[int, ...], variant: str, args: argparse.Namespace) -> Impl | Skip:
    found = _flashinfer_attr("BatchDecodeWithPagedKVCacheWrapper", variant)
    if isinstance(found, Skip):
        return found
    fi, wrapper_cls = found
    _, _, hq, hk, dim, page = shape

    def prepare(i: Inputs) -> Callable[[], Any]:
        torch = _torch()
        buf = torch.empty(128 << 20, dtype=torch.uint8, device=i["q"].device)
        w = wrapper_cls(buf, args.layout, use_tensor_cores=variant == "tensor_cores")
        w.plan(
            i["h_indptr"],
            i["indices"],
            i["h_last"],
            hq,
            hk,
            dim,
            page,
            q_data_type=i["q"].dtype,
            kv_data_type=i["cache"].dtype,
        )
        return functools.partial(w.run, i["q"], i["cache"])

    return Impl("flashinfer", variant, prepare, getattr(fi, "__version__", ""))


_BUILDERS: dict[str, Callable[..., Impl | Skip]] = {"ember": _ember, "flashinfer": _flashinfer}


def _work(
    ctx: BenchContext,
    args: argparse.Namespace,
    known: Mapping[str, Sequence[str]],
    make_case: Callable[..., Case],
    builders: dict[str, Callable[..., Impl | Skip]],
) -> Iterator[Work]:
    return each_case(
        args,
        known,
        lambda shape, dtype: make_case(ctx, shape, dtype, args),
        lambda shape, dtype, backend, variant: builders[backend](shape, variant, args),
    )


@routine(
    DECODE,
    help="batch decode attention over a paged KV cache",
    backends=_BACKENDS,
    arguments=_arguments,
)
def decode(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape and q dtype."""
    return _work(ctx, args, _BACKENDS, _case, _BUILDERS)


# --- append_kv ------------------------------------------------------------------------------


def _append_arguments(p: argparse.ArgumentParser) -> None:
    shape_arguments(
        p,
        shapes=int_shapes(5, "append", "BxNxHKxDxP"),
        default="256x1x8x128x16,8x512x8x128x16",
        meaning="BxNxHKxDxP: requests x new tokens each x kv heads x head_dim x page size",
        dtype_help="cache dtype: bf16 or fp16",
    )
    p.add_argument("--layout", choices=("NHD", "HND"), default="NHD", help="default NHD")


def _append_case(
    ctx: BenchContext, shape: tuple[int, ...], dtype: str, args: argparse.Namespace
) -> Case:
    batch, new, hk, dim, page = shape
    pages_each = (new + page - 1) // page
    total_pages = batch * pages_each
    nnz = batch * new
    e = itemsize(dtype)
    layout = args.layout
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        td = torch_dtype(dtype)
        kv_shape = _cache_shape(total_pages, page, hk, dim, layout)
        i32 = torch.int32
        return {
            "k": torch.randn(nnz, hk, dim, device=device).to(td),
            "v": torch.randn(nnz, hk, dim, device=device).to(td),
            "batch_indices": torch.arange(batch, dtype=i32, device=device).repeat_interleave(new),
            "positions": torch.arange(new, dtype=i32, device=device).repeat(batch),
            "cache": torch.zeros(kv_shape, device=device, dtype=td),
            "indices": torch.randperm(total_pages, device="cpu").to(i32).to(device),
            "indptr": (torch.arange(batch + 1, dtype=i32) * pages_each).to(device),
            "last": torch.full((batch,), new - (pages_each - 1) * page, dtype=i32, device=device),
        }

    def reference(i: Inputs) -> tuple[Any, ...]:
        cache = i["cache"].clone()
        ip = i["indptr"].tolist()
        idx = i["indices"].tolist()
        for t, (b, pos) in enumerate(
            zip(i["batch_indices"].tolist(), i["positions"].tolist(), strict=True)
        ):
            pg, slot = idx[ip[b] + pos // page], pos % page
            if layout == "NHD":
                cache[pg, 0, slot], cache[pg, 1, slot] = i["k"][t], i["v"][t]
            else:
                cache[pg, 0, :, slot], cache[pg, 1, :, slot] = i["k"][t], i["v"][t]
        return (cache,)

    return Case(
        routine=APPEND,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=reference,
        outputs=lambda i, result: (i["cache"],),
        nbytes=2 * 2 * nnz * hk * dim * e + 4 * 2 * nnz,
        params={"layout": layout},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype, "--layout", layout),
        reference_source="python scatter (exact)",
        tolerance=(0.0, 0.0),
    )


def _append_ember(shape: tuple[int, ...], variant: str, args: argparse.Namespace) -> Impl | Skip:
    import ember

    def prepare(i: Inputs) -> Callable[[], Any]:
        return functools.partial(
            ember.append_paged_kv_cache,
            i["k"],
            i["v"],
            i["batch_indices"],
            i["positions"],
            i["cache"],
            i["indices"],
            i["indptr"],
            i["last"],
            layout=args.layout,
        )

    return Impl("ember", variant, prepare, ember.__version__)


def _append_flashinfer(
    shape: tuple[int, ...], variant: str, args: argparse.Namespace
) -> Impl | Skip:
    found = _flashinfer_attr("append_paged_kv_cache", variant)
    if isinstance(found, Skip):
        return found
    fi, fn = found

    def prepare(i: Inputs) -> Callable[[], Any]:
        return functools.partial(
            fn,
            i["k"],
            i["v"],
            i["batch_indices"],
            i["positions"],
            i["cache"],
            i["indices"],
            i["indptr"],
            i["last"],
            kv_layout=args.layout,
        )

    return Impl("flashinfer", variant, prepare, getattr(fi, "__version__", ""))


_APPEND_BUILDERS: dict[str, Callable[..., Impl | Skip]] = {
    "ember": _append_ember,
    "flashinfer": _append_flashinfer,
}


@routine(
    APPEND,
    help="write new tokens' K and V into a paged KV cache",
    backends=_APPEND_BACKENDS,
    arguments=_append_arguments,
)
def append_kv(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape and dtype."""
    return _work(ctx, args, _APPEND_BACKENDS, _append_case, _APPEND_BUILDERS)


# --- merge_states ---------------------------------------------------------------------------


def _merge_arguments(p: argparse.ArgumentParser) -> None:
    shape_arguments(
        p,
        shapes=int_shapes(4, "merge", "RxSxHxD"),
        default="4096x2x32x128,64x16x32x128",
        meaning="RxSxHxD: rows x states x heads x head_dim",
        dtype_help="state dtype: bf16, fp16 or fp32",
    )


def _merge_case(
    ctx: BenchContext, shape: tuple[int, ...], dtype: str, args: argparse.Namespace
) -> Case:
    rows, states, heads, dim = shape
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        return {
            "v": torch.randn(rows, states, heads, dim, device=device).to(torch_dtype(dtype)),
            "s": 4 * torch.randn(rows, states, heads, device=device),
        }

    def reference(i: Inputs) -> tuple[Any, ...]:
        torch = _torch()
        s = i["s"].double()
        w = torch.softmax(s, dim=1)
        out = (w[..., None] * i["v"].double()).sum(dim=1)
        return (out.to(i["v"].dtype),)

    e = itemsize(dtype)
    return Case(
        routine=MERGE,
        shape=shape,
        dtype=dtype,
        make_inputs=make_inputs,
        reference=reference,
        outputs=lambda i, result: (result[0],),
        nbytes=rows * heads * (states * (dim * e + 4) + dim * e + 4),
        params={},
        cli=("--shapes", format_shape(shape), "--dtypes", dtype),
        reference_source="softmax-weighted sum in fp64",
        tolerance=(2e-2, 2e-2) if e < 4 else (1e-4, 1e-4),
    )


def _merge_ember(shape: tuple[int, ...], variant: str, args: argparse.Namespace) -> Impl | Skip:
    import ember

    def prepare(i: Inputs) -> Callable[[], Any]:
        torch = _torch()
        rows, _, heads, dim = i["v"].shape
        out = torch.full((rows, heads, dim), math.nan, dtype=i["v"].dtype, device=i["v"].device)
        lse = torch.empty(rows, heads, dtype=torch.float32, device=i["v"].device)
        return functools.partial(ember.merge_states, i["v"], i["s"], out=out, out_lse=lse)

    return Impl("ember", variant, prepare, ember.__version__)


def _merge_flashinfer(
    shape: tuple[int, ...], variant: str, args: argparse.Namespace
) -> Impl | Skip:
    found = _flashinfer_attr("merge_states", variant)
    if isinstance(found, Skip):
        return found
    fi, fn = found

    def prepare(i: Inputs) -> Callable[[], Any]:
        # NOTE: FlashInfer's states carry base-2 LSEs; ember's (and the reference's) natural log.
        s2 = (i["s"] * (1.0 / math.log(2.0))).contiguous()
        return functools.partial(fn, i["v"], s2)

    return Impl("flashinfer", variant, prepare, getattr(fi, "__version__", ""))


_MERGE_BUILDERS: dict[str, Callable[..., Impl | Skip]] = {
    "ember": _merge_ember,
    "flashinfer": _merge_flashinfer,
}


@routine(
    MERGE,
    help="merge attention states (outputs and LSEs) of split attention",
    backends=_MERGE_BACKENDS,
    arguments=_merge_arguments,
)
def merge_states(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
    """Every selected backend at every shape and dtype."""
    return _work(ctx, args, _MERGE_BACKENDS, _merge_case, _MERGE_BUILDERS)
