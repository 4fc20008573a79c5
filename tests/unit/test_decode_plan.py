"""The batch-decode planner on the CPU (R3 plan/run, R4: bad inputs raise before any launch).

The planner is a host module, so CI builds and runs it here; what is checked is the contract
the decode kernels rely on: every attended token of every request is covered exactly once, in
order, by its request's units; split requests own consecutive partial slots that
``merge_indptr`` points at; small batches are split to fill the GPU and large ones are not.
"""

from __future__ import annotations

import itertools
import random

import pytest

torch = pytest.importorskip("torch")

from ember.ops.decode import (  # noqa: E402
    MIN_CHUNK,
    DecodeWorkspace,
    kv_lengths,
    plan_batch_decode,
)
from ember.testing import page_table as make_page_table  # noqa: E402


def page_table(lengths: list[int], page_size: int, *, seed: int = 0) -> tuple:
    """(indptr, shuffled indices, last_page_len) for requests of ``lengths`` tokens."""
    indptr, last = make_page_table(lengths, page_size)
    order = list(range(int(indptr[-1])))
    random.Random(seed).shuffle(order)
    return indptr, torch.tensor(order, dtype=torch.int32), last


def make_plan(
    lengths: list[int],
    *,
    page_size: int = 16,
    kv_heads: int = 8,
    group: int = 4,
    window_left: int = -1,
    ws: DecodeWorkspace | None = None,
    **kw,
) -> object:
    indptr, indices, last = page_table(lengths, page_size)
    ws = ws or DecodeWorkspace(
        "cpu", max_batch=max(1, len(lengths)), num_qo_heads=kv_heads * group, head_dim=128
    )
    return plan_batch_decode(
        indptr,
        indices,
        last,
        num_qo_heads=kv_heads * group,
        num_kv_heads=kv_heads,
        head_dim=128,
        page_size=page_size,
        workspace=ws,
        window_left=window_left,
        **kw,
    )


def check_cover(plan, lengths: list[int], window_left: int = -1) -> None:
    units: dict[int, list[tuple[int, int, int]]] = {}
    for req, start, end, slot in plan.work_table():
        units.setdefault(req, []).append((start, end, slot))
    merge = plan.workspace.host_merge[: plan.batch + 1].tolist()
    assert merge[0] == 0
    for b, n in enumerate(lengths):
        first = max(0, n - 1 - window_left) if window_left >= 0 else 0
        us = units[b]
        assert us[0][0] == first and us[-1][1] == n, (b, us)
        for (s0, e0, _), (s1, _, _) in itertools.pairwise(us):
            assert e0 == s1 and s0 < e0
        slots = [s for _, _, s in us]
        if len(us) == 1:
            assert slots == [-1] and merge[b + 1] == merge[b]
        else:
            assert slots == list(range(merge[b], merge[b + 1]))
    assert sorted(units) == list(range(len(lengths)))
    assert plan.n_partials == merge[plan.batch]


@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_uniform_large_batch_is_not_split(page_size: int) -> None:
    lengths = [4096] * 64  # 64 requests x 8 kv heads = 512 CTAs >= 2 x 132
    plan = make_plan(lengths, page_size=page_size)
    assert plan.n_work == 64 and plan.chunk == 0 and plan.n_partials == 0
    check_cover(plan, lengths)
    assert plan.lengths == lengths


def test_small_batch_is_split_to_fill_the_gpu_within_one_wave() -> None:
    lengths = [32768] * 4
    plan = make_plan(lengths)
    ws = plan.workspace
    assert plan.chunk % 16 == 0 and plan.chunk >= MIN_CHUNK
    assert plan.n_work * 8 <= ws.target_ctas  # one wave
    assert plan.n_work * 8 > ws.target_ctas // 2  # and more than half of it
    check_cover(plan, lengths)


def makespan(plan, kv_heads: int, slots: int) -> int:
    """Tokens the busiest of ``slots`` CTA slots streams when the plan's CTAs (heads fastest)
    start in order on the first free slot: what the hardware's block scheduler does."""
    free = [0] * slots
    for _, start, end, _ in plan.work_table():
        for _ in range(kv_heads):
            i = free.index(min(free))
            free[i] += end - start + 64
    return max(free)


def test_quantised_uniform_batch_is_split_into_fuller_waves() -> None:
    # 40 x 8 = 320 CTAs are 1.2 waves of 264: unsplit, the second wave runs almost empty.
    lengths = [4096] * 40
    plan = make_plan(lengths)
    check_cover(plan, lengths)
    assert plan.n_partials > 0
    ideal = sum(lengths) * 8 / plan.workspace.target_ctas
    assert makespan(plan, 8, plan.workspace.target_ctas) < 1.25 * ideal
    assert 1.5 * ideal < 2 * 4096  # unsplit it would be 2 waves of 4096


def test_skewed_large_batch_is_balanced_longest_first() -> None:
    # The harness's Pareto batch: 64 x 8 heads already fill the GPU, but the longest requests
    # alone outlast an SM's share, so they are cut and started first.
    from ember.bench.routines.decode import decode_lengths

    lengths = decode_lengths(64, 4096, "pareto")
    plan = make_plan(lengths)
    check_cover(plan, lengths)
    slots = plan.workspace.target_ctas
    ideal = sum(lengths) * 8 / slots
    assert max(lengths) > 1.5 * ideal  # unsplit, the longest request sets the time
    assert makespan(plan, 8, slots) < 1.2 * ideal
    sizes = [e - s for _, s, e, _ in plan.work_table()]
    assert sizes[0] == max(sizes) and sizes[0] >= sizes[-1]


def test_skewed_lengths_split_only_the_long_requests() -> None:
    rng = random.Random(3)
    lengths = [min(32768, int(64 * rng.paretovariate(1.2))) for _ in range(16)] + [40000]
    plan = make_plan(lengths, kv_heads=4)
    check_cover(plan, lengths)
    per_request = [sum(1 for r in plan.work_table() if r[0] == b) for b in range(len(lengths))]
    assert per_request[-1] > 1  # the longest one is split
    assert all(
        n == 1 for n, length in zip(per_request, lengths, strict=True) if length <= plan.chunk
    )


@pytest.mark.parametrize("page_size", [1, 16, 32])
def test_random_batches_are_covered_exactly(page_size: int) -> None:
    rng = random.Random(page_size)
    for _ in range(20):
        lengths = [
            rng.choice([0, 1, 2, 17, 255, 1000, 4097, 20000]) for _ in range(rng.randint(1, 40))
        ]
        check_cover(
            make_plan(lengths, page_size=page_size, kv_heads=rng.choice([1, 2, 8])), lengths
        )


def test_sliding_window_plans_only_the_window() -> None:
    lengths = [5000, 10, 300]
    plan = make_plan(lengths, window_left=127)
    check_cover(plan, lengths, window_left=127)
    assert sum(e - s for _, s, e, _ in plan.work_table()) == 128 + 10 + 128


def test_graph_workspace_launches_its_capacity_and_pads_the_tables() -> None:
    ws = DecodeWorkspace("cpu", max_batch=8, num_qo_heads=32, head_dim=128, graph=True)
    plan = make_plan([100, 20000], ws=ws)
    assert plan.grid == ws.max_work
    rows = ws.host_work.tolist()
    assert all(r == [-1, 0, 0, -1] for r in rows[plan.n_work :])
    merge = ws.host_merge.tolist()
    assert merge[3:] == [merge[2]] * (len(merge) - 3)  # requests past the batch merge nothing
    # a later plan rewrites the same buffers
    before = ws.host_work.data_ptr()
    make_plan([7] * 8, ws=ws)
    assert ws.host_work.data_ptr() == before and ws.host_work[0].tolist() == [0, 0, 7, -1]


def test_plan_is_immutable() -> None:
    plan = make_plan([10])
    with pytest.raises(AttributeError):
        plan.batch = 3  # type: ignore[misc]


def test_kv_lengths() -> None:
    indptr, _, last = page_table([0, 1, 16, 17], 16)
    assert kv_lengths(indptr, last, 16) == [0, 1, 16, 17]


# --- bad inputs: a clear exception naming the argument, expected and actual value (R4) --------


def _args(lengths=(40, 50), page_size=16):
    return page_table(list(lengths), page_size)


def _plan(indptr, indices, last, **kw):
    opts = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16)
    opts.update(kw)
    ws = kw.pop("workspace", None) or DecodeWorkspace(
        "cpu", max_batch=4, num_qo_heads=opts["num_qo_heads"], head_dim=opts["head_dim"]
    )
    opts["workspace"] = ws
    return plan_batch_decode(indptr, indices, last, **opts)


def test_non_monotonic_indptr_raises() -> None:
    indptr, indices, last = _args()
    indptr[1] = 9  # 0, 9, 7
    with pytest.raises(
        ValueError, match=r"kv_indptr.*non-decreasing.*kv_indptr\[2\] = 7 < kv_indptr\[1\] = 9"
    ):
        _plan(indptr, indices, last)


def test_indptr_not_starting_at_zero_raises() -> None:
    indptr, indices, last = _args()
    with pytest.raises(ValueError, match=r"kv_indptr\[0\]` must be 0, got 1"):
        _plan(indptr + 1, indices, last)


def test_last_page_len_out_of_range_raises() -> None:
    indptr, indices, last = _args()
    last[1] = 17
    with pytest.raises(
        ValueError, match=r"kv_last_page_len\[1\]` must be in \[1, page_size=16\].*got 17"
    ):
        _plan(indptr, indices, last)


def test_indptr_length_mismatch_raises() -> None:
    indptr, indices, last = _args()
    with pytest.raises(ValueError, match=r"kv_indptr` must have batch \+ 1 = 3 entries.*got 2"):
        _plan(indptr[:2], indices, last)


def test_too_few_indices_raises() -> None:
    indptr, indices, last = _args()
    with pytest.raises(ValueError, match=r"kv_indptr\[-1\]` = 7 pages but `kv_indices` has 5"):
        _plan(indptr, indices[:5], last)


@pytest.mark.parametrize(
    "kw, err, pattern",
    [
        (
            dict(num_qo_heads=30),
            ValueError,
            r"num_qo_heads` must be a multiple of num_kv_heads=8, got 30",
        ),
        (dict(num_qo_heads=80, num_kv_heads=8), ValueError, r"group .* must be 1-8, got 10"),
        (dict(num_kv_heads=0), ValueError, r"num_kv_heads` must be an int >= 1, got 0"),
        (dict(head_dim=96), ValueError, r"head_dim` must be 64, 128 or 256, got 96"),
        (dict(page_size=0), ValueError, r"page_size` must be an int >= 1, got 0"),
        (dict(layout="NDH"), ValueError, r"layout` must be one of \('NHD', 'HND'\), got 'NDH'"),
        (dict(q_dtype="fp32"), TypeError, r"q_dtype` must be one of \('bf16', 'fp16'\), got fp32"),
        (dict(kv_dtype="fp16"), TypeError, r"kv_dtype` must be q_dtype \(bf16\) or e4m3, got fp16"),
        (dict(sm_scale=-1.0), ValueError, r"sm_scale` must be finite and > 0, got -1.0"),
        (
            dict(logits_soft_cap=float("nan")),
            ValueError,
            r"logits_soft_cap` must be finite and >= 0",
        ),
        (dict(window_left=-2), ValueError, r"window_left` must be -1 or an int >= 0, got -2"),
        (dict(k_scale=0.0), ValueError, r"k_scale` must be finite and > 0, got 0.0"),
    ],
)
def test_bad_options_raise(kw, err, pattern) -> None:
    indptr, indices, last = _args()
    with pytest.raises(err, match=pattern):
        _plan(indptr, indices, last, **kw)


def test_wrong_index_dtype_raises() -> None:
    indptr, indices, last = _args()
    with pytest.raises(TypeError, match=r"kv_indptr` must have dtype int32, got int64"):
        _plan(indptr.long(), indices, last)


def test_batch_larger_than_workspace_raises() -> None:
    indptr, indices, last = page_table([5] * 6, 16)
    with pytest.raises(ValueError, match=r"the batch has 6 requests but the workspace holds 4"):
        _plan(indptr, indices, last)


def test_workspace_mismatch_raises() -> None:
    indptr, indices, last = _args()
    ws = DecodeWorkspace("cpu", max_batch=4, num_qo_heads=16, head_dim=128)
    with pytest.raises(ValueError, match=r"workspace was made for num_qo_heads=16"):
        _plan(indptr, indices, last, workspace=ws)


def test_small_work_table_limits_the_split() -> None:
    ws = DecodeWorkspace(
        "cpu", max_batch=4, num_qo_heads=32, head_dim=128, max_work=4, sm_count=132
    )
    lengths = [32768] * 2
    indptr, indices, last = page_table(lengths, 16)
    plan = _plan(indptr, indices, last, workspace=ws)
    assert 2 <= plan.n_work <= 4
    check_cover(plan, lengths)


def test_work_table_smaller_than_the_batch_raises() -> None:
    from ember.ops.decode import _planner

    indptr, _, last = page_table([5] * 3, 16)
    work = torch.empty(2, 4, dtype=torch.int32)
    merge = torch.empty(4, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"the plan needs 3 work units but the workspace holds 2"):
        _planner().plan(indptr, last, work, merge, 16, 8, -1, 264, 256, 2, 3)


@pytest.mark.parametrize(
    "kw, pattern",
    [
        (dict(max_batch=0), r"max_batch` must be an int >= 1, got 0"),
        (
            dict(max_batch=8, max_work=4),
            r"max_work` must be an int in \[max_batch \(8\), 65535\], got 4",
        ),
        (dict(max_batch=8, max_work=70000), r"got 70000"),
    ],
)
def test_bad_workspace_raises(kw, pattern) -> None:
    opts = dict(num_qo_heads=32, head_dim=128)
    opts.update(kw)
    with pytest.raises(ValueError, match=pattern):
        DecodeWorkspace("cpu", **opts)


def test_validated_options_are_cached_without_letting_a_bad_value_through() -> None:
    indptr, indices, last = _args()
    _plan(indptr, indices, last)  # valid: cached
    with pytest.raises(ValueError, match=r"page_size` must be an int >= 1, got 16.0"):
        _plan(indptr, indices, last, page_size=16.0)
    with pytest.raises(ValueError, match=r"sm_scale` must be finite and > 0, got -1.0"):
        _plan(indptr, indices, last, sm_scale=-1.0)
    with pytest.raises(ValueError, match=r"page_size` must be an int >= 1"):
        _plan(indptr, indices, last, page_size=[16])  # unhashable: still a clear error
