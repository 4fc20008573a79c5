"""ember: JIT-compiled GPU kernels for LLM serving.

Importing ember is cheap: no subprocess, no CUDA context, no directory is created. Kernels are
compiled on first use and cached under ``EMBER_CACHE_DIR`` (see ``docs/config.md``).
"""

from __future__ import annotations

from ember._version import __version__
from ember.errors import (
    ArtifactError,
    CompileError,
    ConfigError,
    EmberError,
    JitDisabledError,
    ToolchainError,
    UnsupportedError,
)
from ember.ops.norm import fused_add_rmsnorm_, rmsnorm

__all__ = [
    "ArtifactError",
    "CompileError",
    "ConfigError",
    "EmberError",
    "JitDisabledError",
    "ToolchainError",
    "UnsupportedError",
    "__version__",
    "fused_add_rmsnorm_",
    "rmsnorm",
]
