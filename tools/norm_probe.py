"""A/B probe for the norm kernels and the host path on the GPU (docs/perf/notes/norm.md).

Every implementation is timed on the same inputs, in interleaved rounds (so clock ramps and
ordering cannot favour one), by CUDA-graph replay (host cost excluded; inputs rotated past L2).
Variants are the norm_bf16 spec with extra -D flags or other kernel sources, each its own uri,
built by the normal JIT. `--ncu` runs each kernel twice at two shapes for Nsight Compute.

    python tools/norm_probe.py [--rounds 3] [--only decode,big,fused,host] [--ncu] [--baseline DIR]
"""

# ruff: noqa: B023 -- the closures are called inside the iteration that defines them.
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ember.jit import build_and_load
from ember.ops.norm import norm_spec
from ember.testing import fused_add_rmsnorm_ref, rmsnorm_ref

L2 = 60 << 20
DT = torch.bfloat16
EPS = 1e-6

VARIANTS: dict[str, str] = {  # name -> extra -D flags
    "new": "",
    "nostream": "-DEMBER_NORM_STREAMING=0",
    "nopdl": "-DEMBER_NORM_PDL=0",
    "long_nv4": "-DEMBER_NORM_LONG_ROW_NV=4",
    "runtime_launch": "-DEMBER_DRIVER_LAUNCH=0",
}
BASELINE = "baseline"  # --baseline DIR: older norm_rmsnorm.cu/norm_fused.cu (and headers) there
HOST_PROBES = {"p2": 2, "p3": 3}
DECODE = [(1, 4096), (16, 4096), (64, 4096), (128, 4096), (1, 5120), (16, 5120), (64, 5120)]
BIG = [(8192, 8192), (8192, 4096), (4096, 5120), (8192, 16384)]
FUSED = [(1, 4096), (64, 4096), (1, 5120), (64, 5120), (8192, 8192), (8192, 4096)]
COMPILE_SHAPES = {(8192, 8192), (8192, 16384), (8192, 4096), (64, 4096)}


def module(name: str, flags: str = "", kernels: Path | None = None) -> Any:
    base = norm_spec("bf16")
    fl = tuple(flags.split())
    sources = base.sources
    if kernels is not None:  # NOTE: the current binding with other kernel units, for A/B runs
        sources = (base.sources[0], kernels / "norm_rmsnorm.cu", kernels / "norm_fused.cu")
    spec = dataclasses.replace(
        base,
        uri=f"normx_{name}",
        sources=sources,
        cflags=base.cflags + fl,
        cuda_cflags=base.cuda_cflags + fl,
    )
    t = time.perf_counter()
    mod = build_and_load(spec)
    print(f"built {spec.uri} in {time.perf_counter() - t:.2f} s", flush=True)
    return mod


def graph_us(calls: list[Callable[[], Any]], per_graph: int, replays: int = 40) -> float:
    n = max(per_graph, len(calls))
    for c in calls:
        c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for j in range(n):
            calls[j % len(calls)]()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / n)
    return statistics.median(times)


def event_us(calls: list[Callable[[], Any]], n: int = 200) -> float:
    """Median µs of one call between two events, eager launches (the harness's cuda_event)."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    ev = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]
    for i, (s, e) in enumerate(ev):
        s.record()
        calls[i % len(calls)]()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in ev)


TIMING = "graph"


def interleaved(
    impls: dict[str, Callable[[int], Callable[[], Any]]], k: int, per_graph: int, rounds: int
) -> dict[str, list[float]]:
    """µs per call of every implementation (graph replay or events), ``rounds`` times, in turn."""
    results: dict[str, list[float]] = {n: [] for n in impls}
    for _ in range(rounds):
        for name, mk in impls.items():
            calls = [mk(i) for i in range(k)]
            us = graph_us(calls, per_graph) if TIMING == "graph" else event_us(calls)
            results[name].append(us)
    return results


def rotation(nbytes_per_set: int) -> int:
    return max(2, min(128, (2 * L2) // max(1, nbytes_per_set) + 1))


def peers(fused: bool, shape: tuple[int, int]) -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    try:
        import flashinfer.norm as fi

        if fused:
            out["flashinfer"] = lambda x, r, w: fi.fused_add_rmsnorm(x, r, w, eps=EPS)
        else:
            out["flashinfer"] = lambda x, w: fi.rmsnorm(x, w, eps=EPS)
    except Exception as exc:
        print("no flashinfer:", exc)
    if not fused:
        try:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction

            from ember.bench.routines.norm import liger_arguments

            extra = liger_arguments(LigerRMSNormFunction.forward, EPS)
            assert not isinstance(extra, str), extra
            out["liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, *extra)
        except Exception as exc:
            print("no liger:", exc)
    if shape in COMPILE_SHAPES:
        torch._dynamo.reset()
        if fused:

            def f(x: Any, r: Any, w: Any) -> None:
                r.add_(x)
                v = r.float()
                x.copy_((v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w)

            out["torch_compile"] = torch.compile(f, dynamic=False)
        else:

            def g(x: Any, w: Any) -> Any:
                v = x.float()
                return (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w

            out["torch_compile"] = torch.compile(g, dynamic=False)
    return out


def close(a: Any, b: Any) -> bool:
    return bool(torch.allclose(a.float(), b.float(), rtol=1.6e-2, atol=1.6e-2))


def run_rmsnorm(mods: dict[str, Any], shapes: list[tuple[int, int]], rounds: int) -> None:
    for t, h in shapes:
        k = rotation(3 * t * h * 2)
        w = torch.randn(h, device="cuda").to(DT)
        xs = [torch.randn(t, h, device="cuda").to(DT) for _ in range(k)]
        os_ = [torch.empty(t, h, device="cuda", dtype=DT) for _ in range(k)]
        impls: dict[str, Callable[[int], Callable[[], Any]]] = {}
        for name, mod in mods.items():
            impls[name] = lambda i, m=mod: lambda: m.rmsnorm(xs[i], w, os_[i], EPS)
        for name, fn in peers(False, (t, h)).items():
            impls[name] = lambda i, f=fn: lambda: f(xs[i], w)
        ref = rmsnorm_ref(xs[0], w)
        bad = []
        for name, mk in impls.items():
            os_[0].fill_(float("nan"))
            res = mk(0)()
            got = os_[0] if name in mods else res
            if not close(got, ref):
                bad.append(name)
        results = interleaved(impls, k, 32 if t * h <= 1 << 20 else 8, rounds)
        report(f"rmsnorm {t}x{h}", results, 2 * t * h * 2, bad)


def run_fused(mods: dict[str, Any], shapes: list[tuple[int, int]], rounds: int) -> None:
    for t, h in shapes:
        k = rotation(4 * t * h * 2)
        w = torch.randn(h, device="cuda").to(DT)
        xs = [torch.randn(t, h, device="cuda").to(DT) for _ in range(k)]
        rs = [torch.randn(t, h, device="cuda").to(DT) for _ in range(k)]
        impls: dict[str, Callable[[int], Callable[[], Any]]] = {}
        for name, mod in mods.items():
            impls[name] = lambda i, m=mod: lambda: m.fused_add_rmsnorm(xs[i], rs[i], w, EPS)
        for name, fn in peers(True, (t, h)).items():
            impls[name] = lambda i, f=fn: lambda: f(xs[i], rs[i], w)
        x0, r0 = xs[0].clone(), rs[0].clone()
        want_x, want_r = fused_add_rmsnorm_ref(x0, r0, w)
        bad = []
        for name, mk in impls.items():
            xs[0].copy_(x0)
            rs[0].copy_(r0)
            mk(0)()
            if not (close(xs[0], want_x) and close(rs[0], want_r)):
                bad.append(name)
        results = interleaved(impls, k, 32 if t * h <= 1 << 20 else 8, rounds)
        report(f"fused {t}x{h}", results, 4 * t * h * 2, bad)


def report(title: str, results: dict[str, list[float]], nbytes: int, bad: list[str]) -> None:
    med = {n: statistics.median(v) for n, v in results.items()}
    ours = {*VARIANTS, BASELINE}
    best_peer = min((v for n, v in med.items() if n not in ours), default=float("nan"))
    parts = []
    for n, v in med.items():
        rounds = "/".join(f"{x:.2f}" for x in results[n])
        parts.append(f"{n} {v:.2f} ({nbytes / v / 1e3:.0f} GB/s; {rounds})")
    ratio = best_peer / med.get("new", float("nan"))
    print(f"{title}: " + " | ".join(parts) + f" || new speed-up vs best peer {ratio:.3f}x", end="")
    print(f"  BAD: {bad}" if bad else "", flush=True)


def run_host(mods: dict[str, Any], probes: dict[str, Any], rounds: int) -> None:
    import ember

    x = torch.randn(1, 128, device="cuda").to(DT)
    w = torch.randn(128, device="cuda").to(DT)
    o = torch.empty_like(x)
    new = mods["new"]
    held = mods["long_nv4"]  # NOTE: same binding code; its functions keep the GIL for the A/B
    held.rmsnorm_alloc.release_gil = False
    held.rmsnorm.release_gil = False
    cases: dict[str, Callable[[], Any]] = {
        "torch x+x": lambda: x + x,
        "torch.empty_like": lambda: torch.empty_like(x),
        "ember.rmsnorm (api, alloc)": lambda: ember.rmsnorm(x, w),
        "ember.rmsnorm (api, out=)": lambda: ember.rmsnorm(x, w, out=o),
        "ffi rmsnorm_alloc": lambda: new.rmsnorm_alloc(x, w, EPS),
        "ffi rmsnorm out": lambda: new.rmsnorm(x, w, o, EPS),
        "ffi rmsnorm_alloc, GIL held": lambda: held.rmsnorm_alloc(x, w, EPS),
        "ffi rmsnorm out, GIL held": lambda: held.rmsnorm(x, w, o, EPS),
        "ffi runtime-launch out": lambda: mods["runtime_launch"].rmsnorm(x, w, o, EPS),
        "ffi p2 (+guard+stream)": lambda: probes["p2"].rmsnorm(x, w, o, EPS),
        "ffi p3 (launch, no guard)": lambda: probes["p3"].rmsnorm(x, w, o, EPS),
        "python empty_like + ffi out": lambda: new.rmsnorm(x, w, torch.empty_like(x), EPS),
    }
    try:
        import flashinfer.norm as fi

        cases["flashinfer.rmsnorm"] = lambda: fi.rmsnorm(x, w, eps=EPS)
    except Exception as exc:
        print("no flashinfer:", exc)
    n = 20000
    res: dict[str, list[float]] = {c: [] for c in cases}
    for fn in cases.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    for _ in range(rounds + 2):
        for c, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            res[c].append((time.perf_counter() - t0) / n * 1e6)
    # Host cost alone: the GPU is held by a sleep kernel, so 256 launches never wait for it.
    alone: dict[str, list[float]] = {c: [] for c in cases}
    for _ in range(rounds + 2):
        for c, fn in cases.items():
            torch.cuda._sleep(20_000_000)
            t0 = time.perf_counter()
            for _ in range(256):
                fn()
            alone[c].append((time.perf_counter() - t0) / 256 * 1e6)
            torch.cuda.synchronize()
    for c, v in res.items():
        print(
            f"host {c}: {statistics.median(v):.2f} us/call (min {min(v):.2f}); "
            f"host alone {statistics.median(alone[c]):.2f}; rounds "
            + " ".join(f"{r:.2f}" for r in v),
            flush=True,
        )


def run_ncu(mods: dict[str, Any]) -> None:
    for t, h in [(64, 4096), (8192, 8192)]:
        x = torch.randn(t, h, device="cuda").to(DT)
        w = torch.randn(h, device="cuda").to(DT)
        o = torch.empty_like(x)
        fns = {n: (lambda m=m: m.rmsnorm(x, w, o, EPS)) for n, m in mods.items()}
        for n, f in peers(False, (t, h)).items():
            fns[n] = lambda f=f: f(x, w)
        for f in fns.values():  # NOTE: compile/warm outside the profiled range
            f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for n, f in fns.items():
            print("ncu launch", t, h, n, flush=True)
            f()
            torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="decode,big,fused,host")
    ap.add_argument("--ncu", action="store_true")
    ap.add_argument("--variants", default="", help="comma-separated subset of VARIANTS")
    ap.add_argument("--big", default="", help="shapes for `big`, e.g. 8192x8192,8192x16384")
    ap.add_argument("--timing", default="graph", help="graph, event or graph,event")
    ap.add_argument("--baseline", default=None, help="dir with older norm kernel units to A/B")
    a = ap.parse_args()
    keep = a.variants.split(",") if a.variants else list(VARIANTS)
    mods = {n: module(n, VARIANTS[n]) for n in keep}
    if a.baseline:
        mods[BASELINE] = module(BASELINE, kernels=Path(a.baseline).resolve())
    if a.ncu:
        run_ncu(mods)
        return
    only = set(a.only.split(","))
    big = [tuple(int(v) for v in s.split("x")) for s in a.big.split(",")] if a.big else BIG
    if "host" in only:
        probes = {n: module(n, f"-DEMBER_NORM_PROBE={v}") for n, v in HOST_PROBES.items()}
        run_host(mods, probes, a.rounds)
    global TIMING
    for TIMING in a.timing.split(","):
        print(f"== timing {TIMING}", flush=True)
        if "decode" in only:
            run_rmsnorm(mods, DECODE, a.rounds)
        if "fused" in only:
            run_fused(mods, FUSED, a.rounds)
        if "big" in only:
            run_rmsnorm(mods, big, a.rounds)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
