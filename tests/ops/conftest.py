"""The kernel tests' modules, built ahead: each selected test file that defines ``PREBUILD`` (a
function returning the :class:`~ember.jit.KernelSpec` list its tests load) has them built into
the session's kernel cache, all files' at once (``build_many``, as ``ember precompile --jobs``
does), before the first kernel test, instead of one after another as each test first needs one.

Only on a machine with a GPU, and only a warm-up: a spec missing from the list builds when first
used, one listed but not used costs its compile, and a failed build is left for the test that
loads it to report. On the device machine (16 CPUs) this turns the decode file's ~25 serial
compiles into a few parallel rounds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ember.jit import KernelSpec, build_many
from ember.testing.capability import device_capability

from ..conftest import scrubbed_variables


def prebuild(specs: Sequence[KernelSpec], cache: Path) -> tuple[int, int, float]:
    """Build ``specs`` into ``cache`` in the environment a kernel test sees (they are resolved,
    so their flags read, inside it); returns (specs, not built, seconds)."""
    t0 = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        for name in scrubbed_variables(list(os.environ), True):
            mp.delenv(name)
        mp.setenv("EMBER_CACHE_DIR", str(cache))
        results = build_many(specs)
    failed = sum(not isinstance(r, Path) for r in results)
    return len(specs), failed, time.perf_counter() - t0


def collected_specs(items: Sequence[pytest.Item]) -> list[KernelSpec]:
    """The ``PREBUILD`` specs of the test files ``items`` come from, each uri once."""
    specs: dict[str, KernelSpec] = {}
    modules: list[object] = []
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module not in modules:
            modules.append(module)
            for spec in getattr(module, "PREBUILD", list)():
                specs.setdefault(spec.uri, spec)
    return list(specs.values())


@pytest.fixture(scope="session", autouse=True)
def prebuilt_modules(request: pytest.FixtureRequest, kernel_cache: Path) -> Iterator[None]:
    """Before the session's first kernel test: every selected kernel test file's ``PREBUILD``
    specs in one pool, so the files' builds overlap too."""
    if device_capability() is not None:
        specs = collected_specs(request.session.items)
        if specs:
            n, failed, seconds = prebuild(specs, kernel_cache)
            line = f"kernel tests: {n} modules built ahead in {seconds:.1f} s, {failed} not"
            print(f"\n{line}", file=sys.stderr)
    yield
