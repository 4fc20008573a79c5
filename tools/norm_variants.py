"""Sweep compile-time variants of the norm kernels on the GPU (docs/perf/notes/norm.md).

Each variant is the norm_bf16 spec with extra -D flags and its own uri, built by the normal JIT.
Timing: triton do_bench medians (CUDA events), inputs rotated past L2; graph replay for small.
"""

from __future__ import annotations

import dataclasses
import subprocess

import torch
import triton.testing

from ember.jit import build_and_load, resolve
from ember.ops.norm import norm_spec
from ember.testing import fused_add_rmsnorm_ref, rmsnorm_ref

VARIANTS = {
    "default": "",
    "no_early_weight": "-DEMBER_NORM_EARLY_WEIGHT=0",
}
BIG = [(8192, 8192), (8192, 4096)]
SMALL = [(1, 4096), (16, 4096), (64, 4096), (128, 4096), (1, 5120), (64, 5120)]


def bench(fn, sets, graph):
    if graph:
        fn(*sets[0])
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for k in range(32):
                fn(*sets[k % len(sets)])
        return (
            triton.testing.do_bench(g.replay, warmup=30, rep=200, return_mode="median") / 32 * 1e3
        )
    i = [0]

    def step():
        fn(*sets[i[0] % len(sets)])
        i[0] += 1

    return triton.testing.do_bench(step, warmup=30, rep=200, return_mode="median") * 1e3


def main() -> None:
    dt = torch.bfloat16
    base = norm_spec("bf16")
    for name, flags in VARIANTS.items():
        fl = tuple(flags.split())  # NOTE: empty for the default build
        spec = dataclasses.replace(
            base, uri=f"normx_{name}", cflags=base.cflags + fl, cuda_cflags=base.cuda_cflags + fl
        )
        mod = build_and_load(spec)
        if name == "default":
            so = resolve(spec).entry / f"{spec.uri}.so"
            sass = subprocess.run(
                ["cuobjdump", "-sass", str(so)], capture_output=True, text=True
            ).stdout
            import collections
            import re

            c = collections.Counter(re.findall(r"\b(STG\.E[.\w]*|LDG\.E[.\w]*)", sass))
            print("SASS default:", dict(c))
        line = [name]
        for t, h in BIG + SMALL:
            nbytes = t * h * 2
            k = max(1, min(64, (3 * (60 << 20)) // nbytes + 1))
            w = torch.randn(h, device="cuda").to(dt)
            sets = [
                (
                    torch.randn(t, h, device="cuda").to(dt),
                    w,
                    torch.empty(t, h, device="cuda", dtype=dt),
                    1e-6,
                )
                for _ in range(k)
            ]
            x, _, o, _ = sets[0]
            o.fill_(float("nan"))
            mod.rmsnorm(x, w, o, 1e-6)
            ok = torch.allclose(o.float(), rmsnorm_ref(x, w).float(), rtol=1.6e-2, atol=1.6e-2)
            us = bench(mod.rmsnorm, sets, graph=(t * h <= 128 * 8192))
            line.append(
                f"{t}x{h}:{us:.2f}us/{(2 * nbytes) / us / 1e3:.0f}GB/s{'' if ok else '!BAD'}"
            )
        for t, h in [(8192, 8192), (1, 4096), (64, 4096), (64, 5120)]:
            nbytes = t * h * 2
            k = max(1, min(64, (3 * (60 << 20)) // (2 * nbytes) + 1))
            w = torch.randn(h, device="cuda").to(dt)
            sets = [
                (
                    torch.randn(t, h, device="cuda").to(dt),
                    torch.randn(t, h, device="cuda").to(dt),
                    w,
                    1e-6,
                )
                for _ in range(k)
            ]
            x0, r0 = sets[0][0].clone(), sets[0][1].clone()
            wx, wr = fused_add_rmsnorm_ref(x0, r0, w)
            mod.fused_add_rmsnorm(x0, r0, w, 1e-6)
            ok = torch.allclose(x0.float(), wx.float(), rtol=1.6e-2, atol=1.6e-2) and torch.equal(
                r0, wr
            )
            us = bench(mod.fused_add_rmsnorm, sets, graph=(t * h <= 128 * 8192))
            line.append(
                f"F{t}x{h}:{us:.2f}us/{(4 * nbytes) / us / 1e3:.0f}GB/s{'' if ok else '!BAD'}"
            )
        print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
