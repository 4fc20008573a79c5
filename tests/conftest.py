"""Shared fixtures: a clean knob state and an EMBER_CACHE_DIR of each test's own (the kernel
tests share one a session)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from ember.config import knobs
from ember.jit import clear_memory_cache

# The caller's EMBER_* variables that reach the kernel tests (tests/ops): EMBER_EXTRA_CUDA_FLAGS
# selects a kernel switch's alternative (``EMBER_EXTRA_CUDA_FLAGS=-DEMBER_X=1 pytest tests/ops``,
# R6.15), so the GPU tests run on the build being A/B'd. The JIT and unit tests check the
# machinery against a clean environment and see none. NOTE: until session 10 the flags were
# scrubbed for every test, and a GPU run "under a switch" tested the default kernels.
KEPT_VARIABLES = frozenset({"EMBER_EXTRA_CUDA_FLAGS"})
OPS_TESTS = Path(__file__).resolve().parent / "ops"


def scrubbed_variables(environ: Iterable[str], kernel_test: bool) -> list[str]:
    """The EMBER_* names of ``environ`` that a test must not see."""
    kept = KEPT_VARIABLES if kernel_test else frozenset()
    return [n for n in environ if n.startswith("EMBER_") and n not in kept]


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one JIT cache of every kernel test (tests/ops) in a session: they test what a module
    computes, not the cache (tests/jit does, each test in its own), so a module builds once a
    session and ``tests/ops/conftest.py`` can build a file's modules ahead, in parallel."""
    return tmp_path_factory.mktemp("kernel-cache")


def is_kernel_test(request: pytest.FixtureRequest) -> bool:
    return OPS_TESTS in Path(str(request.node.path)).resolve().parents


@pytest.fixture(autouse=True)
def isolated_ember(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """A private cache dir (the session's :func:`kernel_cache` for kernel tests); EMBER_*
    variables from the caller's shell do not leak in, but for the switch flags
    (:data:`KEPT_VARIABLES`) in the kernel tests."""
    import os

    kernel_test = is_kernel_test(request)
    for name in scrubbed_variables(list(os.environ), kernel_test):
        monkeypatch.delenv(name)
    cache = request.getfixturevalue("kernel_cache") if kernel_test else tmp_path / "ember-cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))
    knobs.reset()
    clear_memory_cache()
    yield cache
    knobs.reset()
    clear_memory_cache()
