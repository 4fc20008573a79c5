"""ember in one minute: compile on first use, reuse from the cache, fail clearly on bad input.

Run with ``make demo``. Works on a machine with no GPU (a host module); with a GPU, or with
``EMBER_CUDA_ARCH_LIST`` set, it also builds the CUDA module.
"""

from __future__ import annotations

import logging
import sys
import time

import torch

from ember.config import knobs
from ember.jit import ArchContext, build_and_load, clear_memory_cache, resolve
from ember.ops import toy


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="  [%(name)s] %(message)s", stream=sys.stdout)
    print(f"cache: {knobs.cache_dir}")

    spec = toy.host_spec()
    r = resolve(spec)
    print(f"\n1. module {spec.uri!r}, content key {r.key[:16] if r.key else '?'}...")
    t0 = time.perf_counter()
    build_and_load(spec)
    print(f"   first use (compile, or load if cached): {time.perf_counter() - t0:.2f} s")

    clear_memory_cache()
    t0 = time.perf_counter()
    build_and_load(spec)
    print(f"   from the disk cache: {(time.perf_counter() - t0) * 1e3:.1f} ms, no compiler started")

    a, b = torch.randn(1 << 16), torch.randn(1 << 16)
    out = toy.axpy(a, b, alpha=0.5)
    err = (out - (a + 0.5 * b)).abs().max().item()
    print(f"\n2. axpy on {a.numel()} floats: max |error| vs torch = {err:.2e}")

    try:
        toy.axpy(a, b.double())
    except TypeError as exc:
        print(f"\n3. a bad call raises before anything runs:\n   TypeError: {exc}")

    ctx = ArchContext.current()
    if ctx.requested:
        t0 = time.perf_counter()
        build_and_load(toy.cuda_spec())
        archs = ", ".join(map(str, ctx.requested))
        print(
            f"\n4. CUDA module built and loaded for [{archs}] in {time.perf_counter() - t0:.2f} s"
        )
        if torch.cuda.is_available():
            x = torch.randn(1 << 20, device="cuda")
            y = toy.axpy(x, x, alpha=2.0)
            print(f"   on the GPU: max |error| = {(y - 3 * x).abs().max().item():.2e}")
    else:
        print("\n4. no GPU here: set EMBER_CUDA_ARCH_LIST=9.0a to compile the CUDA module anyway")
    print("\nnext: `ember env`, `ember doctor`, `ember cache list`")


if __name__ == "__main__":
    main()
