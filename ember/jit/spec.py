"""The one description of a module to build (R2.1, R2.2): :class:`KernelSpec`.

A spec says *what* to build; the :class:`Toolchain` named by ``spec.toolchain`` says *how*. The
build template (:func:`ember.jit.build.build_and_load`) never branches on the toolchain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ember.jit.arch import Arch
    from ember.jit.manifest import BuildPlan

__all__ = ["BuildMode", "KernelSpec", "ParamValue", "Toolchain"]

ParamValue = str | int | float | bool

_URI_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
TOOLCHAINS = ("cuda", "host")


@dataclass(frozen=True)
class KernelSpec:
    """A module to compile: its name, sources, flags and where it may run.

    Parameters
    ----------
    uri:
        Unique, deterministic name of this specialization, e.g. ``rmsnorm_bf16_h4096``. It names
        the cache directory and the logs; it is *not* the cache key (contents are).
    sources:
        Files to compile (absolute paths; package files are only read, generated ones live under
        ``EMBER_CACHE_DIR/generated/<uri>/``).
    toolchain:
        ``"cuda"`` (nvcc, one ``-gencode`` per target) or ``"host"`` (the C++ compiler).
    archs:
        Supported architecture families for CUDA specs, e.g. ``("sm80+",)`` or ``("sm90a",)``.
        Must be empty for host specs.
    params:
        The specialization (dtypes, sizes, ...) — part of the key and of every log line.
    """

    uri: str
    sources: tuple[Path, ...]
    toolchain: str = "cuda"
    archs: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    include_dirs: tuple[Path, ...] = ()
    params: tuple[tuple[str, ParamValue], ...] = field(default=())

    def __post_init__(self) -> None:
        if not _URI_RE.fullmatch(self.uri):
            raise ValueError(
                f"KernelSpec.uri={self.uri!r} is invalid; expected letters, digits, '_', '.', '-'"
            )
        if self.toolchain not in TOOLCHAINS:
            raise ValueError(
                f"KernelSpec.toolchain={self.toolchain!r} for {self.uri!r}; expected one of "
                f"{TOOLCHAINS}"
            )
        if not self.sources:
            raise ValueError(f"KernelSpec {self.uri!r} has no sources")
        if self.toolchain == "cuda" and not self.archs:
            raise ValueError(f"CUDA KernelSpec {self.uri!r} must list its supported arch families")
        if self.toolchain == "host" and self.archs:
            raise ValueError(f"host KernelSpec {self.uri!r} must not list arch families")
        # NOTE: normalise sequences/mappings so equal specs compare and hash equal.
        set_ = object.__setattr__
        set_(self, "sources", tuple(Path(s) for s in self.sources))
        set_(self, "include_dirs", tuple(Path(s) for s in self.include_dirs))
        for name in ("archs", "cflags", "cuda_cflags", "ldflags"):
            set_(self, name, tuple(getattr(self, name)))
        params = self.params
        items = params.items() if isinstance(params, Mapping) else params
        set_(self, "params", tuple(sorted((str(k), v) for k, v in items)))

    @property
    def param_dict(self) -> dict[str, ParamValue]:
        return dict(self.params)


@dataclass(frozen=True)
class BuildMode:
    """Debug and line-info switches; both are part of the key (R6.14)."""

    debug: bool = False
    lineinfo: bool = False

    def as_dict(self) -> dict[str, bool]:
        return {"debug": self.debug, "lineinfo": self.lineinfo}


class Toolchain(Protocol):
    """How to turn a spec into a module. Implementations: ``cuda`` and ``host``."""

    name: str

    def version(self) -> str:
        """Identity of the compilers used (part of the key); never starts a compiler twice."""
        ...

    def compile_rules(
        self, spec: KernelSpec, targets: Sequence[Arch], mode: BuildMode, threads: int
    ) -> BuildPlan:
        """The build manifest: rules and edges producing ``<uri>.so``."""
        ...
