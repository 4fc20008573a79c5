"""What the harness runs: a workload (:class:`Case`) and a backend's way to run it (:class:`Impl`).

A routine builds one :class:`Case` per shape x dtype and, for each requested backend variant,
either an :class:`Impl` or a :class:`Skip` saying why that backend cannot run here. The harness
does the rest the same way for every routine: reference check, input rotation, timing, the row.

Nothing here imports torch at module import; tensors only appear inside the closures a routine
supplies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DTYPES",
    "Case",
    "Check",
    "Impl",
    "Inputs",
    "Skip",
    "check_outputs",
    "format_shape",
    "itemsize",
    "parse_dtype",
    "parse_shape",
    "tolerances_for",
    "torch_dtype",
]

#: One input set: tensors (and anything else a call needs) by name.
Inputs = dict[str, Any]

#: Short dtype names used on the command line and in rows -> (torch attribute, bytes per element).
DTYPES: dict[str, tuple[str, int]] = {
    "bf16": ("bfloat16", 2),
    "fp16": ("float16", 2),
    "fp32": ("float32", 4),
}
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}

# NOTE: used only when ember.testing.tolerances cannot be imported. The output is rounded to the
# dtype on both sides, so one unit in the last place at |x| ~ 2 must pass: bf16 has 8 bits of
# mantissa (2^-7 relative), fp16 11 bits; fp32 leaves room for reordered reductions.
_LOCAL_TOLERANCES: dict[str, tuple[float, float]] = {
    "bf16": (2e-2, 2e-2),
    "fp16": (5e-3, 5e-3),
    "fp32": (1e-4, 1e-4),
}


def parse_dtype(text: str) -> str:
    """Canonical short name (``bf16``/``fp16``/``fp32``) of a dtype given on the command line."""
    name = text.strip().lower()
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"dtype {text!r} is not supported; expected one of {', '.join(DTYPES)}")
    return name


def itemsize(dtype: str) -> int:
    """Bytes per element of a short dtype name."""
    return DTYPES[dtype][1]


def torch_dtype(dtype: str) -> Any:
    """The ``torch.dtype`` of a short dtype name (imports torch)."""
    import torch

    return getattr(torch, DTYPES[dtype][0])


def parse_shape(text: str) -> tuple[int, ...]:
    """``"8192x4096"`` -> ``(8192, 4096)``; 1 to 4 positive dimensions."""
    parts = text.strip().lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"shape {text!r} is malformed; expected e.g. 8192x4096") from None
    if not 1 <= len(dims) <= 4 or any(d < 1 for d in dims):
        raise ValueError(f"shape {text!r} must have 1 to 4 positive dimensions, e.g. 128x4096")
    return dims


def format_shape(shape: Sequence[int]) -> str:
    """``(8192, 4096)`` -> ``"8192x4096"`` (inverse of :func:`parse_shape`)."""
    return "x".join(str(d) for d in shape)


def tolerances_for(dtype: str) -> tuple[float, float, str]:
    """``(rtol, atol, source)`` for comparing outputs of ``dtype`` with the fp32 reference.

    Uses ``ember.testing.tolerances`` (the tolerances the tests use) when it can be imported,
    else a local table; ``source`` names which one.
    """
    try:
        from ember.testing import tolerances

        rtol, atol = tolerances(torch_dtype(dtype))
        return float(rtol), float(atol), "ember.testing.tolerances"
    except Exception:
        rtol, atol = _LOCAL_TOLERANCES[dtype]
        return rtol, atol, "local"


@dataclass(frozen=True)
class Case:
    """One workload: a routine at one shape and dtype.

    Attributes
    ----------
    routine:
        Routine name, as on the command line.
    shape, dtype:
        The workload; ``dtype`` is a short name (``bf16``).
    make_inputs:
        Builds one fresh random input set on the device. Called once for the reference check and
        once per rotated copy, so every set holds different values.
    reference:
        Expected outputs for an input set (computed in fp32 or better).
    outputs:
        ``outputs(inputs, result)``: the tensors to compare after a call returned ``result``
        (the result itself, or the inputs an in-place op wrote).
    nbytes:
        Fewest bytes one call must move through device memory; GB/s and L2 rotation use it.
    flops:
        Floating-point operations of one call, where meaningful.
    params:
        Routine-specific parameters recorded in the row (``eps``).
    cli:
        Routine options that select exactly this case, for the row's reproduce command.
    reference_source:
        Which reference implementation ``reference`` is.
    tolerance:
        ``(rtol, atol)`` overriding the per-dtype tolerances.
    """

    routine: str
    shape: tuple[int, ...]
    dtype: str
    make_inputs: Callable[[], Inputs]
    reference: Callable[[Inputs], tuple[Any, ...]]
    outputs: Callable[[Inputs, Any], tuple[Any, ...]]
    nbytes: int | None = None
    flops: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    cli: tuple[str, ...] = ()
    reference_source: str = ""
    tolerance: tuple[float, float] | None = None


@dataclass(frozen=True)
class Impl:
    """One backend variant of a case.

    Attributes
    ----------
    backend, variant:
        ``flashinfer`` / ``pdl``; the variant ``default`` is the backend's plain call.
    prepare:
        ``prepare(inputs)`` returns the zero-argument call that is checked and timed. Anything
        the call needs besides the inputs (an ``out=`` buffer, a compiled function) is made here,
        outside the timed region.
    version:
        The backend's version, for the row.
    reference:
        Overrides the case's reference (a backend that computes something else, e.g. ``x + x``
        in the host-time comparison).
    """

    backend: str
    variant: str
    prepare: Callable[[Inputs], Callable[[], Any]]
    version: str = ""
    reference: Callable[[Inputs], tuple[Any, ...]] | None = None


@dataclass(frozen=True)
class Skip:
    """A backend variant that does not run here, and why.

    ``error`` is false for an expected absence (not installed, no such path in this version) and
    true when the backend is present but could not be set up; the row says ``skipped`` or
    ``error`` accordingly.
    """

    backend: str
    variant: str
    reason: str
    error: bool = False


@dataclass(frozen=True)
class Check:
    """Outcome of comparing a backend's outputs with the reference."""

    passed: bool
    max_abs_err: float
    rel_l2_err: float
    detail: str = ""


def check_outputs(
    got: Sequence[Any], expected: Sequence[Any], *, rtol: float, atol: float
) -> Check:
    """Compare outputs elementwise: ``|got - expected| <= atol + rtol * |expected|``, no NaN/Inf.

    Also reports the largest absolute error and ``||got - expected|| / ||expected||``.
    """
    if len(got) != len(expected):
        return Check(False, math.inf, math.inf, f"{len(got)} outputs, expected {len(expected)}")
    max_abs, num, den = 0.0, 0.0, 0.0
    problems: list[str] = []
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if g is None or not hasattr(g, "shape"):
            return Check(
                False, math.inf, math.inf, f"output {i} is {type(g).__name__}, not a tensor"
            )
        if tuple(g.shape) != tuple(e.shape):
            return Check(
                False, math.inf, math.inf, f"output {i} has shape {tuple(g.shape)}, "
                f"expected {tuple(e.shape)}"
            )  # fmt: skip
        gf, ef = g.detach().double(), e.detach().double().to(g.device)
        diff = (gf - ef).abs()
        finite = bool(gf.isfinite().all())
        max_abs = max(max_abs, float(diff.max()) if diff.numel() else 0.0)
        num += float((diff * diff).sum())
        den += float((ef * ef).sum())
        bad = int((~(diff <= atol + rtol * ef.abs())).sum())
        if not finite:
            problems.append(f"output {i} holds NaN/Inf")
        elif bad:
            problems.append(f"output {i}: {bad}/{diff.numel()} elements outside tolerance")
    rel = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    if problems:
        max_abs = math.inf if any("NaN" in p for p in problems) else max_abs
        detail = "; ".join(problems) + f" (rtol={rtol:g}, atol={atol:g}, max abs err {max_abs:.3g})"
        return Check(False, max_abs, rel, detail)
    return Check(True, max_abs, rel)
