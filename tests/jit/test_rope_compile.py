"""RoPE on a machine with no GPU: compiles for sm_90a, validates every input (R4.6).

The binding checks dtypes, shapes, strides and options before devices, so bad inputs are tested
here on CPU tensors: each raises a clear exception naming the argument and what was expected.
"""

# ruff: noqa: E501  (the tables keep one bad input per line)
from __future__ import annotations

import re
import shutil

import pytest
import torch

import ember
from ember.jit import build, resolve
from ember.ops import rope

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]


BF = torch.bfloat16


def qkp(tokens: int = 4, hq: int = 8, hk: int = 2, dim: int = 64) -> tuple:
    return (
        torch.zeros(tokens, hq, dim, dtype=BF),
        torch.zeros(tokens, hk, dim, dtype=BF),
        torch.arange(tokens, dtype=torch.int32),
    )


def test_module_builds_binding_and_kernels_for_exactly_sm90a() -> None:
    assert rope._module(torch.zeros(1, dtype=BF), "test").apply is not None
    manifest = (build(resolve(rope.rope_spec("bf16"))).parent / "build.ninja").read_text()
    assert re.findall(r"-gencode=\S+", manifest) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert "build rope.o: cxx " in manifest and "build rope_1.o: nvcc " in manifest


@pytest.mark.parametrize(
    ("change", "kwargs", "err", "pattern"),
    [
        ({"k": torch.zeros(4, 2, 64, dtype=torch.float16)}, {}, TypeError, r"`k` must have dtype bfloat16"),
        ({"k": torch.zeros(3, 2, 64, dtype=BF)}, {}, ValueError, r"`k` must be \[tokens=4, heads, head_dim=64\], got \[3, 2, 64\]"),
        ({"k": torch.zeros(4, 2, 32, dtype=BF)}, {}, ValueError, r"head_dim=64\], got \[4, 2, 32\]"),
        ({"q": torch.zeros(4, 64, 8, dtype=BF).transpose(1, 2)}, {}, ValueError, r"last dimension of `q` must be contiguous"),
        ({"positions": torch.arange(4, dtype=torch.float32)}, {}, TypeError, r"`positions` must be int32 or int64, got float32"),
        ({"positions": torch.arange(5, dtype=torch.int32)}, {}, ValueError, r"`positions` must be \[tokens=4\], got \[5\]"),
        ({}, {"rotary_dim": 65}, ValueError, r"`rotary_dim` must be even, >= 2 and <= head_dim \(64, at most 512\), got 65"),
        ({}, {"rotary_dim": 128}, ValueError, r"got 128"),
        ({}, {"rope_theta": 0.0}, ValueError, r"`rope_theta` and `rope_scale` must be finite and > 0"),
        ({}, {"rope_scale": float("inf")}, ValueError, r"must be finite and > 0"),
        ({}, {"llama31_scaling": {"factor": 8.0}}, ValueError, r"needs the keys .* missing \['low_freq_factor'"),
        (
            {},
            {"llama31_scaling": {"factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}},
            ValueError,
            r"0 < low_freq_factor < high_freq_factor",
        ),
        ({}, {"out_q": torch.zeros(4, 8, 32, dtype=BF)}, ValueError, r"`out_q` must have the shape of `q` \[4, 8, 64\], got \[4, 8, 32\]"),
        ({}, {}, ValueError, r"`q` must be on a CUDA device, got cpu"),
    ],
)  # fmt: skip
def test_bad_inputs_raise_before_launch(change, kwargs, err, pattern) -> None:
    q, k, pos = qkp()
    args = {"q": q, "k": k, "positions": pos}
    args.update(change)
    with pytest.raises(err, match=pattern):
        ember.apply_rope(args["q"], args["k"], args["positions"], **kwargs)


@pytest.mark.parametrize(
    ("cache", "err", "pattern"),
    [
        (torch.zeros(100, 64, dtype=BF), TypeError, r"`cos_sin_cache` must have dtype float32"),
        (torch.zeros(100, 66), ValueError, r"rotary_dim` must be even, >= 2 and <= head_dim"),
        (torch.zeros(100, 32)[:, ::2].contiguous().t(), ValueError, r"cos_sin_cache` must be contiguous|rotary_dim"),
        (torch.zeros(100, 32), ValueError, r"`q` must be on a CUDA device, got cpu"),
        ("not a tensor", TypeError, r"`cos_sin_cache` must be a tensor, got str"),
        (torch.tensor(1.0), ValueError, r"`cos_sin_cache` must be \[max_position, rotary_dim\] \(cos then sin\), got \[\]"),
        (torch.zeros(2, 100, 64), ValueError, r"got \[2, 100, 64\]"),
    ],
)  # fmt: skip
def test_cache_inputs_raise_before_launch(cache, err, pattern) -> None:
    q, k, pos = qkp()
    with pytest.raises(err, match=pattern):
        ember.apply_rope_with_cos_sin_cache_(q, k, pos, cache)


def test_unsupported_dtype_raises() -> None:
    q, k, pos = qkp()
    with pytest.raises(
        TypeError, match=r"`q` must be bfloat16, float16 or float32, got torch.int32"
    ):
        ember.apply_rope(q.int(), k, pos)
    with pytest.raises(ValueError, match=r"dtype must be one of"):
        rope.rope_spec("fp8")
