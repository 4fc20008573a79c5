"""Batch decode over a paged KV cache on the GPU against an fp64 reference (R4.1-R4.7).

Skipped, never failed, without a suitable GPU. Fresh random inputs, shuffled page indices,
ragged last pages; outputs poisoned with NaN before every launch.
"""

from __future__ import annotations

import random

import pytest
import torch

from ember.jit import KernelSpec
from ember.ops.decode import (
    DecodeWorkspace,
    batch_decode,
    decode_spec,
    plan_batch_decode,
    planner_spec,
)
from ember.ops.paged import paged_spec
from ember.testing import batch_decode_ref, page_table, requires

pytestmark = requires(feature="decode")

DT = torch.bfloat16
GROUP_CASES = [(8, 8), (16, 8), (32, 8), (64, 8), (12, 4)]  # (qo heads, kv heads)
HEAD_DIMS = [64, 128, 256]
FP8_CASES = [  # (head_dim, qo heads, q dtype), 8 kv heads
    (64, 32, torch.bfloat16),
    (128, 32, torch.bfloat16),
    (256, 32, torch.bfloat16),  # the CUDA-core kernel
    (128, 8, torch.float16),  # group 1, fp16 q (no query rescaling)
    (128, 64, torch.bfloat16),  # group 8: every query row of the MMA block used
]
FP8_EDGE_CASES = [(128, 32, torch.bfloat16, 16), (64, 64, torch.float16, 1)]  # + page size


def PREBUILD() -> list[KernelSpec]:  # noqa: N802 (tests/ops/conftest.py builds these ahead)
    """The modules the cases below load (bf16 q unless a case says otherwise)."""
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    keys = {("bf16", "bf16", d, hq // hk) for hq, hk in GROUP_CASES for d in HEAD_DIMS}
    keys |= {(name[q], "e4m3", d, hq // 8) for d, hq, q in FP8_CASES}
    keys |= {(name[q], "e4m3", d, hq // 8) for d, hq, q, _ in FP8_EDGE_CASES}
    return [planner_spec(), paged_spec(), *(decode_spec(*k) for k in sorted(keys))]


def make_cache(lengths, *, page_size, kv_heads, head_dim, layout="NHD", dtype=DT, seed=0):
    indptr, last = page_table(lengths, page_size)
    total = int(indptr[-1]) + 3  # spare pages that no request owns
    order = list(range(total))
    random.Random(seed).shuffle(order)
    indices = torch.tensor(order[: int(indptr[-1])], dtype=torch.int32)
    shape = (
        (total, 2, page_size, kv_heads, head_dim)
        if layout == "NHD"
        else (total, 2, kv_heads, page_size, head_dim)
    )
    cache = torch.randn(shape, device="cuda").to(dtype)
    return cache, indptr, indices, last


def run_case(
    lengths, *, page_size=16, qo_heads=32, kv_heads=8, head_dim=128, layout="NHD", ws=None, **opts
):
    cache, indptr, indices, last = make_cache(
        lengths, page_size=page_size, kv_heads=kv_heads, head_dim=head_dim, layout=layout
    )
    batch = len(lengths)
    ws = ws or DecodeWorkspace("cuda", max_batch=batch, num_qo_heads=qo_heads, head_dim=head_dim)
    plan = plan_batch_decode(
        indptr.cuda(),
        indices.cuda(),
        last.cuda(),
        num_qo_heads=qo_heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        page_size=page_size,
        workspace=ws,
        layout=layout,
        host_indptr=indptr,
        host_last_page_len=last,
        **opts,
    )
    q = torch.randn(batch, qo_heads, head_dim, device="cuda").to(DT)
    out = torch.full_like(q, float("nan"))
    got, lse = batch_decode(q, cache, plan, out=out, return_lse=True)
    assert got is out
    k, v = cache[:, 0], cache[:, 1]
    want, want_lse = batch_decode_ref(
        q,
        k,
        v,
        indptr.cuda(),
        indices.cuda(),
        last,
        layout=layout,
        sm_scale=opts.get("sm_scale"),
        logits_soft_cap=opts.get("logits_soft_cap", 0.0),
        window_left=opts.get("window_left", -1),
    )
    assert not torch.isnan(out).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lse, want_lse, rtol=1e-3, atol=1e-3)
    return plan


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page_size", [1, 16, 32])
def test_uniform_batch(layout, page_size):
    plan = run_case([300] * 8, page_size=page_size, layout=layout)
    assert plan.n_work >= 8


@pytest.mark.parametrize(("qo_heads", "kv_heads"), GROUP_CASES)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_groups_and_head_dims(qo_heads, kv_heads, head_dim):
    run_case([1, 17, 513], qo_heads=qo_heads, kv_heads=kv_heads, head_dim=head_dim)


def test_split_requests_are_merged():
    plan = run_case([32768, 5000], page_size=16)
    assert plan.n_partials > 0


def test_skewed_and_empty_requests():
    run_case([0, 1, 2, 15, 16, 17, 4000, 20000, 3], page_size=16)


def test_soft_cap_window_and_scale():
    run_case([1000, 77], logits_soft_cap=30.0, window_left=100, sm_scale=0.05)


def test_graph_replay_with_changed_lengths():
    ws = DecodeWorkspace("cuda", max_batch=4, num_qo_heads=32, head_dim=128, graph=True)
    cache, indptr, indices, last = make_cache([4096] * 4, page_size=16, kv_heads=8, head_dim=128)
    d_indptr, d_indices, d_last = indptr.cuda(), indices.cuda(), last.cuda()
    q = torch.randn(4, 32, 128, device="cuda").to(DT)
    out = torch.empty_like(q)

    def plan_for(lengths):
        h_ip, h_last = page_table(lengths, 16)
        d_indptr.copy_(h_ip)
        d_last.copy_(h_last)
        return plan_batch_decode(
            d_indptr,
            d_indices,
            d_last,
            num_qo_heads=32,
            num_kv_heads=8,
            head_dim=128,
            page_size=16,
            workspace=ws,
            host_indptr=h_ip,
            host_last_page_len=h_last,
        )

    plan = plan_for([4096] * 4)
    batch_decode(q, cache, plan, out=out)  # loads the module before capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        batch_decode(q, cache, plan, out=out)
    for lengths in ([4096, 1, 2000, 17], [30, 4000, 4096, 1]):
        plan_for(lengths)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        # each request now owns a prefix of the same shuffled page list
        want, _ = batch_decode_ref(q, cache[:, 0], cache[:, 1], d_indptr, d_indices, d_last)
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_append_writes_exactly_the_new_slots(layout):
    from ember import append_paged_kv_cache

    cache, indptr, indices, last = make_cache(
        [5, 33], page_size=16, kv_heads=2, head_dim=128, layout=layout
    )
    before = cache.clone()
    k_new = torch.randn(3, 2, 128, device="cuda").to(DT)
    v_new = torch.randn(3, 2, 128, device="cuda").to(DT)
    batch_indices = torch.tensor([0, 1, 1], dtype=torch.int32, device="cuda")
    positions = torch.tensor([4, 17, 32], dtype=torch.int32, device="cuda")
    append_paged_kv_cache(
        k_new,
        v_new,
        batch_indices,
        positions,
        cache,
        indices.cuda(),
        indptr.cuda(),
        last.cuda(),
        layout=layout,
    )
    expect = before.clone()
    ip = indptr.tolist()
    for i, (b, pos) in enumerate([(0, 4), (1, 17), (1, 32)]):
        page = int(indices[ip[b] + pos // 16])
        slot = pos % 16
        if layout == "NHD":
            expect[page, 0, slot], expect[page, 1, slot] = k_new[i], v_new[i]
        else:
            expect[page, 0, :, slot], expect[page, 1, :, slot] = k_new[i], v_new[i]
    assert torch.equal(cache, expect)  # the new slots, and nothing else


def test_append_past_the_pages_writes_nothing():
    from ember import append_paged_kv_cache

    cache, indptr, indices, last = make_cache([5], page_size=16, kv_heads=2, head_dim=128)
    before = cache.clone()
    new = torch.randn(1, 2, 128, device="cuda").to(DT)
    append_paged_kv_cache(
        new,
        new,
        torch.tensor([0], dtype=torch.int32, device="cuda"),
        torch.tensor([16], dtype=torch.int32, device="cuda"),
        cache,
        indices.cuda(),
        indptr.cuda(),
        last.cuda(),
    )
    assert torch.equal(cache, before)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_single_decode_matches_reference(layout):
    from ember.ops.decode import single_decode

    k = torch.randn(1000, 4, 128, device="cuda").to(DT)
    v = torch.randn(1000, 4, 128, device="cuda").to(DT)
    q = torch.randn(16, 128, device="cuda").to(DT)
    kk, vv = (
        (k, v)
        if layout == "NHD"
        else (k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous())
    )
    out, lse = single_decode(q, kk, vv, layout=layout, return_lse=True)
    # the same numbers through the paged reference: one page of 1000 slots
    i32 = torch.int32
    want, want_lse = batch_decode_ref(
        q[None],
        k[None],
        v[None],
        torch.tensor([0, 1], dtype=i32),
        torch.zeros(1, dtype=i32),
        torch.tensor([1000], dtype=i32),
    )
    torch.testing.assert_close(out.float(), want[0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lse, want_lse[0], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("head_dim", "qo_heads", "q_dtype"), FP8_CASES, ids=str)
def test_fp8_kv_matches_reference(head_dim, qo_heads, q_dtype):
    cache, indptr, indices, last = make_cache(
        [700, 3000], page_size=16, kv_heads=8, head_dim=head_dim
    )
    cache8 = cache.to(torch.float8_e4m3fn)
    ws = DecodeWorkspace("cuda", max_batch=2, num_qo_heads=qo_heads, head_dim=head_dim)
    plan = plan_batch_decode(
        indptr.cuda(),
        indices.cuda(),
        last.cuda(),
        num_qo_heads=qo_heads,
        num_kv_heads=8,
        head_dim=head_dim,
        page_size=16,
        workspace=ws,
        kv_dtype="e4m3",
        q_dtype=q_dtype,
        k_scale=0.5,
        v_scale=2.0,
        host_indptr=indptr,
        host_last_page_len=last,
    )
    q = torch.randn(2, qo_heads, head_dim, device="cuda").to(q_dtype)
    out = batch_decode(q, cache8, plan, out=torch.full_like(q, float("nan")))
    want, _ = batch_decode_ref(
        q,
        cache8[:, 0].float(),
        cache8[:, 1].float(),
        indptr.cuda(),
        indices.cuda(),
        last,
        k_scale=0.5,
        v_scale=2.0,
    )
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    ("head_dim", "qo_heads", "q_dtype", "page_size"),
    FP8_EDGE_CASES,
    ids=str,
)
def test_fp8_kv_tile_edges(head_dim, qo_heads, q_dtype, page_size):
    # lengths on both sides of the fp8 kernel's 64- and 128-token tiles (EMBER_DECODE_FP8_WT
    # 16 / 32) and of a 16-token warp block, so every masked tail and a lone token are covered;
    # the LSE too, as the merge of split units reads it
    lengths = [1, 17, 64, 65, 127, 128, 129, 300, 4097]
    cache, indptr, indices, last = make_cache(
        lengths, page_size=page_size, kv_heads=8, head_dim=head_dim, seed=3
    )
    cache8 = cache.to(torch.float8_e4m3fn)
    b = len(lengths)
    ws = DecodeWorkspace("cuda", max_batch=b, num_qo_heads=qo_heads, head_dim=head_dim)
    plan = plan_batch_decode(
        indptr.cuda(), indices.cuda(), last.cuda(), num_qo_heads=qo_heads, num_kv_heads=8,
        head_dim=head_dim, page_size=page_size, workspace=ws, kv_dtype="e4m3", q_dtype=q_dtype,
        k_scale=0.75, v_scale=1.5, host_indptr=indptr, host_last_page_len=last,
    )  # fmt: skip
    q = torch.randn(b, qo_heads, head_dim, device="cuda").to(q_dtype)
    out, lse = batch_decode(q, cache8, plan, out=torch.full_like(q, float("nan")), return_lse=True)
    want, want_lse = batch_decode_ref(
        q, cache8[:, 0].float(), cache8[:, 1].float(), indptr.cuda(), indices.cuda(), last,
        k_scale=0.75, v_scale=1.5,
    )  # fmt: skip
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lse, want_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("states", "dim"), [(1, 64), (2, 128), (3, 128), (5, 128), (40, 64), (2, 100), (3, 300)]
)
def test_merge_states_matches_the_math(dtype, states, dim):
    # merge_states_vec_kernel on aligned dims: 1-2 states in its two-state form, 3, 5 and 40 in
    # batches of four (a partial last batch); dim 100 (not whole 16-byte packs) and 300 (over
    # 32 packs) take merge_states_kernel: a partial last lane slice, the strided path
    from ember import merge_states

    v = torch.randn(5, states, 4, dim, device="cuda").to(dtype)
    s = torch.randn(5, states, 4, device="cuda") * 4
    s[0, :, 0] = float("-inf")  # a row with no keys at all
    s[1, states - 1, :] = float("-inf")  # one empty state (the only one, with one state)
    out = torch.full((5, 4, dim), float("nan"), device="cuda", dtype=dtype)
    got, lse = merge_states(v, s, out=out)
    want_lse = torch.logsumexp(s.double(), dim=1)
    w = torch.nan_to_num(torch.exp(s.double() - want_lse[:, None]), nan=0.0)
    want = (w[..., None] * v.double()).sum(1)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
    torch.testing.assert_close(lse.double(), want_lse, rtol=1e-5, atol=1e-5)


def test_merge_state_of_two_halves_equals_attention_over_both():
    from ember import merge_state, single_decode

    k = torch.randn(2000, 4, 128, device="cuda").to(DT)
    v = torch.randn(2000, 4, 128, device="cuda").to(DT)
    q = torch.randn(16, 128, device="cuda").to(DT)
    oa, sa = single_decode(q, k[:700], v[:700], return_lse=True)
    ob, sb = single_decode(q, k[700:], v[700:], return_lse=True)
    o, s = merge_state(oa[None].float(), sa[None], ob[None].float(), sb[None])
    full, full_lse = single_decode(q, k, v, return_lse=True)
    torch.testing.assert_close(o[0], full.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(s[0], full_lse, rtol=1e-4, atol=1e-4)
