"""RoPE on the GPU against an fp32/fp64 reference (R4.1-R4.7).

Skipped, never failed, without a suitable GPU. The reference computes inv_freq in fp32 as model
code does (HF / vLLM), then the rotation in fp64; outputs are poisoned before out-of-place calls.
"""

from __future__ import annotations

import math

import pytest
import torch

import ember
from ember.bench.routines.rope import cos_sin_cache
from ember.jit import KernelSpec, all_specs
from ember.testing import requires, tolerances

pytestmark = requires(feature="rope")


def PREBUILD() -> list[KernelSpec]:  # noqa: N802 (tests/ops/conftest.py builds these ahead)
    return all_specs("rope")


DTYPES = [torch.bfloat16, torch.float16, torch.float32]
LLAMA31 = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def inv_freq(rot: int, theta: float, scale: float, llama31: dict | None) -> torch.Tensor:
    f = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
    if llama31 is not None:
        old = llama31["original_max_position_embeddings"]
        low_w, high_w = old / llama31["low_freq_factor"], old / llama31["high_freq_factor"]
        wavelen = 2 * math.pi / f
        smooth = (old / wavelen - llama31["low_freq_factor"]) / (
            llama31["high_freq_factor"] - llama31["low_freq_factor"]
        )
        mid = (1 - smooth) * f / llama31["factor"] + smooth * f
        f = torch.where(
            wavelen > low_w, f / llama31["factor"], torch.where(wavelen < high_w, f, mid)
        )
    return f / scale


def reference(x, positions, rot, interleave, *, freqs=None, cache=None):
    t = x.double().clone()
    if cache is not None:
        cs = cache[positions.long()].double()
        cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2 :]
    else:
        ang = positions.double()[:, None] * freqs.double().to(x.device)[None, :]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    if interleave:
        a, b = t[..., 0:rot:2].clone(), t[..., 1:rot:2].clone()
        t[..., 0:rot:2], t[..., 1:rot:2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = t[..., : rot // 2].clone(), t[..., rot // 2 : rot].clone()
        t[..., : rot // 2], t[..., rot // 2 : rot] = a * cos - b * sin, b * cos + a * sin
    return t.to(x.dtype)


def close(got, want, *, computed=False):
    rtol, atol = tolerances(got.dtype)
    if computed:  # fp32 angles (pos * inv_freq, as model code computes them): ~3e-3 rad at 32k
        rtol, atol = max(rtol, 1e-2), max(atol, 1e-2)
    assert not torch.isnan(got).any(), "unwritten (poisoned) or NaN elements"
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize(("tokens", "hq", "hk", "dim", "rot"), [
    (7, 32, 8, 128, 128), (300, 8, 8, 64, 64), (5, 12, 4, 128, 64), (3, 4, 1, 80, 80),
    (2, 2, 2, 96, 32), (1, 32, 8, 256, 256), (9, 3, 1, 128, 6),
])  # fmt: skip
def test_computed_angles(dtype, interleave, tokens, hq, hk, dim, rot):  # noqa: PLR0917
    q = torch.randn(tokens, hq, dim, device="cuda").to(dtype)
    k = torch.randn(tokens, hk, dim, device="cuda").to(dtype)
    pos = torch.randint(0, 32768, (tokens,), device="cuda", dtype=torch.int32)
    f = inv_freq(rot, 1e4, 1.0, None)
    oq, ok = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    got_q, got_k = ember.apply_rope(
        q, k, pos, rotary_dim=rot, interleave=interleave, out_q=oq, out_k=ok
    )
    assert got_q is oq and got_k is ok
    close(oq, reference(q, pos, rot, interleave, freqs=f), computed=True)
    close(ok, reference(k, pos, rot, interleave, freqs=f), computed=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize(("tokens", "hq", "hk"), [(1500, 32, 8), (1031, 5, 2), (2048, 64, 8)])
def test_many_tokens_cache_in_place_and_out_of_place(dtype, interleave, tokens, hq, hk):
    # more tokens than the grouped kernel takes (the other tests' <= 64 tokens run on it): the
    # one-token-a-block kernel, in place on views of a fused qkv and out of place into poisoned
    # outputs
    qkv = torch.randn(tokens, hq + 2 * hk, 128, device="cuda").to(dtype)
    q, k = qkv[:, :hq], qkv[:, hq : hq + hk]
    pos = torch.randint(0, 4096, (tokens,), device="cuda", dtype=torch.int32)
    cache = cos_sin_cache(4096, 128, device="cuda")
    want_q = reference(q, pos, 128, interleave, cache=cache)
    want_k = reference(k, pos, 128, interleave, cache=cache)
    oq, ok = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    ember.apply_rope_with_cos_sin_cache(q, k, pos, cache, interleave=interleave, out_q=oq, out_k=ok)
    close(oq, want_q)
    close(ok, want_k)
    v_before = qkv[:, hq + hk :].clone()
    ember.apply_rope_with_cos_sin_cache_(q, k, pos, cache, interleave=interleave)
    close(q, want_q)
    close(k, want_k)
    assert torch.equal(qkv[:, hq + hk :], v_before), "v must not be touched"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("dim", [64, 256])
def test_many_tokens_each_head_size_of_the_static_kernel(dtype, interleave, dim):
    # rope_static_kernel's other compile-time shapes (heads of 64 and 256; the test above covers
    # 128), in place and out of place, with positions outside the cache (-1, past its end) left
    # unrotated in place and unwritten (still poisoned) out of place
    tokens, hq, hk, rows = 300, 6, 2, 512
    q = torch.randn(tokens, hq, dim, device="cuda").to(dtype)
    k = torch.randn(tokens, hk, dim, device="cuda").to(dtype)
    pos = torch.randint(0, rows, (tokens,), device="cuda", dtype=torch.int32)
    pos[7], pos[200] = -1, rows
    inside = (pos >= 0) & (pos < rows)
    cache = cos_sin_cache(rows, dim, device="cuda")
    safe = torch.where(inside, pos, 0)
    want_q = torch.where(inside[:, None, None], reference(q, safe, dim, interleave, cache=cache), q)
    want_k = torch.where(inside[:, None, None], reference(k, safe, dim, interleave, cache=cache), k)
    oq, ok = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    ember.apply_rope_with_cos_sin_cache(q, k, pos, cache, interleave=interleave, out_q=oq, out_k=ok)
    close(oq[inside], want_q[inside])
    close(ok[inside], want_k[inside])
    assert bool(oq[~inside].isnan().all()), "tokens outside the cache are not written"
    ember.apply_rope_with_cos_sin_cache_(q, k, pos, cache, interleave=interleave)
    close(q, want_q)
    close(k, want_k)


@pytest.mark.parametrize("interleave", [False, True])
def test_cache_in_place_with_int64_positions_and_strided_heads(interleave):
    qkv = torch.randn(64, 32 + 8 + 8, 128, device="cuda").to(torch.bfloat16)
    q, k = qkv[:, :32], qkv[:, 32:40]  # views into a fused qkv projection
    want_q = reference(q, pos := torch.randint(0, 4096, (64,), device="cuda"), 128, interleave,
                       cache=(cache := cos_sin_cache(4096, 128, device="cuda")))  # fmt: skip
    want_k = reference(k, pos, 128, interleave, cache=cache)
    v_before = qkv[:, 40:].clone()
    ember.apply_rope_with_cos_sin_cache_(q, k, pos, cache, interleave=interleave)
    close(q, want_q)
    close(k, want_k)
    assert torch.equal(qkv[:, 40:], v_before), "v must not be touched"


@pytest.mark.parametrize("interleave", [False, True])
def test_unaligned_views_take_the_element_path(interleave):
    base = torch.randn(6, 5, 130, device="cuda").to(torch.bfloat16)
    q, k = base[:, :4, 1:129], base[:, 4:, 1:129]  # rows start 2 bytes past 16-byte alignment
    pos = torch.randint(0, 1000, (6,), device="cuda")
    f = inv_freq(128, 1e4, 1.0, None)
    oq, ok = ember.apply_rope(q, k, pos, interleave=interleave)
    close(oq, reference(q, pos, 128, interleave, freqs=f), computed=True)
    close(ok, reference(k, pos, 128, interleave, freqs=f), computed=True)


def test_llama31_scaling_theta_and_scale():
    q = torch.randn(33, 32, 128, device="cuda")
    k = torch.randn(33, 8, 128, device="cuda")
    pos = torch.randint(0, 131072, (33,), device="cuda")
    oq, ok = ember.apply_rope(q, k, pos, rope_theta=5e5, rope_scale=2.0, llama31_scaling=LLAMA31)
    f = inv_freq(128, 5e5, 2.0, LLAMA31)
    # fp32 angles at positions up to 131072: compare at the fp32 angle precision
    torch.testing.assert_close(oq, reference(q, pos, 128, False, freqs=f), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(ok, reference(k, pos, 128, False, freqs=f), rtol=2e-2, atol=2e-2)


def test_out_of_place_copies_the_unrotated_tail_and_leaves_inputs():
    q = torch.randn(4, 4, 128, device="cuda").to(torch.float16)
    k = torch.randn(4, 2, 128, device="cuda").to(torch.float16)
    q0, k0 = q.clone(), k.clone()
    oq, ok = ember.apply_rope(q, k, torch.arange(4, device="cuda"), rotary_dim=64)
    assert torch.equal(q, q0) and torch.equal(k, k0)
    assert torch.equal(oq[..., 64:], q[..., 64:]) and torch.equal(ok[..., 64:], k[..., 64:])


def test_positions_outside_the_cache_are_never_read():
    cache = cos_sin_cache(16, 64, device="cuda")
    q = torch.randn(3, 2, 64, device="cuda")
    k = torch.randn(3, 1, 64, device="cuda")
    q0 = q.clone()
    ember.apply_rope_with_cos_sin_cache_(q, k, torch.tensor([1, 16, -1], device="cuda"), cache)
    assert torch.equal(q[1:], q0[1:]), "tokens with positions outside [0, 16) stay unrotated"
    close(q[:1], reference(q0[:1], torch.tensor([1], device="cuda"), 64, False, cache=cache))
