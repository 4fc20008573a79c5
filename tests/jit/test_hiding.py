"""A declaration that hides another is a compile error in ember's device headers.

Session 8 found, on the H200, that a warp-local ``int base`` (the warp's first survivor slot)
hid the radix digits' ``base`` (the key origin) inside ``radix_select``: level 1 binned values by
``key - slot``, and 22 filter tests failed. The compiler saw it (EDG remark 1348, "declaration
hides variable"); every device header now makes that remark an error between
``#pragma nv_diagnostic push`` and ``pop``, so the next one fails in CI, which has no GPU, rather
than on the device.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ember.errors import CompileError
from ember.jit import KernelSpec, resolve
from ember.jit.build import build

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]

HEADERS = Path(__file__).resolve().parents[2] / "ember" / "csrc" / "include" / "ember"
# The tutorial's kernel stays free of house pragmas: it is the first file a newcomer reads.
EXEMPT = {"toy.cuh"}
GUARD = "#pragma nv_diagnostic push\n#pragma nv_diag_error 1348\n"


def test_every_device_header_makes_hiding_an_error() -> None:
    headers = sorted(p for p in HEADERS.glob("*.cuh") if p.name not in EXEMPT)
    assert len(headers) >= 9, headers
    for p in headers:
        text = p.read_text()
        assert GUARD in text, f"{p.name}: lacks the push + nv_diag_error 1348 guard"
        assert text.index(GUARD) < text.index("namespace ember {"), (
            f"{p.name}: the guard must come before the header's code"
        )
        assert text.rstrip().endswith("#pragma nv_diagnostic pop"), (
            f"{p.name}: must end with '#pragma nv_diagnostic pop' (the guard is scoped to it)"
        )


def _probe(tmp: Path, header: str) -> KernelSpec:
    """A module whose one source includes `header` (a copy of sampling_filter.cuh) from `tmp`."""
    tmp.mkdir()
    (tmp / "sampling_copy.cuh").write_text(header)
    src = tmp / "probe.cu"
    src.write_text('#include "sampling_copy.cuh"\n')
    return KernelSpec(
        uri="hiding_probe",
        sources=(src,),
        archs=("sm90+",),
        cuda_cflags=("-DEMBER_SAMPLING_DTYPE=float",),
        include_dirs=(tmp,),
    )


def test_the_hidden_key_origin_no_longer_compiles(tmp_path: Path) -> None:
    original = (HEADERS / "sampling_filter.cuh").read_text()
    # the control: the header as it is compiles on its own
    assert build(resolve(_probe(tmp_path / "ok", original)), prebuilt=False).is_file()
    # the session-8 bug: the warp's survivor slot named like the radix digits' origin again
    slot = re.compile(r"\bfirst\b")
    lines = original.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "int first = 0;" in line)
    for i in range(at, at + 4):
        lines[i] = slot.sub("origin", lines[i])
    mutant = "".join(lines)
    assert mutant != original and "int origin = 0;" in mutant
    with pytest.raises(CompileError) as info:
        build(resolve(_probe(tmp_path / "bad", mutant)), prebuilt=False)
    assert 'declaration hides variable "origin"' in str(info.value)
