"""ember's JIT core: specs, architectures, content keys, and the one build-and-load template.

Torch-free: nothing here imports torch or ``ember.ops`` (tvm-ffi is imported only to load).
"""

from __future__ import annotations

from ember.jit.arch import Arch, ArchContext
from ember.jit.build import (
    Resolved,
    build,
    build_and_load,
    build_many,
    clear_memory_cache,
    resolve,
)
from ember.jit.registry import all_specs, register
from ember.jit.spec import BuildMode, KernelSpec, Toolchain
from ember.jit.workspace import Workspace, write_if_changed

__all__ = [
    "Arch",
    "ArchContext",
    "BuildMode",
    "KernelSpec",
    "Resolved",
    "Toolchain",
    "Workspace",
    "all_specs",
    "build",
    "build_and_load",
    "build_many",
    "clear_memory_cache",
    "register",
    "resolve",
    "write_if_changed",
]
