"""The switch flags reach the kernel tests; no other EMBER_* variable of the caller does (R6.15);
the kernel tests share the session's JIT cache, which ``PREBUILD`` warms.

A GPU run ``EMBER_EXTRA_CUDA_FLAGS=-DEMBER_X=1 pytest tests/ops`` must build and test the
switch's alternative: until session 10 the shared fixture scrubbed the variable, and such runs
tested the default kernels.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ember.config import knobs
from ember.jit import build_and_load

from ..conftest import KEPT_VARIABLES, scrubbed_variables
from ..jit.helpers import make_value_module, make_wrapper
from .conftest import collected_specs, prebuild


def test_only_the_switch_flags_survive_the_scrub_and_only_in_kernel_tests() -> None:
    names = ["EMBER_EXTRA_CUDA_FLAGS", "EMBER_CACHE_DIR", "EMBER_DISABLE_JIT", "PATH", "XEMBER_A"]
    assert scrubbed_variables(names, True) == ["EMBER_CACHE_DIR", "EMBER_DISABLE_JIT"]
    assert scrubbed_variables(names, False) == names[:3]
    assert {"EMBER_EXTRA_CUDA_FLAGS"} == KEPT_VARIABLES


def test_the_callers_switch_flags_are_the_knob_inside_a_test() -> None:
    """Under the caller's flags the knob holds them here (tests/ops); with none, it is empty."""
    outer = os.environ.get("EMBER_EXTRA_CUDA_FLAGS")
    expected = tuple(shlex.split(outer)) if outer else ()
    assert knobs.extra_cuda_flags == expected


def test_kernel_tests_share_the_sessions_cache(kernel_cache: Path, isolated_ember: Path) -> None:
    assert os.environ["EMBER_CACHE_DIR"] == str(kernel_cache) == str(isolated_ember)


def test_prebuild_lands_in_the_cache_a_kernel_test_loads_from(
    kernel_cache: Path, tmp_path: Path
) -> None:
    """``PREBUILD``'s warm-up (tests/ops/conftest.py) builds where the tests look: loading the
    module afterwards starts no compiler. (The GPU gate aside, this is the fixture's work.)"""
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 6, uri="value_prebuild")
    with knobs.scope(cxx=str(wrapper.path)):
        assert prebuild([spec], kernel_cache)[:2] == (1, 0)
        assert len(wrapper.compiles()) == 1
        assert build_and_load(spec).value() == 6
    assert len(wrapper.compiles()) == 1


def test_the_warm_up_takes_each_selected_files_prebuild_once() -> None:
    """``collected_specs``: every selected file's ``PREBUILD``, each uri once, files without one
    skipped (the session fixture builds this list; the decode file's derives from its cases)."""
    from types import SimpleNamespace

    from . import test_act, test_decode

    plain = SimpleNamespace()  # a test file with no PREBUILD
    items = [SimpleNamespace(module=m) for m in (test_decode, test_act, test_decode, plain)]
    uris = [s.uri for s in collected_specs(items)]  # type: ignore[arg-type]
    assert len(uris) == len(set(uris))
    assert {"decode_plan_host", "decode_bf16_bf16_d256_g3", "decode_fp16_e4m3_d128_g1"} <= set(uris)
    assert {"act_bf16", "act_fp16", "act_fp32"} <= set(uris)
    assert len(uris) == len(test_decode.PREBUILD()) + len(test_act.PREBUILD())
