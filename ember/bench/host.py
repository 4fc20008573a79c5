"""Host time per eager call: what a serving engine pays on the CPU for each launch.

The callable runs ``calls`` times back to back, then one synchronize; the wall time divided by
``calls`` is the host cost per call as long as the GPU keeps up (tiny kernels). Several rounds
give a median and a spread. This is how ember's allocating ``rmsnorm`` is compared with torch's
``x + x`` and FlashInfer's ``rmsnorm`` (docs: PERF.md, "JIT and host costs").

Callables compared with each other are timed in interleaved rounds
(:func:`host_times_interleaved`): round ``r`` of every callable runs before round ``r + 1`` of
any. Host CPUs drift over seconds (on the H200 host one case measured 6.3 µs in one round and
9.6 µs two rounds later), and timing the callables one after the other would put that drift into
their ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace

from ember.bench.timing import Measurement, summarize

__all__ = ["HOST_MECHANISM", "host_time_per_call", "host_times_interleaved"]

#: The mechanism name host-time rows carry.
HOST_MECHANISM = "host_wall"


def host_time_per_call(
    fn: Callable[[], object],
    *,
    calls: int = 20_000,
    rounds: int = 5,
    warmup: int = 200,
    sync: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Wall-clock microseconds per call of ``fn``, over ``rounds`` rounds of ``calls`` calls.

    Parameters
    ----------
    fn:
        The eager call, e.g. ``functools.partial(ember.rmsnorm, x, w)``.
    calls:
        Calls per round, followed by one synchronize.
    rounds:
        Rounds; the statistics are over the per-round averages.
    warmup:
        Untimed calls first (module loads, allocator warm-up).
    sync:
        Waits for the device; ``torch.cuda.synchronize`` by default.
    clock:
        Seconds, monotonic.

    Returns
    -------
    Measurement
        Mechanism ``host_wall``; ``stats.iters`` is the total number of timed calls.
    """
    only = host_times_interleaved(
        {0: fn}, calls=calls, rounds=rounds, warmup=warmup, sync=sync, clock=clock
    )
    return only[0]


def host_times_interleaved(
    fns: Mapping[Hashable, Callable[[], object]],
    *,
    calls: int = 20_000,
    rounds: int = 5,
    warmup: int = 200,
    sync: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[Hashable, Measurement]:
    """:func:`host_time_per_call` for several callables, their rounds interleaved.

    Every callable is warmed up first; then each round times every callable in turn (``calls``
    calls and one synchronize each), so slow drift of the host lands on all of them alike.
    Returns one :class:`Measurement` per key of ``fns``.
    """
    if calls < 1 or rounds < 1:
        raise ValueError(f"calls and rounds must be >= 1, got calls={calls}, rounds={rounds}")
    if sync is None:
        import torch

        sync = torch.cuda.synchronize
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync()
    per_call_us: dict[Hashable, list[float]] = {key: [] for key in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            t0 = clock()
            for _ in range(calls):
                fn()
            sync()
            per_call_us[key].append((clock() - t0) / calls * 1e6)
    detail = f"{rounds} rounds of {calls} calls + 1 synchronize"
    if len(fns) > 1:
        detail += f", interleaved with {len(fns) - 1} other backend(s)"
    return {
        key: Measurement(replace(summarize(v), iters=calls * rounds), HOST_MECHANISM, detail)
        for key, v in per_call_us.items()
    }
