"""ember in one minute: the norm kernels, compiled on first use, checked, and timed next to torch.

Run with ``make demo``. With a GPU: runs ``ember.rmsnorm`` and ``ember.fused_add_rmsnorm_``,
checks them against an fp32 reference and prints their speed next to torch. Without one: compiles
the same kernels for sm_90a (Hopper), shows where the artifacts went, and says so plainly.
"""

from __future__ import annotations

import logging
import sys
import time

import torch

import ember
from ember.config import knobs
from ember.jit import build_and_load, resolve
from ember.ops.norm import norm_spec
from ember.testing import fused_add_rmsnorm_ref, rmsnorm_ref, tolerances


def _time_us(fn, iters: int = 200) -> float:  # type: ignore[no-untyped-def]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(20):
        fn()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters * 1e3


def _torch_rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def on_gpu() -> None:
    name = torch.cuda.get_device_name()
    print(f"GPU: {name}")
    tokens, hidden = 4096, 8192
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    y = ember.rmsnorm(x, w)
    torch.cuda.synchronize()
    print(f"first call (compile or cache load + run): {time.perf_counter() - t0:.2f} s")
    rtol, atol = tolerances(x.dtype)
    torch.testing.assert_close(y, rmsnorm_ref(x, w), rtol=rtol, atol=atol)
    print(f"rmsnorm {tokens}x{hidden} bf16 matches the fp32 reference (rtol={rtol}, atol={atol})")
    r = torch.randn_like(x)
    xe, re_ = x.clone(), r.clone()
    ember.fused_add_rmsnorm_(xe, re_, w)
    want_x, want_r = fused_add_rmsnorm_ref(x, r, w)
    torch.testing.assert_close(xe, want_x, rtol=rtol, atol=atol)
    torch.testing.assert_close(re_, want_r, rtol=rtol, atol=atol)
    print("fused_add_rmsnorm_ matches the fp32 reference")
    out = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    for label, fn in [
        ("ember.rmsnorm", lambda: ember.rmsnorm(x, w, out=out)),
        ("torch (eager)", lambda: _torch_rmsnorm(x, w)),
    ]:
        us = _time_us(fn)
        print(f"  {label:<14} {us:8.1f} us  {nbytes / us / 1e3:7.0f} GB/s  (CUDA events, mean)")
    print("for reference-checked medians against every peer: python -m ember.bench rmsnorm")


def without_gpu() -> None:
    print("No CUDA GPU found: compiling the norm kernels for sm_90a (Hopper) instead.")
    with knobs.scope(cuda_arch_list=("9.0a",)):
        for dtype in ("bf16", "fp16", "fp32"):
            spec = norm_spec(dtype)
            t0 = time.perf_counter()
            build_and_load(spec)
            entry = resolve(spec).entry
            print(f"  {spec.uri}: ready in {time.perf_counter() - t0:.2f} s -> {entry}")
    print(f"Artifacts live under EMBER_CACHE_DIR={knobs.cache_dir} (see `ember cache list`).")
    print(
        "Nothing ran on a GPU: there is none here. Run `make demo` on a GPU machine to see speed."
    )


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="  [%(name)s] %(message)s", stream=sys.stdout)
    print(f"ember {ember.__version__}, torch {torch.__version__}, cache {knobs.cache_dir}")
    if torch.cuda.is_available():
        on_gpu()
    else:
        without_gpu()
    return 0


if __name__ == "__main__":
    sys.exit(main())
