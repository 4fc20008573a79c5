"""The decode family on a machine with no GPU: compiles for sm_90a, validates every input (R4.6).

The binding checks dtypes, ranks, shapes and strides before devices, so bad inputs are tested
here on CPU tensors: each raises a clear exception naming the argument and what was expected.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest
import torch

from ember.jit import build, resolve
from ember.ops import decode, paged

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]


def test_module_builds_two_units_for_exactly_sm90a() -> None:
    spec = decode.decode_spec("bf16", "bf16", 128, 4)
    assert decode._decode_module("bf16", "bf16", 128, 4).run is not None
    entry = build(resolve(spec)).parent
    manifest = (entry / "build.ninja").read_text()
    assert re.findall(r"-gencode=\S+", manifest) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert "build decode.o: cxx " in manifest, "the binding must compile with the C++ compiler"
    assert "build decode_1.o: nvcc " in manifest, "the kernels must compile with nvcc"


def test_fp8_kv_module_builds() -> None:
    assert decode._decode_module("bf16", "e4m3", 128, 8).run is not None


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("fp32", "fp32", 128, 4), r"q_dtype must be bf16 or fp16, got 'fp32'"),
        (("bf16", "fp16", 128, 4), r"kv_dtype must be bf16 or e4m3, got 'fp16'"),
        (("bf16", "bf16", 96, 4), r"head_dim must be one of \(64, 128, 256\), got 96"),
        (("bf16", "bf16", 128, 9), r"group must be 1-8, got 9"),
    ],
)
def test_unsupported_specializations_raise(args: tuple, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        decode.decode_spec(*args)


B, HQ, HK, D, PS, PAGES = 2, 8, 2, 128, 16, 6


ONE_PAGE = torch.zeros(1, PS, HK, D, dtype=torch.bfloat16)


def good() -> dict[str, Any]:
    bf = torch.bfloat16
    i32 = torch.int32
    return dict(
        q=torch.zeros(B, HQ, D, dtype=bf),
        k=torch.zeros(PAGES, PS, HK, D, dtype=bf),
        v=torch.zeros(PAGES, PS, HK, D, dtype=bf),
        kv_indptr=torch.tensor([0, 2, 5], dtype=i32),
        kv_indices=torch.arange(5, dtype=i32),
        work=torch.zeros(4, 4, dtype=i32),
        merge_indptr=torch.zeros(B + 1, dtype=i32),
        partial_o=torch.zeros(4, HQ, D),
        partial_lse=torch.zeros(4, HQ),
        out=torch.zeros(B, HQ, D, dtype=bf),
        lse=None,
        grid=2,
        merge_rows=B,
        page_size=PS,
        hnd=False,
        sm_scale=0.1,
        soft_cap=0.0,
        k_scale=1.0,
        v_scale=1.0,
    )


def call(**changes: Any) -> None:
    args = good()
    args.update(changes)
    decode._decode_module("bf16", "bf16", 128, 4).run(*args.values())


@pytest.mark.parametrize(
    ("changes", "err", "pattern"),
    [
        (dict(q=torch.zeros(B, HQ, D)), TypeError, r"`q` must have dtype bfloat16, got float32"),
        (
            dict(k=torch.zeros(PAGES, PS, HK, D, dtype=torch.float16)),
            TypeError,
            r"`k_cache` must have dtype bfloat16, got float16",
        ),
        (
            dict(q=torch.zeros(B, 6, D, dtype=torch.bfloat16)),
            ValueError,
            r"`q` must be \[batch, qo_heads, 128\] with qo_heads a multiple of 4, "
            r"got \[2, 6, 128\]",
        ),
        (
            dict(out=torch.zeros(B, HQ, 64, dtype=torch.bfloat16)),
            ValueError,
            r"`out` must have the shape of `q` \[2, 8, 128\], got \[2, 8, 64\]",
        ),
        (
            dict(k=torch.zeros(PAGES, 32, HK, D, dtype=torch.bfloat16)),
            ValueError,
            r"`k_cache` must have shape \[\*, 16, 2, 128\], got \[6, 32, 2, 128\]",
        ),
        (
            dict(hnd=True),
            ValueError,
            r"`k_cache` must have shape \[\*, 2, 16, 128\], got \[6, 16, 2, 128\]",
        ),
        (
            dict(q=torch.zeros(B, HQ, 2 * D, dtype=torch.bfloat16)[:, :, ::2]),
            ValueError,
            r"last dimension of `q` must be contiguous \(stride 1\), got stride 2",
        ),
        (
            dict(kv_indices=torch.arange(5, dtype=torch.int64)),
            TypeError,
            r"`kv_indices` must have dtype int32, got int64",
        ),
        (dict(grid=5), ValueError, r"the plan launches 5 work rows but the table has 4"),
        (
            dict(merge_indptr=torch.zeros(2, dtype=torch.int32)),
            ValueError,
            r"`merge_indptr` must have at least 3 entries, got 2",
        ),
        (
            dict(lse=torch.zeros(B, HQ + 1)),
            ValueError,
            r"`lse` must have shape \[2, 8\], got \[2, 9\]",
        ),
        (
            dict(partial_lse=torch.zeros(3, HQ)),
            ValueError,
            r"`partial_lse` must have shape \[4, 8\], got \[3, 8\]",
        ),
        (
            dict(q=torch.zeros(B, HQ, D + 4, dtype=torch.bfloat16)[:, :, 4:]),
            ValueError,
            r"`q` must start 16-byte aligned with every stride but the last a multiple of 16",
        ),
        (
            # K/V strides must fit 31 bits (the lean tensor-core loop's addresses); one page
            # here, so the view needs no 2^31-element storage
            dict(k=ONE_PAGE.as_strided((1, PS, HK, D), (1 << 31, HK * D, D, 1)), v=ONE_PAGE),
            ValueError,
            r"`k_cache` strides must be in \[0, 2\^31\) elements, got stride\(0\) = 2147483648",
        ),
        (dict(k_scale=0.0), ValueError, r"k_scale and v_scale must be > 0"),
        (dict(), ValueError, r"`q` must be on a CUDA device, got cpu"),
    ],
)
def test_bad_inputs_raise_before_launch(changes: dict, err: type, pattern: str) -> None:
    with pytest.raises(err, match=pattern):
        call(**changes)


def test_python_level_errors() -> None:
    ws = decode.DecodeWorkspace("cpu", max_batch=2, num_qo_heads=HQ, head_dim=D)
    i32 = torch.int32
    plan = decode.plan_batch_decode(
        torch.tensor([0, 2, 5], dtype=i32),
        torch.arange(5, dtype=i32),
        torch.tensor([16, 3], dtype=i32),
        num_qo_heads=HQ,
        num_kv_heads=HK,
        head_dim=D,
        page_size=PS,
        workspace=ws,
    )
    q = torch.zeros(B, HQ, D, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"`plan` must be a DecodePlan, got dict"):
        decode.batch_decode(q, torch.zeros(1), {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`kv_cache` must be \[pages, 2, page_size, kv_heads"):
        decode.batch_decode(q, torch.zeros(PAGES, 3, PS, HK, D), plan)
    with pytest.raises(ValueError, match=r"as a sequence must be \(k, v\), got 3 items"):
        decode.batch_decode(q, (q, q, q), plan)


def append_args() -> dict[str, Any]:
    bf = torch.bfloat16
    i32 = torch.int32
    return dict(
        k_new=torch.zeros(3, HK, D, dtype=bf),
        v_new=torch.zeros(3, HK, D, dtype=bf),
        batch_indices=torch.tensor([0, 1, 1], dtype=i32),
        positions=torch.tensor([20, 40, 41], dtype=i32),
        k=torch.zeros(PAGES, PS, HK, D, dtype=bf),
        v=torch.zeros(PAGES, PS, HK, D, dtype=bf),
        kv_indices=torch.arange(5, dtype=i32),
        kv_indptr=torch.tensor([0, 2, 5], dtype=i32),
        hnd=False,
    )


@pytest.mark.parametrize(
    ("changes", "err", "pattern"),
    [
        (
            dict(k_new=torch.zeros(3, HK, D)),
            TypeError,
            r"`append_key` must have dtype bfloat16, got float32",
        ),
        (
            dict(v_new=torch.zeros(2, HK, D, dtype=torch.bfloat16)),
            ValueError,
            r"`append_value` must have the shape of `append_key` \[3, 2, 128\], got \[2, 2, 128\]",
        ),
        (
            dict(hnd=True),
            ValueError,
            r"`append_key` is \[3, 2, 128\] but the cache holds 16 kv heads of 128 \(HND cache",
        ),
        (
            dict(positions=torch.tensor([1, 2], dtype=torch.int32)),
            ValueError,
            r"`batch_indices` and `positions` must have 3 entries .* got 3 and 2",
        ),
        (
            dict(batch_indices=torch.tensor([0, 1, 1], dtype=torch.int64)),
            TypeError,
            r"`batch_indices` must have dtype int32, got int64",
        ),
        (dict(), ValueError, r"`k_cache` must be on a CUDA device, got cpu"),
    ],
)
def test_append_bad_inputs_raise_before_launch(changes: dict, err: type, pattern: str) -> None:
    args = append_args()
    args.update(changes)
    with pytest.raises(err, match=pattern):
        paged._paged().append(*args.values())


def test_append_layout_is_checked_in_python() -> None:
    with pytest.raises(ValueError, match=r"`layout` must be one of \('NHD', 'HND'\), got 'X'"):
        paged.append_paged_kv_cache(*list(append_args().values())[:4], None, None, None, layout="X")


@pytest.mark.parametrize(
    ("args", "err", "pattern"),
    [
        (
            (torch.zeros(2, 3, 4, 8, dtype=torch.int32), torch.zeros(2, 3, 4)),
            TypeError,
            r"`v` must be float32, float16 or bfloat16, got int32",
        ),
        (
            (torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 5)),
            ValueError,
            r"`s` must be \[2, 3, 4\] \(from `v` \[2, 3, 4, 8\]\), got \[2, 3, 5\]",
        ),
        (
            (torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 4, dtype=torch.float16)),
            TypeError,
            r"`s` must have dtype float32, got float16",
        ),
        (
            (torch.zeros(2, 0, 4, 8), torch.zeros(2, 0, 4)),
            ValueError,
            r"`v` must hold at least one state",
        ),
        (
            (torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 4)),
            ValueError,
            r"`v` must be on a CUDA device, got cpu",
        ),
    ],
)
def test_merge_states_bad_inputs_raise(args: tuple, err: type, pattern: str) -> None:
    with pytest.raises(err, match=pattern):
        paged.merge_states(*args)


def test_merge_states_bad_output_shape_raises() -> None:
    v, s = torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match=r"`v_out` must be \[2, 4, 8\], got \[2, 4, 9\]"):
        paged.merge_states(v, s, out=torch.zeros(2, 4, 9))


def test_plan_upload_validates_its_tables_before_touching_the_device() -> None:
    """The GPU planner entry (plan + copy in one call): every table is checked before any CUDA
    call, so a wrong workspace raises here, on a machine without a GPU."""
    from ember.testing import page_table

    mod = decode._decode_module("bf16", "bf16", 128, 4)
    indptr, last = page_table([40, 50], 16)
    ws = decode.DecodeWorkspace("cpu", max_batch=2, num_qo_heads=32, head_dim=128)
    args = [indptr, last, ws.host_tables, ws.tables, ws.max_work, 16, 8, -1, 264, 256, 7, 0]
    with pytest.raises(ValueError, match=r"`dev_tables` must be on a CUDA device, got cpu"):
        mod.plan_upload(*args)
    bad = list(args)
    bad[2] = ws.host_tables.long()
    with pytest.raises(TypeError, match=r"`host_tables` must have dtype int32, got int64"):
        mod.plan_upload(*bad)
