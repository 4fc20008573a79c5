"""Quick GPU check of the norm kernels while the harness is being written (not the harness).

Times ember vs torch eager / torch.compile / flashinfer / liger with triton's do_bench (CUDA events,
median), inputs rotated past L2. Prints one line per (op, shape, backend).
"""

from __future__ import annotations

import sys
import time

import torch
import triton.testing

import ember
from ember.testing import fused_add_rmsnorm_ref, rmsnorm_ref


def eager(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def eager_fused(x, r, w, eps=1e-6):
    s = (x.float() + r.float()).to(r.dtype)
    return eager(s, w, eps), s


torch._dynamo.config.recompile_limit = 64
compiled = torch.compile(eager, dynamic=False)
compiled_fused = torch.compile(eager_fused, dynamic=False)


def backends():
    out = {"ember": lambda x, w: ember.rmsnorm(x, w), "torch": eager, "torch_compile": compiled}
    try:
        import flashinfer

        out["flashinfer"] = lambda x, w: flashinfer.norm.rmsnorm(x, w, 1e-6)
    except Exception as exc:  # noqa: BLE001
        print("flashinfer unavailable:", exc)
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        out["liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6)
    except Exception as exc:  # noqa: BLE001
        print("liger unavailable:", exc)
    return out


def fused_backends():
    out = {"ember": lambda x, r, w: ember.fused_add_rmsnorm_(x, r, w), "torch": eager_fused,
           "torch_compile": compiled_fused}
    try:
        import flashinfer

        out["flashinfer"] = lambda x, r, w: flashinfer.norm.fused_add_rmsnorm(x, r, w, 1e-6)
    except Exception:  # noqa: BLE001
        pass
    return out


def bench(fn, sets, graph=False):
    i = [0]

    def step():
        fn(*sets[i[0] % len(sets)])
        i[0] += 1

    if graph:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        n = 20
        with torch.cuda.graph(g):
            for k in range(n):
                fn(*sets[k % len(sets)])
        return triton.testing.do_bench(g.replay, warmup=50, rep=300, return_mode="median") / n
    return triton.testing.do_bench(step, warmup=50, rep=300, return_mode="median")


def main() -> None:
    dt = torch.bfloat16
    shapes = [(8192, 8192), (128, 4096), (1, 4096), (16, 4096), (64, 4096), (1, 5120), (64, 5120), (4096, 5120), (8192, 4096), (8192, 16384), (32768, 128), (8192, 7168)]
    l2 = 60 << 20
    for t, h in shapes:
        nbytes = t * h * 2
        k = max(1, min(64, (3 * l2) // nbytes + 1))
        w = torch.randn(h, device="cuda").to(dt)
        sets = [(torch.randn(t, h, device="cuda").to(dt), w) for _ in range(k)]
        graph = t * h <= 128 * 8192
        for name, fn in backends().items():
            x = sets[0][0]
            got = fn(x, w)
            err = (got.float() - rmsnorm_ref(x, w).float()).abs().max().item()
            ms = bench(fn, sets, graph=graph)
            gbs = (2 * nbytes + h * 2) / (ms * 1e-3) / 1e9
            print(f"rmsnorm {t}x{h} {name:14s} {ms*1e3:9.2f} us {gbs:8.0f} GB/s maxerr={err:.3g} {'graph' if graph else 'events'}", flush=True)
        rsets = [(torch.randn(t, h, device="cuda").to(dt), torch.randn(t, h, device="cuda").to(dt), w) for _ in range(k)]
        for name, fn in fused_backends().items():
            x0, r0 = rsets[0][0].clone(), rsets[0][1].clone()
            want_x, want_r = fused_add_rmsnorm_ref(x0, r0, w)
            xc, rc = x0.clone(), r0.clone()
            res = fn(xc, rc, w)
            if name in ("torch", "torch_compile"):
                xc, rc = res
            err = max((xc.float() - want_x.float()).abs().max().item(), (rc.float() - want_r.float()).abs().max().item())
            ms = bench(fn, rsets, graph=graph)
            gbs = (4 * nbytes + h * 2) / (ms * 1e-3) / 1e9
            print(f"fused   {t}x{h} {name:14s} {ms*1e3:9.2f} us {gbs:8.0f} GB/s maxerr={err:.3g} {'graph' if graph else 'events'}", flush=True)

    # host time per eager call of a tiny allocating rmsnorm
    x = torch.randn(4, 128, device="cuda").to(dt)
    w = torch.randn(128, device="cuda").to(dt)
    from ember.ops import norm as _norm

    fns = _norm._functions(x, "probe")
    out = torch.empty_like(x)
    cands = {
        "ember.rmsnorm": lambda: ember.rmsnorm(x, w),
        "ember.rmsnorm(out=)": lambda: ember.rmsnorm(x, w, out=out),
        "ffi rmsnorm(out)": lambda: fns.rmsnorm(x, w, out, 1e-6),
        "ffi rmsnorm_alloc": lambda: fns.rmsnorm_alloc(x, w, 1e-6),
        "ffi plan_for": lambda: fns.plan_for(128, True),
        "torch.empty_like": lambda: torch.empty_like(x),
        "torch x+x": lambda: x + x,
    }
    try:
        import flashinfer

        cands["flashinfer.rmsnorm"] = lambda: flashinfer.norm.rmsnorm(x, w, 1e-6)
    except Exception:  # noqa: BLE001
        pass
    for name, f in cands.items():
        for _ in range(2000):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20000):
            f()
        torch.cuda.synchronize()
        print(f"host {name:22s} {(time.perf_counter() - t0) / 20000 * 1e6:6.2f} us/call", flush=True)


if __name__ == "__main__":
    sys.exit(main())
