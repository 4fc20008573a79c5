"""Which GPU architectures to build for (R2.12-R2.15).

Targets come from ``EMBER_CUDA_ARCH_LIST`` when it is set (suffixes such as ``9.0a`` kept exactly)
or from the GPUs in the machine (9.x and newer get their ``a`` variant so architecture-specific
instructions such as wgmma are available). Each :class:`~ember.jit.spec.KernelSpec` names the
families it supports; :meth:`ArchContext.targets_for` filters the targets by them before anything
is compiled, and raises :class:`~ember.errors.UnsupportedError` when nothing is left. Nothing is
ever built for a family the user did not ask for or have.

GPU detection talks to the CUDA driver through ``ctypes`` (``cuInit`` + device attributes): no
torch, no subprocess, no context is created. It only runs when a CUDA module must be keyed and no
list is given.
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ember.config import knobs
from ember.errors import ConfigError, ToolchainError, UnsupportedError

__all__ = ["Arch", "ArchContext", "detect_gpu_archs", "family_matches", "parse_arch"]

_ARCH_RE = re.compile(r"(\d+)\.(\d+)([af]?)")
_FAMILY_RE = re.compile(r"sm(\d+)(\d)([af]?)(\+?)")


@dataclass(frozen=True, order=True)
class Arch:
    """One compile target, e.g. ``Arch(9, 0, "a")`` for ``9.0a`` / ``sm_90a``."""

    major: int
    minor: int
    suffix: str = ""

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        """``sm_90a`` form."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    def covers(self, device: Arch) -> bool:
        """Whether SASS built for this target runs on ``device`` (a target or a GPU).

        Plain ``8.0`` code runs on every 8.x device with minor >= 0, ``10.0f`` on its family
        likewise; arch-specific ``9.0a`` code runs on 9.0 only (CUDA binary compatibility).
        """
        if self.major != device.major:
            return False
        if self.suffix == "a":
            return self.minor == device.minor
        return self.minor <= device.minor

    @property
    def gencode(self) -> str:
        """The nvcc flag producing SASS for exactly this target."""
        cc = f"{self.major}{self.minor}{self.suffix}"
        return f"-gencode=arch=compute_{cc},code=sm_{cc}"


def parse_arch(text: str) -> Arch:
    """Parse ``"9.0a"`` into :class:`Arch`; raises :class:`ConfigError` otherwise."""
    m = _ARCH_RE.fullmatch(text.strip())
    if m is None:
        raise ConfigError(f"architecture {text!r} is malformed; expected e.g. '8.0' or '9.0a'")
    return Arch(int(m.group(1)), int(m.group(2)), m.group(3))


def family_matches(family: str, arch: Arch) -> bool:
    """Whether target ``arch`` belongs to a spec family.

    Families: ``sm80`` (exactly 8.0, no suffix needed), ``sm90a`` (exactly 9.0 built with the
    ``a`` suffix), ``sm80+`` (8.0 or newer, any suffix).
    """
    m = _FAMILY_RE.fullmatch(family)
    if m is None:
        raise ValueError(
            f"arch family {family!r} is malformed; expected e.g. 'sm80', 'sm90a', 'sm80+'"
        )
    major, minor, suffix, plus = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    if plus:
        return (arch.major, arch.minor) >= (major, minor)
    if (arch.major, arch.minor) != (major, minor):
        return False
    return not suffix or arch.suffix == suffix


_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@functools.cache
def detect_gpu_archs() -> tuple[Arch, ...]:
    """Compute capabilities of the GPUs visible to the CUDA driver; ``()`` when there are none."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ()
    if cuda.cuInit(0) != 0:
        return ()
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return ()
    found: set[Arch] = set()
    for ordinal in range(count.value):
        dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue
        cuda.cuDeviceGetAttribute(
            ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
        )
        cuda.cuDeviceGetAttribute(
            ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
        )
        # NOTE: 9.x and newer get the arch-specific variant (wgmma, setmaxnreg, TMA multicast).
        found.add(Arch(major.value, minor.value, "a" if major.value >= 9 else ""))
    return tuple(sorted(found))


@dataclass(frozen=True)
class ArchContext:
    """The requested targets: an explicit list, or the detected devices."""

    requested: tuple[Arch, ...]
    explicit: bool

    @classmethod
    def current(cls) -> ArchContext:
        """From ``EMBER_CUDA_ARCH_LIST`` if set, else from the GPUs in this machine."""
        listed = knobs.cuda_arch_list
        if listed:
            return cls(tuple(sorted({parse_arch(a) for a in listed})), explicit=True)
        return cls(detect_gpu_archs(), explicit=False)

    def targets_for(self, uri: str, families: Sequence[str]) -> tuple[Arch, ...]:
        """The requested targets a module supporting ``families`` is built for.

        Raises
        ------
        ToolchainError
            No GPU was detected and no list was given.
        UnsupportedError
            None of the requested targets is in a supported family.
        """
        if not self.requested:
            raise ToolchainError(
                f"cannot choose CUDA targets for module {uri!r}: no GPU was detected and "
                "EMBER_CUDA_ARCH_LIST is not set; set e.g. EMBER_CUDA_ARCH_LIST=9.0a to build "
                "for a GPU that is not present"
            )
        chosen = tuple(a for a in self.requested if any(family_matches(f, a) for f in families))
        if not chosen:
            source = "EMBER_CUDA_ARCH_LIST" if self.explicit else "detected GPUs"
            raise UnsupportedError(
                f"module {uri!r} supports {_fmt(families)} but the requested targets are "
                f"{_fmt(str(a) for a in self.requested)} ({source}); nothing would be built. "
                "Run on a supported GPU or set EMBER_CUDA_ARCH_LIST to a supported target."
            )
        return chosen


def _fmt(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"
