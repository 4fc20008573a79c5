"""The norm family on a machine with no GPU: compiles for sm_90a, validates every input (R4.6).

Bad inputs are rejected by the binding before any CUDA call, so they are tested here on CPU
tensors; the device check comes last, after dtype, rank, shape, stride and size checks.
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch

import ember
from ember.jit import build, resolve
from ember.ops import norm

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_module_builds_three_units_for_exactly_sm90a(dtype: str) -> None:
    spec = norm.norm_spec(dtype)
    assert norm._functions(_like(dtype), "t").rmsnorm is not None
    entry = build(resolve(spec)).parent
    manifest = (entry / "build.ninja").read_text()
    assert re.findall(r"-gencode=\S+", manifest) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert "build norm.o: cxx " in manifest, "the binding must compile with the C++ compiler"
    assert "build norm_rmsnorm.o: nvcc " in manifest and "build norm_fused.o: nvcc " in manifest


def _like(dtype: str) -> torch.Tensor:
    return torch.empty(
        0, dtype={"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    )


def test_uris_are_deterministic_and_distinct() -> None:
    uris = [norm.norm_spec(d).uri for d in ("bf16", "fp16", "fp32")]
    assert uris == ["norm_bf16", "norm_fp16", "norm_fp32"]
    assert len({resolve(norm.norm_spec(d)).key for d in ("bf16", "fp16", "fp32")}) == 3
    with pytest.raises(ValueError, match="dtype must be one of"):
        norm.norm_spec("fp8")


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "aligned", "plan"),
    [
        (torch.bfloat16, 64, 8192, True, (8, 1, 8, 32, 0)),
        (torch.bfloat16, 128, 8192, True, (8, 1, 16, 16, 0)),
        (torch.bfloat16, 4096, 8192, True, (8, 4, 128, 1, 0)),
        (torch.bfloat16, 4096, 64, True, (8, 2, 256, 1, 1)),
        (torch.bfloat16, 5120, 8192, True, (8, 4, 160, 1, 0)),
        (torch.bfloat16, 5120, 1, True, (8, 2, 320, 1, 1)),
        (torch.bfloat16, 7168, 8192, True, (8, 4, 224, 1, 0)),
        (torch.bfloat16, 8192, 8192, True, (8, 8, 128, 1, 0)),
        (torch.bfloat16, 16384, 8192, True, (8, 8, 256, 1, 0)),
        (torch.bfloat16, 8192, 256, True, (8, 2, 512, 1, 1)),
        (torch.bfloat16, 32768, 8192, True, (8, 8, 512, 1, 0)),
        (torch.bfloat16, 65536, 8192, True, (8, 16, 512, 1, 0)),
        (torch.float32, 8192, 8192, True, (4, 8, 256, 1, 0)),
        (torch.bfloat16, 100, 8192, True, (1, 16, 32, 1, 0)),
        (torch.bfloat16, 4096, 8192, False, (1, 16, 256, 1, 0)),
        (torch.bfloat16, 65537, 8192, True, ()),
        (torch.bfloat16, 8200, 8192, False, ()),
        (torch.float32, 65536, 8192, True, ()),
    ],
)
def test_dispatch_plans_are_explicit(
    dtype: torch.dtype, hidden: int, rows: int, aligned: bool, plan: tuple[int, ...]
) -> None:
    assert norm.plan_for(dtype, hidden, rows, aligned=aligned) == plan


# The combinations the launchers compile (norm.cuh, launch_vec): one row per block with 2-16
# vectors per thread (scalar rows: 16), or sub-warp groups of 1-32 threads with 1, 2 or 4.
_BLOCK_ROW_NV = {2, 4, 8, 16}
_GROUP_NV = {1, 2, 4}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rows", [1, 256, 257, 8192])
def test_every_plan_is_a_compiled_combination(dtype: torch.dtype, rows: int) -> None:
    # R5.11/R5.12: plan() only ever produces what the dispatch compiled, and covers the row.
    elem = torch.tensor([], dtype=dtype).element_size()
    wide = 16 // elem
    max_hidden = 16 * 512 * wide
    hiddens = sorted(
        {*range(1, 1025), *range(1024, max_hidden + 1, 8 * wide), max_hidden, max_hidden + wide}
    )
    seen = set()
    for hidden in hiddens:
        for aligned in (True, False):
            plan = norm.plan_for(dtype, hidden, rows, aligned=aligned)
            if not plan:
                limit = max_hidden if aligned and hidden % wide == 0 else 16 * 512
                assert hidden > limit, (hidden, aligned)
                continue
            vec, nv, tpr, rpb, early = plan
            seen.add((vec, nv, rpb > 1))
            assert vec == (wide if aligned and hidden % wide == 0 else 1), plan
            assert hidden % vec == 0 and tpr * nv * vec >= hidden, (hidden, plan)
            assert tpr * rpb <= 512, (hidden, plan)
            if rpb > 1:
                assert vec == wide and nv in _GROUP_NV, (hidden, plan)
                assert tpr <= 32 and tpr & (tpr - 1) == 0 and tpr * rpb == 256, (hidden, plan)
            else:
                assert tpr % 32 == 0, (hidden, plan)
                assert nv in (_BLOCK_ROW_NV if vec == wide else {16}), (hidden, plan)
                # NOTE: no more threads than the row needs (one warp of slack).
                assert (tpr - 32) * nv * vec < hidden, (hidden, plan)
            assert early == int(vec == wide and nv == 2 and rpb == 1), (hidden, plan)
    assert {nv for _, nv, group in seen if group} <= _GROUP_NV


def _bf16(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(torch.bfloat16)


BAD_RMSNORM = [
    (
        "x int32",
        lambda: (torch.ones(2, 8, dtype=torch.int32), _bf16(8)),
        TypeError,
        "must be bfloat16, float16 or float32, got torch.int32",
    ),
    ("x not a tensor", lambda: ([1.0, 2.0], _bf16(2)), TypeError, "`x` must be a tensor, got list"),
    (
        "weight dtype",
        lambda: (_bf16(2, 8), torch.ones(8)),
        TypeError,
        "`weight` must have dtype bfloat16, got float32",
    ),
    ("1-D x", lambda: (_bf16(8), _bf16(8)), ValueError, "`x` must be 2-D [tokens, hidden] or 3-D"),
    ("4-D x", lambda: (_bf16(1, 2, 2, 8), _bf16(8)), ValueError, "got shape [1, 2, 2, 8]"),
    ("weight shape", lambda: (_bf16(2, 8), _bf16(4)), ValueError, "`weight` must have shape [8]"),
    ("weight 2-D", lambda: (_bf16(2, 8), _bf16(1, 8)), ValueError, "`weight` must have shape [8]"),
    (
        "strided last dim",
        lambda: (_bf16(8, 4).t(), _bf16(8)),
        ValueError,
        "last dimension of `x` must be contiguous",
    ),
    (
        "weight strided",
        lambda: (_bf16(2, 8), _bf16(16)[::2]),
        ValueError,
        "`weight` must be contiguous",
    ),
    (
        "hidden too large",
        lambda: (_bf16(1, 65537), _bf16(65537)),
        ValueError,
        "hidden size 65537 is not supported",
    ),
    (
        "cpu tensors",
        lambda: (_bf16(2, 8), _bf16(8)),
        ValueError,
        "`x` must be on a CUDA device, got cpu",
    ),
]


@pytest.mark.parametrize(
    ("name", "make", "exc", "needle"), BAD_RMSNORM, ids=[b[0] for b in BAD_RMSNORM]
)
def test_rmsnorm_bad_input_raises_before_writing(name, make, exc, needle) -> None:  # type: ignore[no-untyped-def]
    x, w = make()
    out = (
        torch.full(x.shape, 7.0).to(getattr(x, "dtype", torch.bfloat16))
        if hasattr(x, "shape")
        else None
    )
    with pytest.raises(exc) as info:
        ember.rmsnorm(x, w, out=out)
    assert needle in str(info.value)
    if out is not None:
        assert torch.all(out == 7), "a rejected call must not write"


def test_rmsnorm_out_and_eps_are_checked() -> None:
    x, w = _bf16(2, 8), _bf16(8)
    with pytest.raises(
        ValueError, match=r"`out` must have the shape of `x` \[2, 8\], got \[2, 4\]"
    ):
        ember.rmsnorm(x, w, out=_bf16(2, 4))
    with pytest.raises(TypeError, match="`out` must have dtype bfloat16, got float16"):
        ember.rmsnorm(x, w, out=torch.empty(2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="`eps` must be >= 0, got -1"):
        ember.rmsnorm(x, w, -1.0)


def test_fused_add_rmsnorm_bad_input_raises_before_writing() -> None:
    x, r, w = _bf16(2, 8), _bf16(2, 8), _bf16(8)
    x0, r0 = x.clone(), r.clone()
    with pytest.raises(
        ValueError, match=r"`residual` must have the shape of `x` \[2, 8\], got \[2, 4\]"
    ):
        ember.fused_add_rmsnorm_(x, _bf16(2, 4), w)
    with pytest.raises(TypeError, match="`residual` must have dtype bfloat16, got float32"):
        ember.fused_add_rmsnorm_(x, r.float(), w)
    with pytest.raises(ValueError, match="`x` must be on a CUDA device, got cpu"):
        ember.fused_add_rmsnorm_(x, r, w)
    assert torch.equal(x, x0) and torch.equal(r, r0)
