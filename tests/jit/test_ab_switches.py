"""Every kernel A/B switch (``#ifndef EMBER_X`` / ``#define EMBER_X <default>`` in the CUDA
sources) still compiles the other way, for sm_90a, on a machine with no GPU.

The switches are how a kernel's measured alternatives stay one flag away for the next A/B on the
H200 (``EMBER_EXTRA_CUDA_FLAGS=-DEMBER_X=...``, diagnostic, R6.15; bench rows record them,
R4.16); a switch nobody builds rots. A new switch must be added to ``BUILDS`` (or to
``NOT_BUILT`` with the reason) or the registry test fails.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ember.config import knobs
from ember.jit import KernelSpec, resolve
from ember.jit.build import build
from ember.ops.act import act_spec
from ember.ops.decode import decode_spec
from ember.ops.norm import norm_spec
from ember.ops.paged import paged_spec
from ember.ops.rope import rope_spec
from ember.ops.sampling import sampling_spec

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]

CSRC = Path(__file__).resolve().parents[2] / "ember" / "csrc"

# (spec, the non-default switch values built together): one build per row
BUILDS: list[tuple[Callable[[], KernelSpec], tuple[str, ...]]] = [
    (lambda: act_spec("bf16"), ("EMBER_ACT_MUFU=0", "EMBER_ACT_FLAT=0")),
    (lambda: rope_spec("bf16"), ("EMBER_ROPE_GROUPED=0",)),
    (lambda: rope_spec("bf16"), ("EMBER_ROPE_STATIC=0",)),
    (paged_spec, ("EMBER_MERGE_VEC=0",)),
    (lambda: sampling_spec("fp32"), ("EMBER_FILTER_STREAM=0",)),
    (lambda: sampling_spec("bf16"), ("EMBER_SOFTMAX_REG=0",)),
    (lambda: sampling_spec("fp32"), ("EMBER_SOFTMAX_REG=1",)),
    (
        lambda: sampling_spec("fp32"),
        (
            "EMBER_FILTER_MARKED=0",
            "EMBER_STREAM_KEPT=0",
            "EMBER_STREAM_LEAN=0",
            "EMBER_STREAM_CHAINS=2",
        ),
    ),
    (
        lambda: sampling_spec("fp32"),
        (
            "EMBER_SOFTMAX_PERSISTENT=0",
            "EMBER_SOFTMAX_ONLINE=0",
            "EMBER_FILTER_COMPACT=0",
            "EMBER_FILTER_RELATIVE=0",
            "EMBER_FILTER_LEAN=0",
            "EMBER_FILTER_SPLIT0=2",
        ),
    ),
    (
        lambda: sampling_spec("bf16"),
        (
            "EMBER_FILTER_RELATIVE=0",
            "EMBER_FILTER_LEAN0=0",
            "EMBER_FILTER_SPLIT0=1",
            "EMBER_SOFTMAX_NARROW=0",
            "EMBER_SOFTMAX_GRID=0",
        ),
    ),
    (
        lambda: norm_spec("bf16"),
        (
            "EMBER_NORM_STREAMING=0",
            "EMBER_NORM_LONG_ROW_NV=4",
            "EMBER_NORM_EARLY_WEIGHT=0",
            "EMBER_NORM_PDL=0",
            "EMBER_DRIVER_LAUNCH=0",
            "EMBER_NORM_PROBE=2",
        ),
    ),
    (
        lambda: decode_spec("bf16", "e4m3", 128, 4),
        ("EMBER_DECODE_FP8_REGS=0", "EMBER_DECODE_STAGES8=3", "EMBER_DECODE_TC=0"),
    ),
    (lambda: decode_spec("bf16", "e4m3", 128, 8), ("EMBER_DECODE_FP8_CONV=0",)),
    (lambda: decode_spec("bf16", "bf16", 128, 4), ("EMBER_DECODE_STAGES16=2",)),
    (
        lambda: decode_spec("fp16", "e4m3", 64, 8),
        (
            "EMBER_DECODE_FP8_WT=32",
            "EMBER_DECODE_STAGES8=2",
            "EMBER_DECODE_FP8_CONV=1",
        ),
    ),
    (lambda: decode_spec("fp16", "fp16", 64, 8), ("EMBER_DECODE_KV2=1",)),
    (lambda: decode_spec("bf16", "e4m3", 128, 8), ("EMBER_DECODE_TMMA=0",)),
    (lambda: decode_spec("bf16", "bf16", 128, 4), ("EMBER_DECODE_TMMA=1", "EMBER_DECODE_ADDR=0")),
    (lambda: decode_spec("fp16", "e4m3", 64, 8), ("EMBER_DECODE_ADDR=0",)),
]

# switches that are not A/B alternatives (none today)
NOT_BUILT: dict[str, str] = {}


def switches_in_sources() -> set[str]:
    found = set()
    for path in CSRC.rglob("*"):
        if path.suffix in {".cu", ".cuh", ".h", ".cc"}:
            text = path.read_text()
            found |= set(re.findall(r"#ifndef (EMBER_\w+)\n#define \1 ", text))
    return found


def test_every_switch_is_built_the_other_way() -> None:
    built = {flag.split("=")[0] for _, flags in BUILDS for flag in flags}
    found = switches_in_sources()
    assert found >= {"EMBER_ACT_FLAT", "EMBER_SOFTMAX_PERSISTENT", "EMBER_DECODE_TC"}, found
    missing = sorted(found - built - set(NOT_BUILT))
    assert not missing, f"A/B switches no test builds: {missing}; add them to BUILDS"
    stale = sorted((built | set(NOT_BUILT)) - found)
    assert not stale, f"BUILDS / NOT_BUILT name switches the sources no longer have: {stale}"


@pytest.mark.parametrize(("spec", "flags"), BUILDS, ids=[" ".join(f) for _, f in BUILDS])
def test_switch_builds(spec: Callable[[], KernelSpec], flags: tuple[str, ...]) -> None:
    with knobs.scope(extra_cuda_flags=tuple(f"-D{f}" for f in flags)):
        so = build(resolve(spec()), prebuilt=False)
    assert so.is_file() and so.stat().st_size > 0
