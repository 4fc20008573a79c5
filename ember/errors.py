"""Exceptions raised by ember.

Every message names the thing at fault, what was expected, what was found, and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ArtifactError",
    "CompileError",
    "ConfigError",
    "EmberError",
    "JitDisabledError",
    "ToolchainError",
    "UnsupportedError",
]


class EmberError(Exception):
    """Base class of every error ember raises on purpose."""


class ConfigError(EmberError, ValueError):
    """An ``EMBER_*`` setting holds a value that cannot be parsed."""


class UnsupportedError(EmberError, ValueError):
    """The request is valid in general but not on these architectures or with these options."""


class ToolchainError(EmberError, RuntimeError):
    """A compiler or build tool is missing or unusable."""


class JitDisabledError(EmberError, RuntimeError):
    """A module had to be compiled but ``EMBER_DISABLE_JIT`` forbids it."""


class ArtifactError(EmberError, RuntimeError):
    """A prebuilt artifact is missing, unreachable, or fails its checksum."""


class CompileError(EmberError, RuntimeError):
    """A compile or link step failed.

    Attributes
    ----------
    command:
        The failing command line, as the build ran it.
    returncode:
        Exit status of the build.
    errors:
        The first compiler diagnostics that are real errors.
    build_dir:
        The directory left behind for inspection (build.ninja, build.log, objects).
    """

    def __init__(
        self,
        uri: str,
        *,
        command: str,
        returncode: int,
        errors: Sequence[str],
        build_dir: Path,
    ) -> None:
        self.uri = uri
        self.command = command
        self.returncode = returncode
        self.errors = tuple(errors)
        self.build_dir = build_dir
        shown = "\n".join(f"    {line}" for line in self.errors) or "    (no error lines found)"
        super().__init__(
            f"compiling module {uri!r} failed with exit code {returncode}\n"
            f"  command: {command}\n"
            f"  first errors:\n{shown}\n"
            f"  build dir (build.ninja, build.log): {build_dir}\n"
            "  rerun with EMBER_JIT_VERBOSE=1 to stream the full compiler output"
        )
