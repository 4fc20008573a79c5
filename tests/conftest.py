"""Shared fixtures: every test gets its own EMBER_CACHE_DIR and a clean knob state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.config import knobs
from ember.jit import clear_memory_cache


@pytest.fixture(autouse=True)
def isolated_ember(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache dir; EMBER_* variables from the caller's shell do not leak in."""
    import os

    for name in list(os.environ):
        if name.startswith("EMBER_"):
            monkeypatch.delenv(name)
    cache = tmp_path / "ember-cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))
    knobs.reset()
    clear_memory_cache()
    yield cache
    knobs.reset()
    clear_memory_cache()
