"""The content key of a module (R5.2-R5.4).

``key = sha256(canonical JSON)`` over: toolchain name and compiler versions, uri, params, the bytes
of every source and of every header it includes from ember's include tree, the spec's include
dirs or the source's own directory (transitively), all flags, the exact targets, the build mode,
and the ember and tvm-ffi versions. Paths and mtimes never enter it, so a cache copied to another
machine still hits, and a reverted edit finds its old entry again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.jit.arch import Arch
from ember.jit.spec import BuildMode, KernelSpec
from ember.jit.workspace import INCLUDE_DIR, PACKAGE_DIR

__all__ = ["KeyInputs", "digest_sources", "portable_name", "source_hash"]

_INCLUDE_RE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.MULTILINE)


def portable_name(path: Path, roots: Sequence[Path]) -> str:
    """A machine-independent name for ``path``: relative to the package or the first root."""
    for root in (PACKAGE_DIR, *roots):
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return path.name


def _resolve_include(name: str, quoted: bool, here: Path, roots: Sequence[Path]) -> Path | None:
    candidates = ([here] if quoted else []) + list(roots)
    for base in candidates:
        p = base / name
        if p.is_file():
            return p.resolve()
    return None


def digest_sources(spec: KernelSpec) -> tuple[tuple[str, str], ...]:
    """``(portable name, sha256)`` of every source and every header it pulls in from our roots.

    Headers resolved outside those roots (the C++ library, CUDA, tvm-ffi) are covered by the
    compiler and tvm-ffi versions instead.
    """
    roots = [INCLUDE_DIR, *(d.resolve() for d in spec.include_dirs)]
    name_roots = [*roots, *(s.resolve().parent for s in spec.sources)]
    seen: dict[Path, str] = {}
    stack = [s.resolve() for s in spec.sources]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"module {spec.uri!r}: source {path} does not exist") from None
        seen[path] = hashlib.sha256(data).hexdigest()
        for quote, inc in _INCLUDE_RE.findall(data):
            found = _resolve_include(inc.decode(), quote == b'"', path.parent, roots)
            if found is not None:
                stack.append(found)
    return tuple(sorted((portable_name(p, name_roots), h) for p, h in seen.items()))


def source_hash(sources: Sequence[Sequence[str]]) -> str:
    """One sha256 over ``(portable name, sha256)`` pairs: what a prebuilt's sources must match."""
    blob = json.dumps(sorted([str(n), str(h)] for n, h in sources), separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class KeyInputs:
    """Everything that determines a module's bytes. ``key`` is its hash."""

    spec: KernelSpec
    compiler: str
    targets: tuple[Arch, ...]
    mode: BuildMode
    extra_cuda_flags: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    ember_version: str
    tvm_ffi_version: str

    def payload(self) -> dict[str, Any]:
        s = self.spec
        return {
            "schema": 1,
            "toolchain": s.toolchain,
            "compiler": self.compiler,
            "uri": s.uri,
            "params": [[k, v] for k, v in s.params],
            "sources": [list(x) for x in self.sources],
            "cflags": list(s.cflags),
            "cuda_cflags": list(s.cuda_cflags),
            "extra_cuda_flags": list(self.extra_cuda_flags),
            "ldflags": list(s.ldflags),
            "targets": [str(a) for a in self.targets],
            "mode": self.mode.as_dict(),
            "ember": self.ember_version,
            "tvm_ffi": self.tvm_ffi_version,
        }

    @property
    def key(self) -> str:
        blob = json.dumps(self.payload(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()
