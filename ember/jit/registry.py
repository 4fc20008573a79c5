"""Every spec generator, for ``ember precompile``, the CLI and the sync tests (R3.12, R8.4).

An op module registers a generator yielding the specs deployment needs::

    @register("norm")
    def _specs() -> Iterator[KernelSpec]:
        yield rmsnorm_spec(...)

The op modules are listed in :data:`OP_MODULES`; :func:`all_specs` imports them on demand.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable, Iterable

from ember.jit.spec import KernelSpec

__all__ = ["OP_MODULES", "all_specs", "register", "registered_families", "specs_by_family"]

OP_MODULES: tuple[str, ...] = (
    "ember.ops.act",
    "ember.ops.decode",
    "ember.ops.norm",
    "ember.ops.paged",
    "ember.ops.rope",
    "ember.ops.sampling",
    "ember.ops.toy",
)

SpecGenerator = Callable[[], Iterable[KernelSpec]]
_GENERATORS: dict[str, SpecGenerator] = {}


def register(family: str) -> Callable[[SpecGenerator], SpecGenerator]:
    """Register ``family``'s spec generator (one per family)."""

    def deco(fn: SpecGenerator) -> SpecGenerator:
        if family in _GENERATORS and _GENERATORS[family] is not fn:
            raise ValueError(f"spec family {family!r} is registered twice")
        _GENERATORS[family] = fn
        return fn

    return deco


def registered_families() -> dict[str, SpecGenerator]:
    """``{family: generator}`` after importing every op module."""
    for name in OP_MODULES:
        importlib.import_module(name)
    return dict(_GENERATORS)


def specs_by_family(pattern: str | None = None) -> list[tuple[str, KernelSpec]]:
    """``(family, spec)`` of every registered spec whose uri or family matches ``pattern``."""
    out: list[tuple[str, KernelSpec]] = []
    seen: set[str] = set()
    for family, gen in registered_families().items():
        for spec in gen():
            if spec.uri in seen:
                raise ValueError(f"two registered specs share the uri {spec.uri!r}")
            seen.add(spec.uri)
            if (
                pattern is None
                or fnmatch.fnmatch(spec.uri, pattern)
                or fnmatch.fnmatch(family, pattern)
            ):
                out.append((family, spec))
    return out


def all_specs(pattern: str | None = None) -> list[KernelSpec]:
    """Every registered spec whose uri or family matches the glob ``pattern`` (all if None)."""
    return [spec for _, spec in specs_by_family(pattern)]
