"""The lane-level model of decode_tc_kernel's EMBER_DECODE_TMMA=1 layouts
(tools/decode_tmma_emulate.py: ldmatrix, mma.m16n8k16 and movmatrix by the PTX ISA's fragment
rules) computes S^T = K Q^T and O^T = V^T P^T exactly for fp8 and 16-bit K/V, and each of its
planted layout errors is caught (R4.1; the kernel itself is checked against the fp64 reference
on the GPU in tests/ops/test_decode.py)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
TOOL = Path(__file__).resolve().parents[2] / "tools" / "decode_tmma_emulate.py"


def test_tmma_layouts_match_reference(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", [str(TOOL)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(TOOL), run_name="__main__")
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    assert out.count("  PASS\n") == 12 and "OVERALL: PASS" in out, (
        out
    )  # 2 widths x 2 head_dims x 3 groups
    assert "MISSED" not in out and out.count("FAIL(caught)") == 9, out
