"""The switch flags reach the kernel tests; no other EMBER_* variable of the caller does (R6.15).

A GPU run ``EMBER_EXTRA_CUDA_FLAGS=-DEMBER_X=1 pytest tests/ops`` must build and test the
switch's alternative: until session 10 the shared fixture scrubbed the variable, and such runs
tested the default kernels.
"""

from __future__ import annotations

import os
import shlex

from ember.config import knobs

from ..conftest import KEPT_VARIABLES, scrubbed_variables


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
