"""RMSNorm and fused add + RMSNorm on the GPU against an fp32 reference (R4.1-R4.7, R4.14).

Skipped, never failed, without a suitable GPU (`ember.testing.requires`). Inputs are fresh
random values; outputs are poisoned with NaN before every launch so an unwritten element fails.
"""

from __future__ import annotations

import pytest
import torch

import ember
from ember.jit import KernelSpec, all_specs
from ember.testing import fused_add_rmsnorm_ref, requires, rmsnorm_ref, tolerances

pytestmark = requires(feature="norm")


def PREBUILD() -> list[KernelSpec]:  # noqa: N802 (tests/ops/conftest.py builds these ahead)
    return all_specs("norm")


DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# (tokens, hidden): decode and prefill sizes, the model sizes, odd and unaligned widths; more than
# 256 rows of 8192 (bf16/fp16) or 4096 (fp32) take the 8-vectors-per-thread kernel.
SHAPES = [
    (1, 64), (7, 128), (3, 100), (33, 1000), (1, 4096), (64, 4096), (5, 5120), (2, 6144),
    (9, 7168), (128, 8192), (300, 8192), (257, 4096), (3, 16384), (16384, 128), (1000, 2048),
]  # fmt: skip


def _rand(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    rtol, atol = tolerances(got.dtype)
    assert not torch.isnan(got).any(), "unwritten (poisoned) or NaN elements"
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("tokens", "hidden"), SHAPES)
def test_rmsnorm_matches_reference(tokens: int, hidden: int, dtype: torch.dtype) -> None:
    x, w = _rand(tokens, hidden, dtype=dtype), _rand(hidden, dtype=dtype)
    out = torch.full_like(x, float("nan"))
    got = ember.rmsnorm(x, w, 1e-5, out=out)
    assert got is out
    _close(out, rmsnorm_ref(x, w, 1e-5))
    _close(ember.rmsnorm(x, w, 1e-5), rmsnorm_ref(x, w, 1e-5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_large_hidden(dtype: torch.dtype) -> None:
    hidden = 32768 if dtype == torch.float32 else 65536
    x, w = _rand(4, hidden, dtype=dtype), _rand(hidden, dtype=dtype)
    _close(ember.rmsnorm(x, w), rmsnorm_ref(x, w))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_strided_rows_and_strided_out(dtype: torch.dtype) -> None:
    big = _rand(37, 4096 + 256, dtype=dtype)
    x = big[:, 128 : 128 + 4096]  # rows 4352 apart, 16-byte aligned
    w = _rand(4096, dtype=dtype)
    out_big = torch.full((37, 5000), float("nan"), device="cuda", dtype=dtype)
    out = out_big[:, :4096]
    ember.rmsnorm(x, w, out=out)
    _close(out, rmsnorm_ref(x, w))
    assert torch.isnan(out_big[:, 4096:].float()).all(), "wrote outside `out`"


def test_rmsnorm_unaligned_pointer_takes_scalar_path() -> None:
    flat = _rand(1 + 6 * 512, dtype=torch.bfloat16)
    x = flat[1:].view(6, 512)  # 2-byte offset: not 16-byte aligned
    w = _rand(512, dtype=torch.bfloat16)
    _close(ember.rmsnorm(x, w), rmsnorm_ref(x, w))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_3d_per_head_qk_norm(dtype: torch.dtype) -> None:
    tokens, heads, kv_heads, d = 19, 8, 2, 128
    qkv = _rand(tokens, (heads + 2 * kv_heads) * d, dtype=dtype)
    q = qkv[:, : heads * d].view(tokens, heads, d)  # strided: rows (tokens) 1536 apart
    w = _rand(d, dtype=dtype)
    want = rmsnorm_ref(q, w)
    got = ember.rmsnorm(q, w)
    assert got.shape == (tokens, heads, d)
    _close(got, want)
    ember.rmsnorm(q, w, out=q)  # in place on a strided view
    _close(q, want)


def test_rmsnorm_in_place_equals_out_of_place() -> None:
    x, w = _rand(64, 4096, dtype=torch.bfloat16), _rand(4096, dtype=torch.bfloat16)
    want = ember.rmsnorm(x, w)
    assert ember.rmsnorm(x, w, out=x) is x
    assert torch.equal(x, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("tokens", "hidden"), [(1, 64), (3, 100), (16, 4096), (9, 7168), (300, 8192), (2, 16384)]
)
def test_fused_add_rmsnorm_matches_reference(tokens: int, hidden: int, dtype: torch.dtype) -> None:
    x, r, w = (
        _rand(tokens, hidden, dtype=dtype),
        _rand(tokens, hidden, dtype=dtype),
        _rand(hidden, dtype=dtype),
    )
    want_x, want_r = fused_add_rmsnorm_ref(x, r, w, 1e-6)
    assert ember.fused_add_rmsnorm_(x, r, w, 1e-6) is None
    _close(r, want_r)
    _close(x, want_x)


def test_fused_add_rmsnorm_strided_3d() -> None:
    base_x = _rand(11, 4, 256, dtype=torch.bfloat16)
    base_r = _rand(11, 6, 256, dtype=torch.bfloat16)
    x, r = base_x, base_r[:, 1:5]  # residual heads strided inside a wider tensor
    w = _rand(256, dtype=torch.bfloat16)
    want_x, want_r = fused_add_rmsnorm_ref(x, r, w)
    untouched = base_r[:, [0, 5]].clone()
    ember.fused_add_rmsnorm_(x, r, w)
    _close(r, want_r)
    _close(x, want_x)
    assert torch.equal(base_r[:, [0, 5]], untouched)


def test_zero_tokens_is_a_no_op() -> None:
    x, w = _rand(0, 4096, dtype=torch.bfloat16), _rand(4096, dtype=torch.bfloat16)
    assert ember.rmsnorm(x, w).shape == (0, 4096)


def test_cuda_graph_replay_equals_eager() -> None:
    x, w = _rand(32, 4096, dtype=torch.bfloat16), _rand(4096, dtype=torch.bfloat16)
    r = _rand(32, 4096, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    xf, rf = x.clone(), r.clone()
    ember.rmsnorm(x, w, out=out)  # warm: the module is loaded before capture
    ember.fused_add_rmsnorm_(xf.clone(), rf.clone(), w)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ember.rmsnorm(x, w, out=out)
        ember.fused_add_rmsnorm_(xf, rf, w)
    for _ in range(3):
        x.copy_(_rand(32, 4096, dtype=torch.bfloat16))
        x0, r0 = x.clone(), r.clone()
        xf.copy_(x0)
        rf.copy_(r0)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ember.rmsnorm(x0, w))
        ex, er = x0.clone(), r0.clone()
        ember.fused_add_rmsnorm_(ex, er, w)
        assert torch.equal(xf, ex) and torch.equal(rf, er)


def test_runs_on_the_current_stream_and_device() -> None:
    x, w = _rand(256, 8192, dtype=torch.bfloat16), _rand(8192, dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = ember.rmsnorm(x, w)
    s.synchronize()
    _close(out, rmsnorm_ref(x, w))


def test_weight_on_another_device_or_dtype_raises() -> None:
    x, w = _rand(2, 64, dtype=torch.bfloat16), _rand(64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="`weight` must be on the device of `x`"):
        ember.rmsnorm(x, w.cpu())
    with pytest.raises(TypeError, match="`weight` must have dtype bfloat16, got float16"):
        ember.rmsnorm(x, w.half())
