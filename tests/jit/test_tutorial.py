"""docs/adding-a-kernel.md cannot drift (R8.12): its code blocks are excerpts of the real files,
and its kernel builds and runs here (host module) and compiles for sm_90a (CUDA module)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from ember.jit import build_and_load
from ember.ops import toy

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "adding-a-kernel.md"
_BLOCK = re.compile(r"<!-- from: (\S+) -->\n```\w*\n(.*?)```", re.S)


def test_every_code_block_is_an_excerpt_of_its_file() -> None:
    blocks = _BLOCK.findall(GUIDE.read_text())
    assert len(blocks) >= 8
    for path, code in blocks:
        assert code in (REPO / path).read_text(), f"docs/adding-a-kernel.md drifted from {path}"


def test_the_tutorial_kernel_builds_and_runs_on_the_host() -> None:
    a, b = torch.randn(1000), torch.randn(1000)
    out = torch.full_like(a, float("nan"))  # poisoned: an unwritten element fails
    assert toy.axpy(a, b, alpha=0.5, out=out) is out
    torch.testing.assert_close(out, a + 0.5 * b)
    with pytest.raises(TypeError):
        toy.axpy(a.double(), b.double())


@pytest.mark.cuda_compile
@pytest.mark.usefixtures("sm90a_builds")
def test_the_tutorial_kernel_compiles_for_sm90a() -> None:
    module = build_and_load(toy.cuda_spec())
    assert callable(module.axpy)
