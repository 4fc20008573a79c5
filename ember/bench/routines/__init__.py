"""The routine registry: each bench routine names its backends and yields its workloads.

A routine is a function decorated with :func:`routine`. Given the context and the parsed
arguments it yields ``(case, impl_or_skip)`` pairs; the harness checks, times and reports each
one the same way. Modules holding routines are listed in :data:`ROUTINE_MODULES` and imported on
first use of the registry (they import no torch at module level)::

    @routine("rmsnorm", help="...", backends={"ember": ("default", "out"), "torch": ("default",)})
    def rmsnorm(ctx: BenchContext, args: argparse.Namespace) -> Iterator[Work]:
        ...
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from ember.bench.case import Case, Impl, Skip

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext

__all__ = [
    "ROUTINE_MODULES",
    "Routine",
    "Work",
    "all_routines",
    "expand_backends",
    "get_routine",
    "parse_backends",
    "routine",
]

#: Modules whose import registers routines.
ROUTINE_MODULES: tuple[str, ...] = (
    "ember.bench.routines.act",
    "ember.bench.routines.decode",
    "ember.bench.routines.filters",
    "ember.bench.routines.norm",
    "ember.bench.routines.rope",
    "ember.bench.routines.sampling",
)

#: One unit of work: a case and how one backend variant computes it (or why it cannot).
Work: TypeAlias = tuple[Case, Impl | Skip]
RunFn: TypeAlias = Callable[["BenchContext", argparse.Namespace], Iterable[Work]]

TIMERS = ("device", "host")


@dataclass(frozen=True)
class Routine:
    """A registered routine.

    Attributes
    ----------
    name:
        The command-line name (``rmsnorm``).
    run:
        Yields the work for the parsed arguments.
    help:
        One line for ``--help``.
    backends:
        Backend name -> its variant names (``default`` is the plain call), in report order.
    add_arguments:
        Adds the routine's own options (``--shapes``...) to its subparser.
    timer:
        ``device`` (GPU time of each call) or ``host`` (wall time per eager call).
    """

    name: str
    run: RunFn
    help: str
    backends: Mapping[str, tuple[str, ...]]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    timer: str = "device"


_REGISTRY: dict[str, Routine] = {}


def routine(
    name: str,
    *,
    help: str,
    backends: Mapping[str, Sequence[str]],
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    timer: str = "device",
) -> Callable[[RunFn], RunFn]:
    """Register the decorated function as routine ``name``.

    Raises
    ------
    ValueError
        The name is taken, a backend has no variant, or ``timer`` is unknown.
    """
    if timer not in TIMERS:
        raise ValueError(f"routine {name!r}: timer {timer!r} unknown; expected one of {TIMERS}")
    if any(not v for v in backends.values()):
        raise ValueError(f"routine {name!r}: every backend needs at least one variant")

    def decorate(fn: RunFn) -> RunFn:
        if name in _REGISTRY:
            raise ValueError(f"bench routine {name!r} is already registered")
        _REGISTRY[name] = Routine(
            name=name,
            run=fn,
            help=help,
            backends={b: tuple(v) for b, v in backends.items()},
            add_arguments=arguments or (lambda _p: None),
            timer=timer,
        )
        return fn

    return decorate


def _load() -> None:
    # NOTE: importing an already-imported module is a dict lookup; the import registers.
    for module in ROUTINE_MODULES:
        importlib.import_module(module)


def all_routines() -> list[Routine]:
    """Every registered routine, in registration order."""
    _load()
    return list(_REGISTRY.values())


def get_routine(name: str) -> Routine:
    """The routine called ``name``; ``KeyError`` naming the known ones otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no bench routine {name!r}; known: {', '.join(_REGISTRY)}") from None


def parse_backends(text: str, known: Mapping[str, Sequence[str]]) -> list[tuple[str, str | None]]:
    """``"ember,flashinfer[pdl]"`` -> ``[("ember", None), ("flashinfer", "pdl")]``.

    ``None`` selects every variant of the backend.

    Raises
    ------
    ValueError
        An unknown backend or variant, or an empty list.
    """
    out: list[tuple[str, str | None]] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, variant = item, None
        if item.endswith("]") and "[" in item:
            name, _, rest = item.partition("[")
            variant = rest[:-1]
        if name not in known:
            raise ValueError(f"unknown backend {name!r}; known: {', '.join(known)}")
        if variant is not None and variant not in known[name]:
            raise ValueError(
                f"backend {name!r} has no variant {variant!r}; known: {', '.join(known[name])}"
            )
        out.append((name, variant))
    if not out:
        raise ValueError("no backend given; e.g. --backends ember,torch")
    return out


def expand_backends(
    selected: Sequence[tuple[str, str | None]] | None, known: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """Selected backends as ``(backend, variant)`` pairs, without duplicates, in given order.

    ``None`` (no ``--backends``) selects every variant of every backend.
    """
    chosen = selected if selected is not None else [(b, None) for b in known]
    out: list[tuple[str, str]] = []
    for name, variant in chosen:
        for v in known[name] if variant is None else (variant,):
            if (name, v) not in out:
                out.append((name, v))
    return out
