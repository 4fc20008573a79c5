"""Errors raised by the bench harness."""

from __future__ import annotations

from ember.errors import EmberError

__all__ = ["BenchError", "TimingError"]


class BenchError(EmberError, RuntimeError):
    """The bench cannot run as asked: no GPU, an unusable option, a missing timing mechanism."""


class TimingError(BenchError):
    """A timing mechanism produced no measurement (CUPTI recorded nothing, capture failed)."""
