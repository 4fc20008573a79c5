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


def test_sampling_matches_the_distribution_chi_square():
    # 8 tokens with distinct probabilities (two of them 0), 200 000 draws over 2 000 rows x 100
    # offsets: Pearson's chi-square with 5 degrees of freedom below its 0.999 quantile (20.5).
    p = torch.tensor([0.3, 0.0, 0.2, 0.15, 0.0, 0.1, 0.05, 0.2], device="cuda")
    probs = p.repeat(2000, 1)
    counts = torch.zeros(8, device="cuda")
    for off in range(100):
        s = ember.sampling_from_probs(probs, seed=123, offset=off)
        assert s.dtype == torch.int32 and bool(((s >= 0) & (s < 8)).all())
        counts += torch.bincount(s.long(), minlength=8).float()
    assert counts[1] == 0 and counts[4] == 0, "a token of probability 0 was drawn"
    expected = p * counts.sum()
    nz = expected > 0
    chi2 = (((counts - expected) ** 2)[nz] / expected[nz]).sum().item()
    assert chi2 < 20.5, chi2


def test_sampling_is_reproducible_and_spans_the_cluster():
    logits = 3 * torch.randn(64, 128256, device="cuda")
    logits[:, : 128256 // 2] = float("-inf")  # only the second half (CTAs 4-7) has mass
    probs = torch.softmax(logits, -1)
    a = ember.sampling_from_probs(probs, seed=5, offset=9)
    b = ember.sampling_from_probs(probs, seed=5, offset=9)
    c = ember.sampling_from_probs(probs, seed=5, offset=10)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert bool((a >= 128256 // 2).all()) and bool((a < 128256).all())
    assert bool((probs.gather(1, a.long()[:, None]) > 0).all())


def test_sampling_degenerate_rows():
    probs = torch.zeros(3, 5000, device="cuda")
    probs[0, 4999] = 1.0  # one token
    probs[2, 17] = float("nan")  # not finite: -1
    s = ember.sampling_from_probs(probs, seed=1)
    assert s.tolist() == [4999, -1, -1]
