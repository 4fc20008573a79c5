"""The NumPy model of the filters' radix select (tools/radix_emulate.py) agrees with the exact
kept-set reference, the retry past the first pass's cut included (R4.1; the CUDA kernel itself is
checked against the same reference on the GPU in tests/ops/test_sampling_filters.py)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
TOOL = Path(__file__).resolve().parents[2] / "tools" / "radix_emulate.py"


@pytest.mark.parametrize(
    "layout",
    [[], ["--relative"], ["--relative", "--stream"]],
    ids=["absolute", "relative", "stream"],
)
def test_model_matches_reference(monkeypatch, capsys, layout) -> None:
    # "relative": the digits of -DEMBER_FILTER_RELATIVE=1 (offsets from a bound at the cut)
    monkeypatch.setattr(sys, "argv", [str(TOOL), "--trials", "60", *layout])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(TOOL), run_name="__main__")
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    assert "60 rows: 0 mismatches" in out
    retries = int(out.split("mismatches, ")[1].split()[0])
    assert retries > 0, "the retry path was not exercised"
    if "--stream" in layout:  # both the candidates' answers and the fallback were exercised
        fallbacks = int(out.split("cut, ")[1].split()[0])
        assert 0 < fallbacks < 60, out
