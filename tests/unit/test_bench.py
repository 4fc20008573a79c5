"""The bench harness on a CPU: statistics, planning, rows, table, registry, CLI (R4.10-R4.16).

GPU timing cannot run here; the routines run end to end on CPU tensors with a fake timer, so the
reference check, skip/failure rows and reproduce commands are exercised for real.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import ember
from ember.bench import ceilings, host, report, routines, timing
from ember.bench.case import Impl, check_outputs, parse_dtype, parse_shape
from ember.bench.errors import TimingError
from ember.bench.harness import (
    PROG,
    BenchContext,
    Environment,
    build_parser,
    collect_rows,
    ember_commit,
    main,
)
from ember.bench.routines import norm
from ember.cli import _split_bench
from ember.cli import main as ember_main

REPO = Path(__file__).resolve().parents[2]

ENV = Environment(
    device="Fake GPU",
    arch="sm_90",
    l2_bytes=60 << 20,
    torch="2.x",
    cuda="13.0",
    ember_commit="abc1234",
    date="2026-12-02T00:00:00+00:00",
    free_bytes=8 << 20,
)


class FakeTimer:
    """Stands in for timing.measure / host.host_times_interleaved: runs each call once, fixed
    stats."""

    def __init__(self, samples: Sequence[float] = (10.0, 12.0, 11.0)) -> None:
        self.samples = list(samples)
        self.runs: list[dict[str, Any]] = []

    def __call__(self, work: Any, /, **kwargs: Any) -> Any:
        mechanism = kwargs.get("mechanism", host.HOST_MECHANISM)
        m = timing.Measurement(timing.summarize(self.samples), mechanism)
        if isinstance(work, dict):  # NOTE: host.host_times_interleaved: one result per key
            for c in work.values():
                c()
            self.runs.append({"n_sets": 1, "group": len(work), **kwargs})
            return dict.fromkeys(work, m)
        work = work if isinstance(work, list) else [work]
        for c in work:
            c()
        self.runs.append({"n_sets": len(work), **kwargs})
        return m


def run(argv: list[str], timer: FakeTimer | None = None, **ctx: Any) -> list[report.Row]:
    """Parse ``argv`` like the CLI and run the routine on CPU tensors with a fake timer."""
    args = build_parser().parse_args(argv)
    r = routines.get_routine(args.routine)
    fake = timer or FakeTimer()
    context = BenchContext.from_args(
        r,
        args,
        ENV,
        device="cpu",
        timer=fake,
        host_timer=fake,
        **({"mechanism": "cuda_event"} | ctx) if r.timer == "device" else ctx,
    )
    rows = context.run_cases(r.run(context, args))
    report.mark_best(rows)
    return rows


@pytest.fixture
def no_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer and Liger are not importable, whatever is installed."""
    for name in ("flashinfer", "flashinfer.norm", "liger_kernel", "liger_kernel.ops.rms_norm"):
        monkeypatch.setitem(sys.modules, name, None)


# --- statistics and planning ---------------------------------------------------------------------


def test_summarize_median_std_min() -> None:
    s = timing.summarize([4.0, 1.0, 3.0, 2.0])
    assert (s.median_us, s.min_us, s.mean_us, s.iters) == (2.5, 1.0, 2.5, 4)
    assert s.std_us == pytest.approx(math.sqrt(5 / 3))  # sample std, n - 1
    one = timing.summarize([7.0])
    assert (one.median_us, one.std_us, one.iters) == (7.0, 0.0, 1)
    for bad in ([], [1.0, -1.0], [math.nan]):
        with pytest.raises(ValueError):
            timing.summarize(bad)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_warm_up_runs_for_its_time_and_ignores_a_slow_first_call() -> None:
    clock = FakeClock()
    steps: list[int] = []
    syncs: list[float] = []

    def step(i: int) -> None:
        steps.append(i)
        clock.now += 0.100 if i == 0 else 0.001  # the first call compiles

    per_step = timing.warm_up(step, lambda: syncs.append(clock.now), 0.025, clock=clock)
    assert per_step == pytest.approx(0.001)
    assert steps == list(range(len(steps)))  # indices advance, so rotation cycles
    assert len(syncs) >= 2  # a sync closes every batch


def test_warm_up_estimate_comes_from_the_last_batch() -> None:
    clock = FakeClock()

    def step(i: int) -> None:
        clock.now += 0.002

    assert timing.warm_up(step, lambda: None, 0.050, clock=clock) == pytest.approx(0.002)


def test_plan_iters_targets_the_budget_within_bounds() -> None:
    cfg = timing.TimingConfig(min_iters=100, budget_ms=500, max_iters=10_000)
    assert timing.plan_iters(0.001, cfg) == 500
    assert timing.plan_iters(1e-6, cfg) == 10_000
    assert timing.plan_iters(0.050, cfg) == 100
    assert timing.plan_iters(0.0, cfg) == 10_000


def test_timing_config_rejects_nonsense() -> None:
    with pytest.raises(ember.EmberError):
        timing.TimingConfig(min_iters=10, max_iters=5)
    with pytest.raises(ember.EmberError):
        timing.TimingConfig(l2="lukewarm")


def test_plan_l2_rotates_flushes_or_stays_warm() -> None:
    l2 = 60 << 20
    big = timing.plan_l2(256 << 20, l2)
    assert (big.sets, big.flush_bytes) == (1, 0) and "one set" in big.label
    mid = timing.plan_l2(2 << 20, l2)
    assert (mid.sets, mid.flush_bytes) == (90, 0)  # 90 x 2 MiB = 3 x 60 MiB
    assert mid.label.startswith("rotate 90 sets")
    tiny = timing.plan_l2(4 << 10, l2)  # would need 46 080 sets
    assert (tiny.sets, tiny.flush_bytes) == (1, 2 * l2) and "flush 120 MiB" in tiny.label
    capped = timing.plan_l2(2 << 20, l2, cap_bytes=64 << 20)  # rotation would not fit in memory
    assert capped.flush_bytes == 2 * l2
    warm = timing.plan_l2(2 << 20, l2, policy="warm")
    assert (warm.sets, warm.flush_bytes) == (1, 0)


def test_cupti_records_become_per_call_device_time() -> None:
    brackets = [(100, 200), (300, 400)]
    # (host start, correlation id) of API records; 1 and 3 launched kernels, 2 is a query
    launches = [(110, 1), (150, 2), (310, 3), (320, 3), (500, 9)]
    work = {1: 4_000, 3: 2_500, 9: 99_000}  # ns; 9 falls outside every bracket
    assert timing.kernel_time_per_bracket(brackets, launches, work) == [4.0, 2.5]
    with pytest.raises(TimingError, match="no device work"):
        timing.kernel_time_per_bracket([(600, 700)], launches, work)


def test_host_time_is_wall_time_per_call() -> None:
    clock = FakeClock()
    calls: list[int] = []
    syncs: list[int] = []

    def fn() -> None:
        calls.append(1)
        clock.now += 5e-6

    m = host.host_time_per_call(
        fn, calls=1000, rounds=3, warmup=10, sync=lambda: syncs.append(1), clock=clock
    )
    assert m.mechanism == "host_wall"
    assert m.stats.median_us == pytest.approx(5.0)
    assert m.stats.iters == 3000
    assert len(calls) == 3010 and len(syncs) == 4  # one sync after warm-up, one per round


def test_host_times_of_several_callables_interleave_their_rounds() -> None:
    clock = FakeClock()
    order: list[str] = []

    def make(name: str, us: float) -> Any:
        def fn() -> None:
            order.append(name)
            clock.now += us * 1e-6

        return fn

    got = host.host_times_interleaved(
        {"a": make("a", 2.0), "b": make("b", 7.0)},
        calls=3,
        rounds=2,
        warmup=1,
        sync=lambda: None,
        clock=clock,
    )
    # warm-up a, b; then round 1: a a a b b b; round 2: a a a b b b (R4: drift hits both alike)
    assert "".join(order) == "ab" + "aaabbb" * 2
    assert got["a"].stats.median_us == pytest.approx(2.0)
    assert got["b"].stats.median_us == pytest.approx(7.0)
    assert got["a"].stats.iters == 6 and "interleaved with 1 other" in got["a"].detail
    with pytest.raises(ValueError, match="calls and rounds"):
        host.host_times_interleaved({"a": make("a", 1.0)}, calls=0, sync=lambda: None)


# --- reference check -----------------------------------------------------------------------------


def test_check_outputs_tolerance_nan_and_shape() -> None:
    import torch

    ref = torch.tensor([1.0, 2.0, 4.0])
    assert check_outputs([ref + 1e-3], [ref], rtol=1e-2, atol=0).passed
    bad = check_outputs([ref * 1.1], [ref], rtol=1e-2, atol=0)
    assert not bad.passed and "3/3 elements" in bad.detail
    assert bad.rel_l2_err == pytest.approx(0.1)
    nan = check_outputs([torch.tensor([1.0, math.nan, 4.0])], [ref], rtol=1, atol=1)
    assert not nan.passed and "NaN" in nan.detail
    assert not check_outputs([ref[:2]], [ref], rtol=1, atol=1).passed
    assert not check_outputs([None], [ref], rtol=1, atol=1).passed


# --- routines end to end on CPU ------------------------------------------------------------------


def test_rmsnorm_rows_are_checked_timed_and_complete(no_peers: None) -> None:
    timer = FakeTimer()
    rows = run(
        ["rmsnorm", "--backends", "torch", "--shapes", "4x64,2x3x32", "--dtypes", "bf16,fp32"],
        timer,
    )
    assert [(r.shape, r.dtype) for r in rows] == [
        ("4x64", "bf16"),
        ("4x64", "fp32"),
        ("2x3x32", "bf16"),
        ("2x3x32", "fp32"),
    ]
    r = rows[0]
    assert (r.status, r.refcheck, r.timing, r.backend, r.variant) == (
        "ok",
        "passed",
        "cuda_event",
        "torch",
        "default",
    )
    assert (r.median_us, r.min_us, r.iters) == (11.0, 10.0, 3)
    assert r.bytes == 2 * 4 * 64 * 2 + 64 * 2  # x read + out written + weight read
    assert r.gbps == pytest.approx(r.bytes / 11.0 / 1e3)
    assert r.pct_of_copy_ceiling is None  # no ceilings in this context
    assert (r.arch, r.device, r.ember_commit) == ("sm_90", "Fake GPU", "abc1234")
    assert r.ref_max_abs_err is not None and r.ref_max_abs_err <= 1.6e-2 * 8
    assert r.best and r.params == {"eps": 1e-6}
    assert len(timer.runs) == 4


def test_fused_add_rmsnorm_checks_both_in_place_outputs(no_peers: None) -> None:
    rows = run(["fused_add_rmsnorm", "--backends", "torch,liger", "--shapes", "8x128"])
    torch_row, liger_row = rows
    assert torch_row.status == "ok" and torch_row.refcheck == "passed"
    assert torch_row.bytes == 4 * 8 * 128 * 2 + 128 * 2
    assert liger_row.status == "skipped: Liger has no fused add + rmsnorm"


def test_missing_backends_are_skipped_rows_not_crashes(no_peers: None) -> None:
    timer = FakeTimer()
    rows = run(["rmsnorm", "--backends", "flashinfer,liger", "--shapes", "4x64"], timer)
    assert [r.label for r in rows] == ["flashinfer", "flashinfer[pdl]", "liger"]
    for r in rows:
        assert r.status.startswith("skipped: ") and "not importable" in r.status
        assert r.median_us is None and r.timing is None and r.refcheck == "n/a"
        assert not r.ok and not r.best
    assert timer.runs == []
    table = report.markdown_table(rows)
    assert table.count("skipped: flashinfer is not importable") == 2


def test_a_wrong_backend_fails_its_check_and_is_not_timed(
    no_peers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def off_by_a_bit(op: str, variant: str, eps: float) -> Impl:
        return Impl(
            "torch",
            variant,
            lambda i: functools.partial(lambda x, w: norm.torch_rmsnorm(x, w, eps) * 1.1, *[
                i["x"], i["weight"]
            ]),
        )  # fmt: skip

    monkeypatch.setitem(norm.BUILDERS, "torch", off_by_a_bit)
    timer = FakeTimer()
    (row,) = run(["rmsnorm", "--backends", "torch", "--shapes", "4x64", "--dtypes", "fp32"], timer)
    assert row.status == report.STATUS_REFCHECK_FAILED and row.refcheck == "failed"
    assert row.median_us is None and timer.runs == []
    assert any("outside tolerance" in n for n in row.notes)
    assert "REFCHECK FAILED" in report.markdown_table([row])


def test_no_refcheck_is_recorded_and_still_timed(no_peers: None) -> None:
    (row,) = run(["rmsnorm", "--backends", "torch", "--shapes", "4x64", "--no-refcheck"])
    assert row.refcheck == "off" and row.status == "ok" and row.median_us == 11.0
    assert row.cmd.endswith("--no-refcheck")


def test_ember_backend_uses_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def fake_rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None) -> Any:
        seen.append({"eps": eps, "out": None if out is None else bool(out.isnan().all())})
        y = norm.torch_rmsnorm(x, weight, eps)
        if out is None:
            return y
        out.copy_(y)
        return out

    def fake_fused(x: Any, residual: Any, weight: Any, eps: float = 1e-6) -> None:
        norm.torch_fused_add_rmsnorm(x, residual, weight, eps)

    monkeypatch.setattr(ember, "rmsnorm", fake_rmsnorm, raising=False)
    monkeypatch.setattr(ember, "fused_add_rmsnorm_", fake_fused, raising=False)
    rows = run(["rmsnorm", "--backends", "ember", "--shapes", "4x64", "--eps", "1e-5"])
    assert [(r.label, r.status) for r in rows] == [("ember", "ok"), ("ember[out]", "ok")]
    # default: check + one timed call, no out; out: each input set gets a NaN-poisoned buffer
    assert seen == [
        {"eps": 1e-5, "out": None},
        {"eps": 1e-5, "out": None},
        {"eps": 1e-5, "out": True},
        {"eps": 1e-5, "out": True},
    ]
    (fused,) = run(["fused_add_rmsnorm", "--backends", "ember", "--shapes", "4x64"])
    assert fused.status == "ok" and fused.refcheck == "passed"


def test_ab_build_rows_name_their_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    # R4.16: a row timed on a build with EMBER_EXTRA_CUDA_FLAGS says so, and its command rebuilds
    # it; the switches only touch ember's kernels, so peers' rows carry none
    monkeypatch.setattr(
        ember, "rmsnorm", lambda x, w, eps=1e-6, *, out=None: norm.torch_rmsnorm(x, w, eps),
        raising=False,
    )  # fmt: skip
    monkeypatch.setenv("EMBER_EXTRA_CUDA_FLAGS", "-DEMBER_X=1 -DEMBER_Y=2")
    rows = run(["rmsnorm", "--backends", "ember[default],torch", "--shapes", "4x64"])
    mine, peer = rows
    assert mine.build == "-DEMBER_X=1 -DEMBER_Y=2"
    assert mine.label == "ember {-DEMBER_X=1 -DEMBER_Y=2}"
    assert mine.cmd.startswith("EMBER_EXTRA_CUDA_FLAGS='-DEMBER_X=1 -DEMBER_Y=2' python -m ember")
    assert peer.build == "" and peer.cmd.startswith("python -m ember")
    monkeypatch.delenv("EMBER_EXTRA_CUDA_FLAGS")
    (plain,) = run(["rmsnorm", "--backends", "ember[default]", "--shapes", "4x64"])
    assert plain.build == "" and plain.cmd.startswith("python -m ember")


def test_ab_builds_are_neither_ember_nor_its_peers() -> None:
    ab = _row("ember", "default", 60.0, build="-DEMBER_X=0")
    rows = [_row("ember", "default", 80.0), _row("torch_compile", "default", 100.0), ab]
    assert report.comparison_lines(rows) == [
        "- rmsnorm 8192x8192 bf16: best peer torch_compile 100.0 µs; ember 80.00 µs; "
        "ember/best peer 0.800x time (1.25x speed-up)",
        "  - A/B build {-DEMBER_X=0} 60.00 µs: 0.750x time (1.33x speed-up) against the default "
        "build",
    ]
    assert report.comparison_lines([rows[1], ab])[1] == (
        "  - A/B build {-DEMBER_X=0} 60.00 µs: 0.600x time (1.67x speed-up) against torch_compile"
    )
    report.mark_best(rows)
    assert rows[0].best and ab.best  # each the fastest of its own build
    assert "| ember {-DEMBER_X=0} |" in report.markdown_table(rows)


def test_rows_of_other_parameters_are_other_workloads() -> None:
    """R4.15: one shape under other routine parameters (decode's uniform and Pareto lengths) is
    not one workload; session 23's table ranked a Pareto ember row against a uniform peer."""
    uni, par = {"lengths": "uniform"}, {"lengths": "pareto"}
    rows = [
        _row("ember", "default", 80.0, params=uni),
        _row("torch_compile", "default", 100.0, params=uni),
        _row("ember", "default", 50.0, params=par),
        _row("torch_compile", "default", 200.0, params=par),
    ]
    assert report.comparison_lines(rows) == [
        "- rmsnorm 8192x8192 bf16 [lengths=uniform]: best peer torch_compile 100.0 µs; "
        "ember 80.00 µs; ember/best peer 0.800x time (1.25x speed-up)",
        "- rmsnorm 8192x8192 bf16 [lengths=pareto]: best peer torch_compile 200.0 µs; "
        "ember 50.00 µs; ember/best peer 0.250x time (4.00x speed-up)",
    ]
    report.mark_best(rows)
    assert all(r.best for r in rows)  # each the fastest of its backend in its own workload


def test_rows_record_the_commit_the_operator_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_BENCH_COMMIT", raising=False)
    from_git = ember_commit()
    monkeypatch.setenv("EMBER_BENCH_COMMIT", "e0cd064")
    assert ember_commit() == "e0cd064" != from_git
    monkeypatch.setenv("EMBER_BENCH_COMMIT", " ")  # blank: as if unset
    assert ember_commit() == from_git


def test_host_routine_times_the_backends_of_a_case_together() -> None:
    fake = FakeTimer()
    rows = run(["host", "--backends", "torch_add,torch", "--calls", "10", "--rounds", "2"], fake)
    assert [r.status for r in rows] == ["ok", "ok"]
    assert [r.get("group") for r in fake.runs] == [2]  # one interleaved timing of both backends
    assert all(r.timing == "host_wall" and r.l2 == "n/a (host time)" for r in rows)


def test_host_routine_reports_wall_time_without_bandwidth(no_peers: None) -> None:
    rows = run(["host", "--backends", "torch_add,flashinfer", "--calls", "10", "--rounds", "2"])
    add, fi = rows
    assert (add.status, add.timing, add.refcheck, add.gbps) == ("ok", "host_wall", "passed", None)
    assert add.shape == "1x128" and add.l2 == "n/a (host time)"
    assert "--calls 10 --rounds 2" in add.cmd and "--timing" not in add.cmd
    assert fi.status.startswith("skipped")


def test_cupti_failure_falls_back_only_under_auto(no_peers: None) -> None:
    class CuptiBreaks(FakeTimer):
        def __call__(self, work: Any, /, **kwargs: Any) -> timing.Measurement:
            if kwargs.get("mechanism") == "cupti":
                raise TimingError("CUPTI recorded no device work")
            return super().__call__(work, **kwargs)

    argv = ["rmsnorm", "--backends", "torch", "--shapes", "4x64"]
    (auto,) = run([*argv, "--timing", "auto"], CuptiBreaks(), mechanism="cupti")
    assert auto.status == "ok" and auto.timing == "cuda_event"
    assert any("CUPTI failed" in n for n in auto.notes)
    assert "--timing cuda_event" in auto.cmd  # reproduces what was measured
    (strict,) = run([*argv, "--timing", "cupti"], CuptiBreaks(), mechanism="cupti")
    assert strict.status.startswith("error: TimingError") and strict.median_us is None


def test_a_backend_exception_becomes_an_error_row(
    no_peers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explodes(op: str, variant: str, eps: float) -> Impl:
        def prepare(i: Any) -> Callable[[], Any]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        return Impl("torch", variant, prepare)

    monkeypatch.setitem(norm.BUILDERS, "torch", explodes)
    (row,) = run(["rmsnorm", "--backends", "torch", "--shapes", "4x64"])
    assert row.status == "error: RuntimeError: CUDA error: an illegal memory access was encountered"


# --- rows, reproduce commands, table -------------------------------------------------------------


REQUIRED_FIELDS = {
    "routine", "backend", "variant", "shape", "dtype", "arch", "device", "timing", "median_us",
    "std_us", "min_us", "iters", "gbps", "tflops", "pct_of_copy_ceiling", "refcheck",
    "ember_commit", "date", "cmd", "status", "l2", "bytes", "best",
}  # fmt: skip


def test_sigterm_keeps_the_rows_already_measured(
    no_peers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A device call that runs out of time sends SIGTERM (`timeout`): the rows measured before it
    # must survive (they were lost with the process before), the rest are not run, and the
    # previous handler comes back.
    calls: list[int] = []

    def fake_rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None) -> Any:
        calls.append(len(calls))
        if len(calls) == 5:  # the third case's reference check
            os.kill(os.getpid(), signal.SIGTERM)
        return norm.torch_rmsnorm(x, weight, eps)

    monkeypatch.setattr(ember, "rmsnorm", fake_rmsnorm, raising=False)
    args = build_parser().parse_args(
        ["rmsnorm", "--backends", "ember[default]", "--shapes", "4x64,8x64,16x64,32x64"]
    )
    r = routines.get_routine(args.routine)
    fake = FakeTimer()
    ctx = BenchContext.from_args(
        r, args, ENV, device="cpu", timer=fake, host_timer=fake, mechanism="cuda_event"
    )

    def sentinel(signum: int, frame: object) -> None:
        raise AssertionError("the bench's handler should have caught it")

    previous = signal.signal(signal.SIGTERM, sentinel)
    try:
        rows, stopped = collect_rows(ctx, r.run(ctx, args))
        assert signal.getsignal(signal.SIGTERM) is sentinel
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped
    assert [(row.shape, row.status) for row in rows] == [("4x64", "ok"), ("8x64", "ok")]
    assert all(row.median_us == 11.0 for row in rows)
    rows, stopped = collect_rows(
        ctx,
        r.run(
            ctx, build_parser().parse_args(["rmsnorm", "--backends", "torch", "--shapes", "4x64"])
        ),
    )
    assert not stopped and [row.status for row in rows] == ["ok"]


def test_row_schema_and_jsonl(tmp_path: Path, no_peers: None) -> None:
    rows = run(["rmsnorm", "--backends", "torch,liger", "--shapes", "4x64"])
    assert set(report.ROW_FIELDS) >= REQUIRED_FIELDS
    out = tmp_path / "deep" / "results.jsonl"
    assert report.append_jsonl(rows, out) == 2
    assert report.append_jsonl(rows[:1], out) == 1  # appends
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3
    assert all(tuple(d) == report.ROW_FIELDS for d in lines)
    assert lines[0]["median_us"] == 11.0 and lines[1]["median_us"] is None


def test_non_finite_numbers_become_null() -> None:
    row = report.Row("rmsnorm", "torch", "default", "4x64", "bf16", ref_max_abs_err=math.inf)
    json.dumps(row.to_json(), allow_nan=False)
    assert row.to_json()["ref_max_abs_err"] is None


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--l2", "warm", "--min-iters", "7", "--budget-ms", "50", "--no-refcheck"],
        ["--timing", "cuda_graph", "--graph-calls", "8", "--eps", "1e-05"],
    ],
)
def test_reproduce_command_round_trips_through_the_parser(extra: list[str], no_peers: None) -> None:
    rows = run(["rmsnorm", "--backends", "torch,flashinfer", "--shapes", "4x64,8x32", *extra])
    assert len(rows) == 6
    for row in rows:
        words = shlex.split(row.cmd)
        assert words[:3] == PROG.split()
        args = build_parser().parse_args(words[3:])
        assert args.routine == row.routine
        assert args.backends == [(row.backend, row.variant)]
        assert [parse_shape("x".join(map(str, s))) for s in args.shapes] == [parse_shape(row.shape)]
        assert args.dtypes == [row.dtype] and args.eps == row.params["eps"]
        assert args.no_refcheck == (row.refcheck == "off")
        if row.timing:
            assert args.timing == row.timing
        # rerunning the command yields exactly this row again
        (again,) = run(words[3:])
        assert (again.routine, again.label, again.shape, again.dtype, again.status) == (
            row.routine,
            row.label,
            row.shape,
            row.dtype,
            row.status,
        )
        assert again.cmd == row.cmd


def _row(backend: str, variant: str, median: float | None, **kw: Any) -> report.Row:
    r = report.Row("rmsnorm", backend, variant, "8192x8192", "bf16", **kw)
    if median is not None:
        r.median_us, r.std_us, r.min_us, r.iters = median, 0.5, median - 1, 100
        r.timing, r.refcheck = kw.get("timing", "cupti"), "passed"
        r.gbps, r.pct_of_copy_ceiling = 268_451_840 / median / 1e3, 50.0
    return r


def test_markdown_table_format() -> None:
    rows = [
        _row("ember", "default", 64.0),
        _row("flashinfer", "default", 102.5),
        _row("flashinfer", "pdl", 100.25),
        _row("liger", "default", None, status="skipped: liger_kernel is not importable | x"),
    ]
    report.mark_best(rows)
    assert [r.best for r in rows] == [True, False, True, False]
    assert report.markdown_table(rows) == (
        "| routine | backend | shape | dtype | timing | median µs | std µs | min µs | iters "
        "| GB/s | TFLOP/s | % copy | refcheck | status |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| rmsnorm | ember | 8192x8192 | bf16 | cupti | 64.00 | 0.50 | 63.00 | 100 | 4 195 | — "
        "| 50.0 | passed | ok |\n"
        "| rmsnorm | flashinfer | 8192x8192 | bf16 | cupti | 102.5 | 0.50 | 101.5 | 100 | 2 619 "
        "| — | 50.0 | passed | ok |\n"
        "| rmsnorm | flashinfer[pdl] (best) | 8192x8192 | bf16 | cupti | 100.2 | 0.50 | 99.25 "
        "| 100 | 2 678 | — | 50.0 | passed | ok |\n"
        "| rmsnorm | liger | 8192x8192 | bf16 | — | — | — | — | — | — | — | — | n/a "
        "| skipped: liger_kernel is not importable / x |\n"
    )


def test_comparison_against_the_best_peer() -> None:
    rows = [
        _row("ember", "default", 80.0),
        _row("torch_compile", "default", 100.0),
        _row("flashinfer", "default", 160.0),
        _row("flashinfer", "pdl", 120.0),
    ]
    (line,) = report.comparison_lines(rows)
    assert line == (
        "- rmsnorm 8192x8192 bf16: best peer torch_compile 100.0 µs; ember 80.00 µs; "
        "ember/best peer 0.800x time (1.25x speed-up); vs flashinfer[pdl] 0.667x time "
        "(1.50x speed-up)"
    )
    rows[1].timing = "cuda_event"
    assert "mixed timing mechanisms" in report.comparison_lines(rows)[0]
    assert report.comparison_lines(rows[1:]) == [
        "- rmsnorm 8192x8192 bf16: best peer torch_compile 100.0 µs; ember: not timed"
    ]


# --- registry and parsing ------------------------------------------------------------------------


def test_registry_holds_the_norm_routines() -> None:
    names = [r.name for r in routines.all_routines()]
    # (in registration order; which routine module registers first depends on import order)
    assert [n for n in names if n in {"rmsnorm", "fused_add_rmsnorm", "host"}] == [
        "rmsnorm",
        "fused_add_rmsnorm",
        "host",
    ]
    assert routines.get_routine("rmsnorm").backends["flashinfer"] == ("default", "pdl")
    assert routines.get_routine("host").timer == "host"
    with pytest.raises(KeyError, match=r"no bench routine .nope.; known: .*rmsnorm"):
        routines.get_routine("nope")


def test_registering_a_routine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routines, "_REGISTRY", dict(routines._REGISTRY))

    @routines.routine("toy", help="a toy routine", backends={"torch": ("default",)})
    def toy(ctx: Any, args: Any) -> list[Any]:
        return []

    assert routines.get_routine("toy").run is toy
    assert build_parser().parse_args(["toy", "--backends", "torch"]).backends == [("torch", None)]
    with pytest.raises(ValueError, match="already registered"):
        routines.routine("toy", help="again", backends={"torch": ("default",)})(toy)
    with pytest.raises(ValueError, match="at least one variant"):
        routines.routine("bad", help="", backends={"torch": ()})


def test_backend_selection() -> None:
    known = {"ember": ("default", "out"), "flashinfer": ("default", "pdl")}
    sel = routines.parse_backends("ember, flashinfer[pdl]", known)
    assert sel == [("ember", None), ("flashinfer", "pdl")]
    assert routines.expand_backends(sel, known) == [
        ("ember", "default"),
        ("ember", "out"),
        ("flashinfer", "pdl"),
    ]
    assert routines.expand_backends(None, known)[-1] == ("flashinfer", "pdl")
    for bad, msg in [("tvm", "unknown backend"), ("flashinfer[x]", "no variant"), (",", "no back")]:
        with pytest.raises(ValueError, match=msg):
            routines.parse_backends(bad, known)


def test_bad_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["rmsnorm", "--shapes", "8192y4096"],
        ["rmsnorm", "--dtypes", "fp8"],
        ["rmsnorm", "--backends", "cudnn"],
        ["host", "--backends", "liger"],
        ["rmsnorm", "--min-iters", "0"],
    ):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(argv)
        assert exc.value.code == 2
    assert "unknown backend 'cudnn'" in capsys.readouterr().err
    assert parse_dtype("bfloat16") == "bf16" and parse_shape("2x3x4") == (2, 3, 4)


def test_liger_arguments_follow_its_signature() -> None:
    # NOTE: Liger names its tensors X and W; only their position matters here.
    def current(  # noqa: PLR0917
        ctx: Any,
        x: Any,
        w: Any,
        eps: float,
        offset: float = 0.0,
        casting_mode: str = "llama",
        in_place: bool = True,
    ) -> None:
        pass

    def old(ctx: Any, x: Any, w: Any, eps: float) -> None:
        pass

    def odd(ctx: Any, x: Any, w: Any, eps: float, mystery: int) -> None:
        pass

    assert norm.liger_arguments(current, 1e-5) == [1e-5, 0.0, "llama"]
    assert norm.liger_arguments(old, 1e-5) == [1e-5]
    assert "mystery" in str(norm.liger_arguments(odd, 1e-5))


# --- ceilings ------------------------------------------------------------------------------------


def test_ceilings_cache_is_keyed_by_device(isolated_ember: Path) -> None:
    path = ceilings.ceilings_path()
    assert path == isolated_ember / "bench" / "ceilings.json"
    assert ceilings.load_ceilings("NVIDIA H200") is None
    h200 = ceilings.Ceilings("NVIDIA H200", 4249.0, 690.0, "2026-12-02")
    ceilings.save_ceilings(h200)
    ceilings.save_ceilings(ceilings.Ceilings("NVIDIA B200", 7000.0, 1800.0, "2026-12-03"))
    assert ceilings.load_ceilings("NVIDIA H200") == h200
    b200 = ceilings.load_ceilings("NVIDIA B200")
    assert b200 is not None and b200.copy_gbps == 7000.0
    path.write_text("{ not json")
    assert ceilings.load_ceilings("NVIDIA H200") is None


def test_ceilings_measurement_rows(isolated_ember: Path) -> None:
    ctx = BenchContext(
        routine="ceilings", env=ENV, device="cpu", timer=FakeTimer([100.0]), takes_backends=False
    )
    measured, rows = ceilings.measure_ceilings(ctx, gemm_n=64)
    copy_row, gemm_row = rows
    assert copy_row.refcheck == gemm_row.refcheck == "passed"
    assert copy_row.bytes == 2 * (1 << 20)  # an eighth of the 8 MiB free, read + written
    assert measured is not None
    assert measured.copy_gbps == pytest.approx(copy_row.bytes / 100.0 / 1e3)
    assert measured.gemm_bf16_tflops == pytest.approx(2 * 64**3 / 100.0 / 1e6)
    assert gemm_row.tflops == measured.gemm_bf16_tflops
    assert copy_row.cmd == f"{PROG} ceilings --remeasure --timing cuda_event"


def test_rows_report_percent_of_the_copy_ceiling(no_peers: None) -> None:
    c = ceilings.Ceilings("Fake GPU", 1.0, 1.0, "now")
    (row,) = run(["rmsnorm", "--backends", "torch", "--shapes", "4x64"], ceilings=c)
    assert row.gbps is not None
    assert row.pct_of_copy_ceiling == pytest.approx(100.0 * row.gbps)


# --- command line --------------------------------------------------------------------------------


def test_bench_help_works_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        ember_main(["bench", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ember bench")
    for name in ("rmsnorm", "fused_add_rmsnorm", "host", "ceilings"):
        assert name in out
    with pytest.raises(SystemExit) as exc:
        ember_main(["-q", "bench", "rmsnorm", "--help"])
    assert exc.value.code == 0
    assert "--backends" in capsys.readouterr().out


def test_ember_cli_forwards_everything_after_bench() -> None:
    assert _split_bench(["-q", "bench", "rmsnorm", "--backends", "ember"]) == (
        ["-q", "bench"],
        ["rmsnorm", "--backends", "ember"],
    )
    assert _split_bench(["bench"]) == (["bench"], [])
    assert _split_bench(["cache", "list"]) is None
    assert _split_bench(["--version"]) is None


def _py(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_no_gpu_is_a_clear_error_not_a_traceback() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the bench would run")
    for argv in (["rmsnorm"], ["host"], ["ceilings"]):
        proc = _py(f"import sys; from ember.bench import main; sys.exit(main({argv!r}))")
        assert proc.returncode == 2, proc.stderr
        assert "no CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr
    proc = _py("import sys; from ember.cli import main; sys.exit(main(['bench', 'rmsnorm']))")
    assert proc.returncode == 2 and "ember bench: error: no CUDA GPU" in proc.stderr
    assert main.__module__ == "ember.bench.harness"


def test_importing_the_cli_and_bench_stays_light() -> None:
    proc = _py(
        "import sys, ember.cli, ember.bench\n"
        "from ember.bench.harness import build_parser\n"
        "build_parser().parse_args(['rmsnorm', '--backends', 'ember,flashinfer'])\n"
        "heavy = {'torch', 'triton', 'flashinfer', 'liger_kernel', 'cupti'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
