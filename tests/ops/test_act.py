"""Gated activations on the GPU against an fp32 reference (R4.1-R4.7).

Skipped, never failed, without a suitable GPU (`ember.testing.requires`). Fresh random inputs;
outputs poisoned with NaN before every launch so an unwritten element fails.
"""

from __future__ import annotations

import math

import pytest
import torch

import ember
from ember.jit import KernelSpec, all_specs
from ember.testing import requires, tolerances

pytestmark = requires(feature="act")


def PREBUILD() -> list[KernelSpec]:  # noqa: N802 (tests/ops/conftest.py builds these ahead)
    return all_specs("act")


DTYPES = [torch.bfloat16, torch.float16, torch.float32]
OPS = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]
# (tokens, d): decode and prefill sizes, model widths (Llama-3 14336, Qwen 18944), odd widths
# that take the one-element path, a width of one.
# (2053, 4096) and (1024, 14336): at least 2^20 16-byte accesses, the large-problem kernels
SHAPES = [
    (1, 14336),
    (7, 11008),
    (64, 14336),
    (300, 4096),
    (3, 1),
    (5, 7),
    (33, 1000),
    (2, 18944),
    (2053, 4096),
    (1024, 14336),
]


def reference(op: str, x: torch.Tensor) -> torch.Tensor:
    g, u = x.float().chunk(2, dim=-1)
    if op == "silu_and_mul":
        a = g * torch.sigmoid(g)
    elif op == "gelu_and_mul":
        a = 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))
    else:
        a = 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
    return (a * u).to(x.dtype)


def check(op: str, x: torch.Tensor, out: torch.Tensor | None = None) -> None:
    want = reference(op, x)
    got = getattr(ember, op)(x, out=out)
    if out is not None:
        assert got is out
    rtol, atol = tolerances(x.dtype)
    assert not torch.isnan(got).any(), "unwritten (poisoned) or NaN elements"
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("tokens", "d"), SHAPES)
def test_matches_reference(op: str, tokens: int, d: int, dtype: torch.dtype) -> None:
    x = (3 * torch.randn(tokens, 2 * d, device="cuda")).to(dtype)
    check(op, x, torch.full((tokens, d), float("nan"), device="cuda", dtype=dtype))


@pytest.mark.parametrize("op", OPS)
def test_allocating_call_and_leading_dimensions(op: str) -> None:
    check(op, torch.randn(2, 3, 2 * 4096, device="cuda").to(torch.bfloat16))


@pytest.mark.parametrize("op", OPS)
def test_strided_rows_and_unaligned_views(op: str) -> None:
    base = torch.randn(40, 2 * 1024 + 16, device="cuda").to(torch.bfloat16)
    check(op, base[:, : 2 * 1024])  # rows strided by 2064 elements, still 16-byte aligned
    check(op, base[:, 1 : 2 * 1000 + 1])  # starts 2 bytes in: the one-element path
    out = torch.full((40, 2 * 1024), float("nan"), device="cuda").to(torch.bfloat16)
    check(op, base[:, : 2 * 1000], out=out[:, 3:1003])  # an unaligned, strided output


@pytest.mark.parametrize("op", OPS)
def test_large_strided_rows(op: str) -> None:
    # the large-problem kernels with row strides on both sides (a column slice of a wider x, an
    # output with padded rows): the padding must stay untouched
    base = torch.randn(1100, 2 * 4096 + 64, device="cuda").to(torch.bfloat16)
    out = torch.full((1100, 4096 + 8), float("nan"), device="cuda").to(torch.bfloat16)
    check(op, base[:, : 2 * 4096], out=out[:, :4096])
    assert torch.isnan(out[:, 4096:]).all(), "the output's row padding was written"


def test_large_prefill_batch() -> None:
    # more rows than a grid's y dimension allows (rows are on x)
    x = torch.randn(70000, 2 * 64, device="cuda").to(torch.float16)
    check("silu_and_mul", x)


def test_writes_nothing_past_the_output() -> None:
    buf = torch.full((4, 130), 7.0, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 256, device="cuda").to(torch.bfloat16)
    ember.silu_and_mul(x, out=buf[:, :128])
    assert bool((buf[:, 128:] == 7.0).all())
