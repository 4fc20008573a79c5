"""ember's one benchmark harness (R4.10-R4.16): ``python -m ember.bench`` / ``ember bench``.

Usage::

    python -m ember.bench ROUTINE [--backends ember,torch,torch_compile,flashinfer,liger]
        [--shapes 8192x8192,128x4096] [--dtypes bf16,fp16,fp32] [--eps 1e-6]
        [--timing auto|cupti|cuda_event|cuda_graph] [--l2 cold|warm] [--no-refcheck]
        [--out results.jsonl]
    python -m ember.bench host        # host time per eager call (tiny allocating rmsnorm)
    python -m ember.bench ceilings [--remeasure]

Routines live in :mod:`ember.bench.routines` (``rmsnorm``, ``fused_add_rmsnorm``, ``host``). Every
backend is checked against an fp32 reference before it is timed; every row records the timing
mechanism, the statistics, the workload, the device and the command that reproduces it
(:class:`~ember.bench.report.Row`). Timing: :mod:`ember.bench.timing`; host time:
:mod:`ember.bench.host` (the backends of one case in interleaved rounds, so host drift stays out of
their ratio); ceilings: :mod:`ember.bench.ceilings`.

Nothing here is imported by ``import ember``, and torch and the peer libraries (FlashInfer, Liger,
Triton, CUPTI) are imported only inside the functions that run on the GPU.
"""

from __future__ import annotations

from ember.bench.harness import main
from ember.bench.routines import routine

__all__ = ["main", "routine"]
