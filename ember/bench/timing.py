"""Time GPU work: CUPTI kernel time, CUDA events, CUDA-graph replays (R4.11, R4.12).

Every measurement says which mechanism produced it:

``cupti``
    The CUPTI activity API (package ``cupti-python``) records every kernel, memcpy and memset
    with device timestamps, and every runtime/driver API call with host timestamps; both carry a
    correlation id. Each timed call runs between two host timestamps (the GPU idle before and
    after it); the call's time is the sum of the durations of the device work launched by the API
    calls made in that bracket. Host launch cost and gaps between a call's kernels are excluded.
    Preferred when it works; ``auto`` probes it once per process.
``cuda_event``
    A pair of CUDA events around each call, all recorded back to back and read after one
    synchronize. Includes the gaps between a call's kernels and, when the host cannot stay ahead
    of the GPU (tiny kernels), launch cost.
``cuda_graph``
    ``N`` calls captured in one CUDA graph; events around each replay; time per call = replay
    time / ``N``. Takes host launch cost out for decode-sized shapes.

Warm-up runs for a fixed time (default 25 ms); the estimate it gives sets the number of timed
iterations (at least ``min_iters``, about ``budget_ms`` of work, at most ``max_iters``).

L2: the caller builds ``k`` input sets so that ``k x bytes >= 3 x L2`` and the calls cycle
through them (:func:`plan_l2`); when that would take too many sets or too much memory, a buffer of
2 x L2 is written before every timed call instead (outside the timed region). ``--l2 warm`` times
one set, no flush. The plan's label goes into the row.

torch is imported inside the functions that need a GPU, never at module import.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.bench.errors import BenchError, TimingError

__all__ = [
    "L2_POLICIES",
    "MECHANISMS",
    "TIMING_CHOICES",
    "L2Plan",
    "Measurement",
    "Stats",
    "TimingConfig",
    "cupti_unavailable_reason",
    "kernel_time_per_bracket",
    "measure",
    "plan_iters",
    "plan_l2",
    "summarize",
    "warm_up",
]

logger = logging.getLogger(__name__)

MECHANISMS = ("cupti", "cuda_event", "cuda_graph")
TIMING_CHOICES = ("auto", *MECHANISMS)
L2_POLICIES = ("cold", "warm")

Call = Callable[[], object]

_MIB = 1 << 20


@dataclass(frozen=True)
class Stats:
    """Summary of per-call times in microseconds."""

    median_us: float
    std_us: float
    min_us: float
    mean_us: float
    iters: int


def summarize(samples_us: Sequence[float]) -> Stats:
    """Median, sample standard deviation, minimum and mean of per-call times (µs).

    Raises
    ------
    ValueError
        No samples, or a sample that is negative or NaN.
    """
    xs = [float(s) for s in samples_us]
    if not xs:
        raise ValueError("no timing samples to summarize")
    if any(not x >= 0.0 for x in xs):
        raise ValueError(f"timing samples must be finite and >= 0, got {xs[:8]}")
    std = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return Stats(statistics.median(xs), std, min(xs), statistics.fmean(xs), len(xs))


@dataclass(frozen=True)
class Measurement:
    """Timing of one callable: statistics, the mechanism that produced them, and a detail."""

    stats: Stats
    mechanism: str
    detail: str = ""


@dataclass(frozen=True)
class TimingConfig:
    """How long and how often to time.

    Attributes
    ----------
    warmup_ms:
        Warm-up wall time before timing (module loads, compiles, clocks ramping up).
    min_iters, max_iters:
        Bounds on the number of timed iterations.
    budget_ms:
        Target amount of timed GPU work; with the warm-up estimate it sets the iteration count.
    graph_calls:
        Calls captured per CUDA graph (at least one per rotated input set).
    l2:
        ``cold`` (rotate input sets or flush L2) or ``warm`` (one set, no flush).
    """

    warmup_ms: float = 25.0
    min_iters: int = 100
    budget_ms: float = 500.0
    max_iters: int = 10_000
    graph_calls: int = 32
    l2: str = "cold"

    def __post_init__(self) -> None:
        if not self.warmup_ms >= 0 or not self.budget_ms > 0:
            raise BenchError(f"warmup_ms must be >= 0 and budget_ms > 0, got {self}")
        if not 1 <= self.min_iters <= self.max_iters:
            raise BenchError(f"need 1 <= min_iters <= max_iters, got {self}")
        if self.graph_calls < 1:
            raise BenchError(f"graph_calls must be >= 1, got {self.graph_calls}")
        if self.l2 not in L2_POLICIES:
            raise BenchError(f"l2 policy {self.l2!r} unknown; expected one of {L2_POLICIES}")


def plan_iters(seconds_per_iter: float, config: TimingConfig) -> int:
    """Timed iterations: about ``budget_ms`` of work, clamped to ``[min_iters, max_iters]``."""
    if not seconds_per_iter > 0:
        return config.max_iters
    n = int(config.budget_ms / 1e3 / seconds_per_iter)
    return max(config.min_iters, min(config.max_iters, n))


def warm_up(
    step: Callable[[int], object],
    sync: Callable[[], object],
    seconds: float,
    *,
    clock: Callable[[], float] = time.perf_counter,
    max_batch: int = 4096,
) -> float:
    """Run ``step(i)`` in doubling batches until ``seconds`` have passed; seconds per step.

    At least two batches run, and the estimate comes from the last one, so a slow first call
    (a compile, a module load) does not inflate it.
    """
    start = clock()
    i, batch, batches = 0, 1, 0
    while True:
        t0 = clock()
        for _ in range(batch):
            step(i)
            i += 1
        sync()
        t1 = clock()
        batches += 1
        if batches >= 2 and t1 - start >= seconds:
            return (t1 - t0) / batch
        batch = min(batch * 2, max_batch)


@dataclass(frozen=True)
class L2Plan:
    """How a measurement keeps L2 cold: ``sets`` input sets to cycle through, or a flush."""

    sets: int
    flush_bytes: int
    label: str


def plan_l2(
    set_bytes: int,
    l2_bytes: int,
    *,
    policy: str = "cold",
    cap_bytes: int = 4 << 30,
    max_sets: int = 512,
) -> L2Plan:
    """Choose rotation or flush for one input set of ``set_bytes`` on a GPU with ``l2_bytes`` of L2.

    ``cold``: enough sets that they cover 3 x L2, if that fits ``cap_bytes`` and ``max_sets``;
    else one set and a 2 x L2 flush before every timed call. ``warm``: one set, no flush.
    """
    if policy == "warm":
        return L2Plan(1, 0, "warm: one input set, no flush")
    if policy != "cold":
        raise BenchError(f"l2 policy {policy!r} unknown; expected one of {L2_POLICIES}")
    target = 3 * l2_bytes
    if set_bytes >= target:
        return L2Plan(1, 0, f"cold: one set is {set_bytes / l2_bytes:.1f}x L2")
    need = math.ceil(target / max(set_bytes, 1))
    fit = min(max_sets, cap_bytes // max(set_bytes, 1))
    if need <= fit:
        return L2Plan(need, 0, f"rotate {need} sets ({need * set_bytes / l2_bytes:.1f}x L2)")
    flush = 2 * l2_bytes
    return L2Plan(1, flush, f"flush {flush / _MIB:.0f} MiB before each call")


def measure(
    calls: Sequence[Call],
    *,
    mechanism: str,
    config: TimingConfig,
    flush_bytes: int = 0,
) -> Measurement:
    """Time calls that cycle through ``calls`` (one per rotated input set) with ``mechanism``.

    Parameters
    ----------
    calls:
        Zero-argument callables launching the work on the current CUDA stream; iteration ``i``
        runs ``calls[i % len(calls)]``.
    mechanism:
        ``cupti``, ``cuda_event`` or ``cuda_graph`` (``auto`` is resolved by the caller).
    config:
        Warm-up, iteration and graph settings.
    flush_bytes:
        When positive, a buffer of this size is written before every timed call (every graph
        replay), outside the timed region.

    Raises
    ------
    TimingError
        The mechanism failed (CUPTI recorded no kernel, graph capture failed).
    """
    if not calls:
        raise ValueError("measure() needs at least one callable")
    timers: dict[str, Callable[[Sequence[Call], TimingConfig, Call | None], Measurement]] = {
        "cupti": _time_cupti,
        "cuda_event": _time_events,
        "cuda_graph": _time_graph,
    }
    if mechanism not in timers:
        raise BenchError(f"timing mechanism {mechanism!r} unknown; expected one of {MECHANISMS}")
    torch = _torch()
    pre: Call | None = None
    if flush_bytes > 0:
        scratch = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        pre = scratch.zero_
    return timers[mechanism](calls, config, pre)


def _torch() -> Any:
    import torch

    return torch


def _stepper(calls: Sequence[Call], pre: Call | None) -> Callable[[int], None]:
    k = len(calls)

    def step(i: int) -> None:
        if pre is not None:
            pre()
        calls[i % k]()

    return step


def _time_events(calls: Sequence[Call], config: TimingConfig, pre: Call | None) -> Measurement:
    torch = _torch()
    k = len(calls)
    per_call = warm_up(_stepper(calls, pre), torch.cuda.synchronize, config.warmup_ms / 1e3)
    n = plan_iters(per_call, config)
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]
    for i, (start, end) in enumerate(events):
        if pre is not None:
            pre()
        start.record()
        calls[i % k]()
        end.record()
    torch.cuda.synchronize()
    return Measurement(summarize([s.elapsed_time(e) * 1e3 for s, e in events]), "cuda_event")


def _time_graph(calls: Sequence[Call], config: TimingConfig, pre: Call | None) -> Measurement:
    torch = _torch()
    k = len(calls)
    per_graph = max(config.graph_calls, k)
    # NOTE: calls must run once outside capture (lazy module loads, library handles, allocator
    # warm-up); torch asks for that on a side stream.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for j in range(min(k, 3)):
            calls[j]()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for j in range(per_graph):
                calls[j % k]()
    except Exception as exc:
        raise TimingError(f"CUDA-graph capture failed: {type(exc).__name__}: {exc}") from exc

    def step(_i: int) -> None:
        if pre is not None:
            pre()
        graph.replay()

    per_replay = warm_up(step, torch.cuda.synchronize, config.warmup_ms / 1e3)
    n = plan_iters(per_replay, config)
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]
    for start, end in events:
        if pre is not None:
            pre()
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e3 / per_graph for s, e in events]
    return Measurement(summarize(samples), "cuda_graph", f"{per_graph} calls per graph replay")


# --- CUPTI -------------------------------------------------------------------------------------


@functools.cache
def _cupti() -> Any:
    from cupti import cupti

    return cupti


def kernel_time_per_bracket(
    brackets: Sequence[tuple[int, int]],
    launches: Iterable[tuple[int, int]],
    work: dict[int, int],
) -> list[float]:
    """Device time (µs) of each host bracket, from CUPTI records.

    Parameters
    ----------
    brackets:
        ``(t0, t1)`` host timestamps (ns) around each timed call.
    launches:
        ``(start, correlation_id)`` of every runtime/driver API record (host timestamps, ns).
    work:
        Total device nanoseconds (kernels, memcpy, memset) per correlation id.

    Raises
    ------
    TimingError
        A bracket launched no device work that CUPTI recorded.
    """
    ordered = sorted(launches)
    starts = [s for s, _ in ordered]
    out: list[float] = []
    for i, (t0, t1) in enumerate(brackets):
        lo, hi = bisect.bisect_left(starts, t0), bisect.bisect_right(starts, t1)
        ids = {corr for _, corr in ordered[lo:hi]}
        ns = sum(work.get(c, 0) for c in ids)
        if ns <= 0:
            raise TimingError(
                f"CUPTI recorded no device work for timed call {i} ({hi - lo} API records in "
                "its bracket); records may have been dropped"
            )
        out.append(ns / 1e3)
    return out


class _CuptiSession:
    """One CUPTI activity session: API records (host time) and device work per correlation id."""

    def __init__(self, cupti: Any) -> None:
        self._cupti = cupti
        kind = cupti.ActivityKind
        self._api_kinds = {int(kind.RUNTIME), int(kind.DRIVER)}
        self._work_kinds = {int(kind.CONCURRENT_KERNEL), int(kind.MEMCPY), int(kind.MEMSET)}
        self._kinds = [
            kind.RUNTIME,
            kind.DRIVER,
            kind.CONCURRENT_KERNEL,
            kind.MEMCPY,
            kind.MEMSET,
        ]
        self._enabled: list[Any] = []
        self.launches: list[tuple[int, int]] = []
        self.work: dict[int, int] = {}

    def _requested(self) -> tuple[int, int]:
        return 8 * _MIB, 0

    def _completed(self, activities: Sequence[Any]) -> None:
        for a in activities:
            kind = int(a.kind)
            if kind in self._api_kinds:
                self.launches.append((int(a.start), int(a.correlation_id)))
            elif kind in self._work_kinds:
                corr = int(a.correlation_id)
                self.work[corr] = self.work.get(corr, 0) + int(a.end) - int(a.start)

    def __enter__(self) -> _CuptiSession:
        self._cupti.activity_register_callbacks(self._requested, self._completed)
        try:
            for kind in self._kinds:
                self._cupti.activity_enable(kind)
                self._enabled.append(kind)
        except Exception:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._cupti.activity_flush_all(1)
        self._close()

    def _close(self) -> None:
        for kind in reversed(self._enabled):
            self._cupti.activity_disable(kind)
        self._enabled.clear()
        self._cupti.finalize()


def _time_cupti(calls: Sequence[Call], config: TimingConfig, pre: Call | None) -> Measurement:
    torch = _torch()
    cupti = _cupti()
    sync = torch.cuda.synchronize
    k = len(calls)
    n = plan_iters(warm_up(_stepper(calls, pre), sync, config.warmup_ms / 1e3), config)
    brackets: list[tuple[int, int]] = []
    try:
        with _CuptiSession(cupti) as session:
            for i in range(n):
                if pre is not None:
                    pre()
                sync()
                t0 = cupti.get_timestamp()
                calls[i % k]()
                t1 = cupti.get_timestamp()
                sync()
                brackets.append((int(t0), int(t1)))
    except TimingError:
        raise
    except Exception as exc:
        raise TimingError(f"CUPTI session failed: {type(exc).__name__}: {exc}") from exc
    samples = kernel_time_per_bracket(brackets, session.launches, session.work)
    return Measurement(summarize(samples), "cupti", "sum of device work per call")


@functools.cache
def cupti_unavailable_reason() -> str | None:
    """``None`` when CUPTI timing works in this process, else why not (checked once).

    The probe times a small kernel and requires CUPTI to attribute device work to every call.
    """
    try:
        _cupti()
    except Exception as exc:
        return f"cupti-python is not importable ({exc}); install it with pip install cupti-python"
    try:
        torch = _torch()
        x = torch.ones(1 << 16, device="cuda")
        probe = TimingConfig(warmup_ms=1.0, min_iters=5, max_iters=5, budget_ms=1.0)
        _time_cupti([lambda: x.mul_(1.0)], probe, None)
    except Exception as exc:
        return f"CUPTI probe failed: {type(exc).__name__}: {exc}"
    return None
