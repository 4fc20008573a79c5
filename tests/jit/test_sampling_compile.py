"""The sampling family on a machine with no GPU: compiles for sm_90a, validates every input (R4.6)."""

# ruff: noqa: E501  (the tables keep one bad input per line)
from __future__ import annotations

import re
import shutil

import pytest
import torch

import ember
from ember.jit import build, resolve
from ember.ops import sampling

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]


def test_module_builds_for_exactly_sm90a_and_needs_sm90() -> None:
    assert sampling._module(torch.zeros(1), "test").softmax is not None
    manifest = (build(resolve(sampling.sampling_spec("fp32"))).parent / "build.ninja").read_text()
    assert re.findall(r"-gencode=\S+", manifest) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert sampling.sampling_spec("bf16").archs == ("sm90+",)


def test_softmax_takes_a_workspace_only_for_the_grid_kernels_rows() -> None:
    # softmax_workspace_words: the zeroed counts and (max, sum) pairs of the rows
    # softmax_grid_kernel takes (48 or more rows whose 8 chunks are 14 337-16 384 elements);
    # 0 elsewhere, and always 0 in an EMBER_SOFTMAX_GRID=0 build (the 8-CTA clusters need none)
    from ember.config import knobs
    from ember.jit import build_and_load

    words = build_and_load(sampling.sampling_spec("fp32")).softmax_workspace_words
    assert words(128, 128256) == 128 + 2 * 8 * 128
    assert words(49, 131072) == 50 + 2 * 8 * 49  # counts padded to an even number
    assert words(47, 128256) == 0  # one round of clusters holds them
    assert words(128, 131080) == 0  # chunks of 16 392: softmax_kernel
    assert words(128, 114688) == 0  # chunks of 14 336: 4 CTAs an SM of softmax_kernel
    assert words(128, 32000) == 0 and words(0, 128256) == 0
    with knobs.scope(extra_cuda_flags=("-DEMBER_SOFTMAX_GRID=0",)):
        clusters = build_and_load(sampling.sampling_spec("fp32"))
    assert clusters.softmax_workspace_words(128, 128256) == 0


@pytest.mark.parametrize(
    ("workspace", "err", "pattern"),
    [
        (torch.zeros(4, dtype=torch.int64), TypeError, r"`workspace` must have dtype int32, got int64"),
        (torch.zeros(2, 4, dtype=torch.int32), ValueError, r"`workspace` must be int32 \[>= 0\] .*got \[2, 4\]"),
        (torch.zeros(8, dtype=torch.int32)[::2], ValueError, r"`workspace` must be contiguous"),
    ],
)  # fmt: skip
def test_a_bad_softmax_workspace_raises_before_launch(workspace, err, pattern) -> None:
    # the binding's own checks of the (internal) workspace argument, before the device checks
    mod = sampling._module(torch.zeros(1), "test")
    logits = torch.zeros(4, 1000)
    with pytest.raises(err, match=pattern):
        mod.softmax(logits, torch.zeros(4, 1000), None, 1.0, workspace)


L = torch.zeros(4, 1000, dtype=torch.bfloat16)


@pytest.mark.parametrize(
    ("args", "kwargs", "err", "pattern"),
    [
        ((torch.zeros(4, 1000, dtype=torch.int32),), {}, TypeError, r"`logits` must be bfloat16, float16 or float32"),
        ((torch.zeros(4, 10, 100, dtype=torch.bfloat16),), {}, ValueError, r"`logits` must be 2-D|ndim"),
        ((L,), {"out": torch.zeros(4, 1000, dtype=torch.bfloat16)}, TypeError, r"`out` must have dtype float32, got bfloat16"),
        ((L,), {"out": torch.zeros(4, 999)}, ValueError, r"`out` must have the shape of `logits`"),
        ((torch.zeros(1000, 4, dtype=torch.bfloat16).t(),), {}, ValueError, r"last dimension of `logits` must be contiguous"),
        ((L, 0.0), {}, ValueError, r"`temperature` must be a finite float32 > 0 .*got 0"),
        ((L, float("nan")), {}, ValueError, r"`temperature` must be a finite float32 > 0"),
        ((L, 1e-50), {}, ValueError, r"`temperature` must be a finite float32 > 0"),
        ((L, torch.ones(3)), {}, ValueError, r"`temperature` must be a scalar or \[rows=4\], got \[3\]"),
        ((L, torch.ones(4, dtype=torch.float64)), {}, TypeError, r"`temperature` must have dtype float32"),
        ((torch.zeros(1, 8 * 60000, dtype=torch.bfloat16),), {}, ValueError, r"the vocabulary must be at most \d+ .* got 480000"),
        ((L, torch.ones(4)), {}, ValueError, r"`logits` must be on a CUDA device, got cpu"),
    ],
)  # fmt: skip
def test_bad_inputs_raise_before_launch(args, kwargs, err, pattern) -> None:
    with pytest.raises(err, match=pattern):
        ember.softmax(*args, **kwargs)


P = torch.full((4, 1000), 1e-3)


@pytest.mark.parametrize(
    ("args", "kwargs", "err", "pattern"),
    [
        ((P.bfloat16(),), {}, TypeError, r"`probs` must have dtype float32, got bfloat16"),
        ((torch.zeros(4, 10, 100),), {}, ValueError, r"`probs`"),
        ((P,), {"out": torch.zeros(4, dtype=torch.int64)}, TypeError, r"`out` must have dtype int32"),
        ((P,), {"out": torch.zeros(3, dtype=torch.int32)}, ValueError, r"`out` must be \[rows=4\], got \[3\]"),
        ((torch.zeros(1000, 4).t(),), {}, ValueError, r"last dimension of `probs` must be contiguous"),
        ((P,), {"offset": -1}, ValueError, r"`offset` must be an int in \[0, 2\^63\), got -1"),
        ((P,), {"seed": -5}, ValueError, r"`seed` must be an int in \[0, 2\^63\), got -5"),
        (("x",), {}, TypeError, r"`probs` must be a torch.Tensor, got str"),
        ((P,), {}, ValueError, r"`probs` must be on a CUDA device, got cpu"),
    ],
)  # fmt: skip
def test_sampling_bad_inputs_raise_before_launch(args, kwargs, err, pattern) -> None:
    with pytest.raises(err, match=pattern):
        ember.sampling_from_probs(*args, **kwargs)


def test_seed_is_drawn_from_the_given_cpu_generator() -> None:
    g = torch.Generator().manual_seed(7)
    before = g.get_state().clone()
    with pytest.raises(ValueError, match=r"on a CUDA device"):  # the binding's device check
        ember.sampling_from_probs(P, generator=g)
    assert not g.get_state().equal(before), "the seed must come from `generator`"
    untouched = torch.Generator().manual_seed(7)
    with pytest.raises(ValueError, match=r"on a CUDA device"):
        ember.sampling_from_probs(P, seed=3, generator=untouched)
    assert untouched.get_state().equal(before), "an explicit seed must not consume the generator"


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "err", "pattern"),
    [
        (ember.top_k_sampling_from_probs, (P, -1), {}, ValueError, r"`top_k` must be an int in \[0, 2\^31\) or an int32 \[rows\] tensor, got -1"),
        (ember.top_k_sampling_from_probs, (P, 2.5), {}, ValueError, r"`top_k` must be an int .*got 2.5"),
        (ember.top_k_sampling_from_probs, (P, torch.ones(4, dtype=torch.int64)), {}, TypeError, r"`top_k` must have dtype int32, got int64"),
        (ember.top_p_sampling_from_probs, (P, 1.5), {}, ValueError, r"`top_p` must be in \[0, 1\], got 1.5"),
        (ember.top_p_sampling_from_probs, (P, float("nan")), {}, ValueError, r"`top_p` must be in \[0, 1\], got nan"),
        (ember.top_p_sampling_from_probs, (P, "0.9"), {}, TypeError, r"`top_p` must be a float or a float32 \[rows\] tensor, got str"),
        (ember.top_p_sampling_from_probs, (P, torch.ones(3)), {}, ValueError, r"`top_p` must be a scalar or \[rows=4\], got \[3\]"),
        (ember.min_p_sampling_from_probs, (P, -0.1), {}, ValueError, r"`min_p` must be in \[0, 1\], got -0.1"),
        (ember.min_p_sampling_from_probs, (P, torch.ones(4, 1)), {}, ValueError, r"`min_p` must be a scalar or \[rows=4\], got \[4, 1\]"),
        (ember.top_k_top_p_sampling_from_probs, (P.bfloat16(), 5, 0.5), {}, TypeError, r"`probs` must have dtype float32, got bfloat16"),
        (ember.sampling_from_logits, (L, 0.0), {}, ValueError, r"`temperature` must be a finite float32 > 0 .*got 0.0"),
        (ember.sampling_from_logits, (L, torch.ones(4, dtype=torch.float16)), {}, TypeError, r"`temperature` must have dtype float32, got float16"),
        (ember.sampling_from_logits, (L,), {"out": torch.zeros(4, dtype=torch.int64)}, TypeError, r"`out` must have dtype int32, got int64"),
        (ember.sampling_from_logits, (L,), {"seed": 2**63}, ValueError, r"`seed` must be an int in \[0, 2\^63\)"),
        (ember.sampling_from_logits, (torch.zeros(4, 1000, dtype=torch.int8),), {}, TypeError, r"`logits` must be bfloat16, float16 or float32, got torch.int8"),
        (ember.top_k_top_p_sampling_from_logits, (L, 5, 0.9), {}, ValueError, r"`logits` must be on a CUDA device, got cpu"),
        (ember.top_k_renorm_probs, (P, 5), {"out": torch.zeros(4, 999)}, ValueError, r"`out` must have the shape of `probs` \[4, 1000\], got \[4, 999\]"),
        (ember.top_k_renorm_probs, (P, 5), {"out": torch.zeros(1000, 4).t()}, ValueError, r"last dimension of `out` must be contiguous"),
        (ember.top_p_renorm_probs, (P.half(), 0.5), {}, TypeError, r"`probs` must have dtype float32, got float16"),
        (ember.top_p_renorm_probs, (P, 2), {}, ValueError, r"`top_p` must be in \[0, 1\], got 2"),
        (ember.top_k_mask_logits, (L, 5), {"out": torch.zeros(4, 1000)}, TypeError, r"`out` must have dtype bfloat16, got float32"),
        (ember.top_k_mask_logits, (L, True), {}, ValueError, r"`top_k` must be an int"),
        (ember.top_k_mask_logits, (torch.zeros(2, 8 * 60000),), {"top_k": 5}, ValueError, r"the vocabulary must be 1 to \d+, got 480000"),
        (ember.top_k_mask_logits, (L, 5), {}, ValueError, r"`logits` must be on a CUDA device, got cpu"),
    ],
)  # fmt: skip
def test_filter_bad_inputs_raise_before_launch(fn, args, kwargs, err, pattern) -> None:
    with pytest.raises(err, match=pattern):
        fn(*args, **kwargs)


def test_the_probability_paths_share_the_fp32_module_and_every_module_has_the_filters() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        mod = sampling._module(torch.zeros(1, dtype=dtype), "test")
        assert mod.sample is not None and mod.filter_rows is not None
    assert sampling._module_fp32("test") is sampling._module(torch.zeros(1), "test")
