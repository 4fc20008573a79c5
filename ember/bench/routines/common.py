"""What the kernel-family routines share: the ``--shapes``/``--dtypes`` options and the loop
that pairs every case with every selected backend variant (a builder that raises becomes a
reported Skip, never a crash of the whole run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ember.bench.case import Case, Impl, Skip, parse_dtype
from ember.bench.routines import Work, expand_backends

__all__ = ["each_case", "int_shapes", "shape_arguments"]


def int_shapes(
    n: int, label: str, names: str, check: Callable[[tuple[int, ...]], str | None] | None = None
) -> Callable[[str], list[tuple[int, ...]]]:
    """A ``--shapes`` parser: comma-separated shapes of ``n`` positive integers (``names``, e.g.
    ``TxD``); ``check`` may reject a shape with a reason."""

    def shapes(text: str) -> list[tuple[int, ...]]:
        out: list[tuple[int, ...]] = []
        for item in text.split(","):
            parts = item.strip().lower().split("x")
            try:
                shape = tuple(int(v) for v in parts)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{label} shape {item!r}: integers") from None
            if len(shape) != n or min(shape) < 1:
                raise argparse.ArgumentTypeError(
                    f"{label} shape {item!r}: expected {n} positive integers {names}"
                )
            why = check(shape) if check is not None else None
            if why:
                raise argparse.ArgumentTypeError(f"{label} shape {item!r}: {why}")
            out.append(shape)
        return out

    return shapes


def shape_arguments(
    p: argparse.ArgumentParser,
    *,
    shapes: Callable[[str], list[tuple[int, ...]]],
    default: str,
    meaning: str,
    dtypes: str = "bf16",
    dtype_help: str = "bf16, fp16 or fp32",
) -> None:
    """Add ``--shapes`` (parsed by ``shapes``, default ``default``) and ``--dtypes``."""
    p.add_argument(
        "--shapes",
        type=shapes,
        default=shapes(default),
        help=f"{meaning}, comma-separated (default {default})",
    )
    p.add_argument(
        "--dtypes",
        type=lambda t: [parse_dtype(s) for s in t.split(",")],
        default=[dtypes],
        help=f"{dtype_help} (default {dtypes})",
    )


def each_case(
    args: argparse.Namespace,
    known: Mapping[str, Sequence[str]],
    make_case: Callable[[tuple[int, ...], str], Case],
    build: Callable[[tuple[int, ...], str, str, str], Impl | Skip | Any],
) -> Iterator[Work]:
    """Every selected (backend, variant) at every shape and dtype of ``args``;
    ``build(shape, dtype, backend, variant)`` makes the implementation."""
    pairs = expand_backends(args.backends, known)
    for shape in args.shapes:
        for dtype in args.dtypes:
            case = make_case(tuple(shape), dtype)
            for backend, variant in pairs:
                try:
                    impl = build(tuple(shape), dtype, backend, variant)
                except Exception as exc:
                    impl = Skip(backend, variant, f"{type(exc).__name__}: {exc}", error=True)
                yield case, impl
