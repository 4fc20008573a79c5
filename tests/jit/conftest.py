"""Shared fixtures: a prebuilt tree for the AOT and artifact tests, built once per session (R7.14),
and sm_90a builds into a per-module cache for the kernel families' compile tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ember.config import knobs


@dataclass(frozen=True)
class Tree:
    """A tree from ``ember aot build --arch 9.0a --ops 'toy*'`` and its manifest."""

    path: Path
    manifest: dict[str, Any]

    def record(self, uri: str) -> dict[str, Any]:
        return next(m for m in self.manifest["modules"] if m["uri"] == uri)

    def entry(self, uri: str, root: Path | None = None) -> Path:
        return (root or self.path) / self.record(uri)["path"]


@pytest.fixture(scope="session")
def toy_tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """The toy family (one host module, one CUDA module) built for 9.0a on this machine."""
    from ember.jit.aot import aot_build

    base = tmp_path_factory.mktemp("aot")
    with knobs.scope(cache_dir=base / "cache", prebuilt_path=(), disable_jit=False):
        manifest = aot_build(base / "tree", ["9.0a"], "toy*")
    assert json.loads((base / "tree" / "manifest.json").read_text()) == manifest
    return Tree(base / "tree", manifest)


@pytest.fixture(scope="module")
def family_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One JIT cache per test module: a family's modules build once per file."""
    return str(tmp_path_factory.mktemp("family-cache"))


@pytest.fixture
def sm90a_builds(family_cache: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Build for exactly sm_90a (no GPU needed) into the module's shared cache. A kernel family's
    compile-and-validate tests use it: ``pytestmark = pytest.mark.usefixtures("sm90a_builds")``."""
    monkeypatch.setenv("EMBER_CACHE_DIR", family_cache)
    with knobs.scope(cuda_arch_list=("9.0a",)):
        yield
