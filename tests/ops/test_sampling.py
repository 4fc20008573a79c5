"""Softmax with temperature on the GPU against an fp64 reference (R4.1-R4.7; sm_90+)."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.testing import requires

pytestmark = requires(feature="sampling")

DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def reference(logits: torch.Tensor, temperature) -> torch.Tensor:
    t = temperature if temperature is not None else 1.0
    if isinstance(t, torch.Tensor):
        t = t.double()[:, None]
    return torch.softmax(logits.double() / t, dim=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("rows", "vocab"),
    [(1, 1), (3, 7), (5, 1000), (128, 32000), (128, 128256), (2, 152064), (4, 260000)],
)
@pytest.mark.parametrize("temp", ["none", "scalar", "tensor"])
def test_matches_reference(dtype, rows, vocab, temp):
    logits = (4 * torch.randn(rows, vocab, device="cuda")).to(dtype)
    t = {"none": None, "scalar": 0.7, "tensor": torch.rand(rows, device="cuda") + 0.3}[temp]
    out = torch.full((rows, vocab), float("nan"), device="cuda")
    got = ember.softmax(logits, t, out=out)
    assert got is out
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(got.double(), reference(logits, t), rtol=1e-4, atol=1e-12)
    torch.testing.assert_close(
        got.sum(-1).double(),
        torch.ones(rows, dtype=torch.float64, device="cuda"),
        rtol=1e-4,
        atol=1e-4,
    )


def test_minus_inf_logits_get_zero_and_strided_unaligned_rows():
    base = torch.randn(6, 50010, device="cuda").to(torch.bfloat16)
    logits = base[:, 3:50003]  # rows start 6 bytes past alignment: the element path
    logits[:, :100] = float("-inf")
    got = ember.softmax(logits, 1.3)
    assert bool((got[:, :100] == 0).all())
    torch.testing.assert_close(got.double(), reference(logits, 1.3), rtol=1e-4, atol=1e-12)


def test_a_large_row_after_a_small_one_and_the_largest_vocabulary():
    # the shared memory opt-in must follow the largest launch, not the first
    for vocab in (1000, 464384, 2048):
        logits = torch.randn(2, vocab, device="cuda")
        got = ember.softmax(logits, 0.9)
        torch.testing.assert_close(got.double(), reference(logits, 0.9), rtol=1e-4, atol=1e-12)
