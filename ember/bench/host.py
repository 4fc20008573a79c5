"""Host time per eager call: what a serving engine pays on the CPU for each launch.

The callable runs ``calls`` times back to back, then one synchronize; the wall time divided by
``calls`` is the host cost per call as long as the GPU keeps up (tiny kernels). Several rounds
give a median and a spread. This is how ember's allocating ``rmsnorm`` is compared with torch's
``x + x`` and FlashInfer's ``rmsnorm`` (docs: PERF.md, "JIT and host costs").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ember.bench.timing import Measurement, summarize

__all__ = ["HOST_MECHANISM", "host_time_per_call"]

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
    if calls < 1 or rounds < 1:
        raise ValueError(f"calls and rounds must be >= 1, got calls={calls}, rounds={rounds}")
    if sync is None:
        import torch

        sync = torch.cuda.synchronize
    for _ in range(warmup):
        fn()
    sync()
    per_call_us: list[float] = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(calls):
            fn()
        sync()
        per_call_us.append((clock() - t0) / calls * 1e6)
    stats = replace(summarize(per_call_us), iters=calls * rounds)
    return Measurement(stats, HOST_MECHANISM, f"{rounds} rounds of {calls} calls + 1 synchronize")
