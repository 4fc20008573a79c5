"""The capability helper: each feature's architecture need, in one table (R4.2-R4.5)."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["FEATURES", "device_capability", "requires"]

# feature -> minimum compute capability (major, minor). Keep in step with each spec's `archs`.
FEATURES: dict[str, tuple[int, int]] = {
    "toy": (7, 5),
    "norm": (8, 0),
    "act": (8, 0),
    "rope": (8, 0),
    "sampling": (9, 0),
    "decode": (8, 0),
    "decode_fp8": (8, 9),
}


@functools.cache
def device_capability() -> tuple[int, int] | None:
    """(major, minor) of CUDA device 0, or ``None`` without a usable GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return int(major), int(minor)


def _reason(sm: int | None, feature: str | None) -> str | None:
    """Why the test cannot run here, or ``None`` when it can."""
    need: tuple[int, int] | None = None
    if feature is not None:
        if feature not in FEATURES:
            raise KeyError(f"unknown feature {feature!r}; known: {sorted(FEATURES)}")
        need = FEATURES[feature]
    if sm is not None:
        need = max(need or (0, 0), divmod(sm, 10))
    cap = device_capability()
    if cap is None:
        return "no CUDA GPU available"
    if need is not None and cap < need:
        what = f"feature {feature!r}" if feature else "this test"
        return f"{what} needs sm_{need[0]}{need[1]}+, the GPU is sm_{cap[0]}{cap[1]}"
    return None


def requires(*, sm: int | None = None, feature: str | None = None) -> Any:
    """A pytest mark that skips unless a GPU with at least ``sm`` (e.g. 90) / ``feature`` exists.

    Examples
    --------
    >>> @requires(feature="norm")           # doctest: +SKIP
    ... def test_rmsnorm(): ...
    """
    import pytest

    reason = _reason(sm, feature)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
