"""A/B probe of decode-kernel variants on the GPU (device diagnostic; not part of the harness).

    python tools/decode_probe.py [--variants base,s2] [--cases u64,skew] [--rounds 3]

Each variant is the decode spec with extra -D flags under its own uri, swapped into
``ember.ops.decode``'s module cache so that planning (its occupancy) and running use it. Every
variant's output is checked against the fp64 reference before it is timed; the time is the
median over rounds of CUDA-graph replays of 20 calls (inputs larger than L2), variants
interleaved within each round. Bytes as the harness counts them (K and V rows attended).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from ember.bench.routines.decode import decode_lengths
from ember.jit import build_and_load, build_many
from ember.jit.workspace import CSRC_DIR, Workspace
from ember.ops import decode as dec
from ember.testing import page_table
from ember.testing.reference import batch_decode_ref

REPO = Path(__file__).resolve().parent.parent
# name -> extra -D flags, optionally "@<commit>": built from decode_tc.cuh as it was at that
# commit (decode.cu, decode.cc, decode.cuh and the async-copy calls it makes are unchanged since
# session 13, so a removed switch builds again as it was). Those switches were removed on probe
# timings that ran the default module for every variant (see run_variant), so none of them was
# measured; each "@" block starts with that header's own default ("b..."), as it may differ.
VARIANTS: dict[str, str] = {
    "base": "",
    "s2": "-DEMBER_DECODE_STAGES16=2 -DEMBER_DECODE_STAGES8=2 -DEMBER_DECODE_MINB=3",
    # 2 stages at 2 CTAs an SM (the registers' limit): one 32 KB tile in flight a CTA while the
    # other is computed, as much as FlashInfer's single-buffered K / V keep in flight
    "s2b": "-DEMBER_DECODE_STAGES16=2",
    # FlashInfer's pipeline shape: 128-token iterations, 32 tokens a warp, K and V single-buffered
    "kv2": "-DEMBER_DECODE_KV2=1",
    "f3": "-DEMBER_DECODE_STAGES8=3",
    "v1": "-DEMBER_DECODE_TC=0",
    "fp8r2": "-DEMBER_DECODE_MINB=2",  # the register fp8 path at 2 CTAs per SM
    "fp8pass": "-DEMBER_DECODE_FP8_REGS=0",  # fp8 through a 16-bit shared-memory copy
    # the register fp8 path at 4 CTAs an SM (16 warps; 128 registers, 80 bytes of stack) and 3
    # stages so that 4 fit: session 15's ncu found 12 warps an SM at 67 % issue
    "fp8r4": "-DEMBER_DECODE_MINB=4 -DEMBER_DECODE_STAGES8=3",
    # 128-token fp8 tiles, 32 tokens a warp (session 21): 2 stages at 3 CTAs an SM (168
    # registers, 44 bytes spilled), or 3 stages at 2 (207 registers, no spills); with the bit-move
    # conversion they were measured with
    "f32a": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=2 -DEMBER_DECODE_FP8_CONV=0",
    "f32b": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=2"
    " -DEMBER_DECODE_FP8_CONV=0",
    # the fp8 conversion: bit moves (the default until session 23), masks and one shift a pair
    # (7 instructions a register, not 10); the default since is the hardware cvt (2 a pair)
    "c0": "-DEMBER_DECODE_FP8_CONV=0",
    "cv": "-DEMBER_DECODE_FP8_CONV=1",
    # 128-token fp8 tiles with the cvt conversion: 3 stages at 2 CTAs an SM, or 2 at 3
    "f32c": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=2",
    "f32c2": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=2",
    "f32bc": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=2"
    " -DEMBER_DECODE_FP8_CONV=1",
    "f32ac": "-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=2 -DEMBER_DECODE_FP8_CONV=1",
    # session 14 (fp8): cvt.rn.f16x2.e4m3x2 conversion; the lazy O rescale
    "b14": "@a0b5bbb",
    "cvt": "-DEMBER_DECODE_FP8_CVT=1 @a0b5bbb",
    "lazy": "-DEMBER_DECODE_LAZY=2 @a0b5bbb",
    "cvtlazy": "-DEMBER_DECODE_FP8_CVT=1 -DEMBER_DECODE_LAZY=2 @a0b5bbb",
    # session 16: two chunks a thread a row and 32-bit in-page offsets (17 % fewer loop
    # instructions); units fastest in the grid
    "b16": "@7e934a2",
    "cpt": "-DEMBER_DECODE_CPT=2 -DEMBER_DECODE_ADDR32=1 @7e934a2",
    "ufast": "-DEMBER_DECODE_UNIT_FAST=1 @5e2097f",
    # session 17: Q K^T split, one barrier a tile; the persistent kernel; page numbers 3 tiles
    # ahead with the one-round combine; the L2 prefetch hint
    "b17": "@6bfabe2",
    "qkob": "-DEMBER_DECODE_QK_SPLIT=1 -DEMBER_DECODE_ONEBAR=1 @6bfabe2",
    "persist": "-DEMBER_DECODE_PERSIST=1 @6bfabe2",
    "l3c": "-DEMBER_DECODE_PG_LEAD=3 -DEMBER_DECODE_COMBINE2=1 @038d343",
    "l2pf": "-DEMBER_DECODE_L2PF=256 @038d343",
    # session 24's loop diet (the softmax on the real row only, one MUFU a 2^x, the lazy O
    # rescale, the cvt halves in place, 32-bit in-page addressing, the row sum summed once),
    # taken back out of the default until a GPU has run it; "b23" is that default's own header
    "b23": "@634da9f",
    "lean": "@9ee245d",
    # session 25: tokens as the MMA's M (half the MMAs, O^T in 32 registers); with 3 fp8 stages
    # at 4 CTAs an SM (its 116 registers allow 4 where the default's 168 allow 3)
    # (session 26: the default is EMBER_DECODE_TMMA=2, TMMA for fp8 KV only; "tm0" is the old
    # default, "tmma" TMMA for every KV dtype)
    "tm0": "-DEMBER_DECODE_TMMA=0",
    "tmma": "-DEMBER_DECODE_TMMA=1",
    # session 26: the K/V copies' address diet (bf16 503 -> 431 instructions a tile, 398 with
    # TMMA; fp8 371 -> 341), alone and with TMMA for 16-bit KV too (the default since session
    # 27: "addr" is then the default's SASS, "addr0" the element-unit form before it)
    "addr": "-DEMBER_DECODE_ADDR=1",
    "addr0": "-DEMBER_DECODE_ADDR=0",
    "addrtm": "-DEMBER_DECODE_ADDR=1 -DEMBER_DECODE_TMMA=1",
    "tmma4": "-DEMBER_DECODE_TMMA=1 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=4",
}
# name -> (batch, mean tokens, qo heads, kv heads, head_dim, page, lengths, kv dtype)
CASES: dict[str, tuple[int, int, int, int, int, int, str, str]] = {
    "u64": (64, 4096, 32, 8, 128, 16, "uniform", "same"),
    "u256": (256, 1024, 64, 8, 128, 16, "uniform", "same"),
    "u128": (128, 2048, 32, 4, 128, 16, "uniform", "same"),
    "skew": (64, 4096, 32, 8, 128, 16, "pareto", "same"),
    "small": (4, 32768, 32, 8, 128, 16, "uniform", "same"),
    "page1": (32, 4096, 32, 8, 128, 1, "uniform", "same"),
    "fp8": (64, 4096, 32, 8, 128, 16, "uniform", "e4m3"),
    "fp8skew": (64, 4096, 32, 8, 128, 16, "pareto", "e4m3"),
    # the uniform shapes with the other group size (session 17: does G or the length set the rate?)
    "u256g4": (256, 1024, 32, 8, 128, 16, "uniform", "same"),
    "u64g8": (64, 4096, 64, 8, 128, 16, "uniform", "same"),
    # L2-resident (16.7 MB of K/V, replayed hot; not a bandwidth figure). Session 26 meant these
    # to show the loop's issue rate, but 8-16 unsplit requests fill 64-128 CTAs: latency
    "hot8": (16, 512, 32, 8, 128, 16, "uniform", "e4m3"),
    "hot16": (8, 512, 32, 8, 128, 16, "uniform", "same"),
    "hot16g8": (8, 512, 64, 8, 128, 16, "uniform", "same"),
    # two or three long requests (25-34 MB, still mostly L2-resident), which the planner can cut
    # into 256-token units to cover every SM (the probe prints the units): the issue rate
    "hot8s": (3, 4096, 32, 8, 128, 16, "uniform", "e4m3"),
    "hot16s": (2, 4096, 32, 8, 128, 16, "uniform", "same"),
    "hot16g8s": (2, 4096, 64, 8, 128, 16, "uniform", "same"),
}


def old_header_source(commit: str) -> Path:
    """decode.cu including ``decode_tc.cuh`` as it was at ``commit`` (a removed switch's code):
    the header from ``.snap/decode_tc_<commit>.cuh`` (written from git here when missing; the
    device copy gets it by carrying ``.snap``), the source under EMBER_CACHE_DIR/probe."""
    header = REPO / ".snap" / f"decode_tc_{commit}.cuh"
    if not header.exists():
        text = subprocess.run(
            ["git", "show", f"{commit}:ember/csrc/include/ember/decode_tc.cuh"],
            cwd=REPO, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        header.parent.mkdir(exist_ok=True)
        header.write_text(text)
    cu = (CSRC_DIR / "ops" / "decode.cu").read_text()
    inc = '#include "ember/decode_tc.cuh"'
    assert inc in cu, "decode.cu no longer includes decode_tc.cuh by that name"
    out = Workspace.current().root / "probe" / commit / "decode.cu"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cu.replace(inc, f'#include "{header.resolve()}"'))
    return out


def variant_spec(name: str, flags: str, key: tuple[str, str, int, int]) -> Any:
    base = dec.decode_spec(*key)
    flags, _, commit = flags.partition("@")
    fl = tuple(flags.split())
    sources = base.sources
    if commit:
        sources = tuple(old_header_source(commit) if s.name == "decode.cu" else s for s in sources)
    return dataclasses.replace(
        base,
        uri=f"{base.uri}_x{name}",
        sources=sources,
        cflags=base.cflags + fl,
        cuda_cflags=base.cuda_cflags + fl,
    )


def variant_module(name: str, flags: str, key: tuple[str, str, int, int]) -> Any:
    spec = variant_spec(name, flags, key)
    t = time.perf_counter()
    mod = build_and_load(spec)
    print(f"built {spec.uri} in {time.perf_counter() - t:.2f} s", flush=True)
    return mod


def run_variant(key: tuple[str, str, int, int], mod: Any, *args: Any) -> None:
    """One decode call through ``mod``: batch_decode looks its module up at call time, so the
    variant is put back in the cache before each call (the capture records that module's
    launch). Until session 22 the probe bound only the plan, and every variant's timing ran the
    default module (rebuilt from the cache after the pop below) on the variant's plan."""
    dec._DECODE[key] = mod
    q, cache, plan, out = args
    dec.batch_decode(q, cache, plan, out=out)
    assert dec._DECODE[key] is mod


def case_key(case: tuple[int, int, int, int, int, int, str, str]) -> tuple[str, str, int, int]:
    """The decode module a case runs: (q, kv, head_dim, group); q is bf16."""
    _, _, hq, hk, dim, _, _, kvd = case
    return ("bf16", "e4m3" if kvd == "e4m3" else "bf16", dim, hq // hk)


def graph_us(fn: Any, per_graph: int = 20, replays: int = 15) -> float:
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(per_graph):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / per_graph)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    variants = a.variants.split(",")
    dt = torch.bfloat16
    # every (variant, specialization) module built first, all at once (build_many); the loop
    # below then loads them from the cache
    keys = sorted({case_key(CASES[c]) for c in a.cases.split(",")})
    t = time.perf_counter()
    specs = [variant_spec(v, VARIANTS[v], k) for v in variants for k in keys]
    bad = [r for r in build_many(specs) if not isinstance(r, Path)]
    print(f"built {len(specs)} modules in {time.perf_counter() - t:.1f} s", flush=True)
    for r in bad:
        print(f"build failed: {r}", flush=True)
    for cname in a.cases.split(","):
        b, mean, hq, hk, dim, page, dist, kvd = CASES[cname]
        fp8 = kvd == "e4m3"
        key = case_key(CASES[cname])
        lengths = decode_lengths(b, mean, dist)
        h_indptr, h_last = page_table(lengths, page)
        pages = int(h_indptr[-1])
        cache = torch.randn(pages, 2, page, hk, dim, device="cuda")
        cache = cache.to(torch.float8_e4m3fn) if fp8 else cache.to(dt)
        indices = torch.randperm(pages).to(torch.int32).cuda()
        q = torch.randn(b, hq, dim, device="cuda").to(dt)
        d_indptr, d_last = h_indptr.cuda(), h_last.cuda()
        ref, _ = batch_decode_ref(
            q, cache[:, 0], cache[:, 1], d_indptr, indices, h_last, layout="NHD"
        )
        nbytes = sum(lengths) * hk * dim * 2 * (1 if fp8 else 2)
        fns = {}
        for v in variants:
            mod = dec._DECODE[key] = variant_module(v, VARIANTS[v], key)
            ws = dec.DecodeWorkspace("cuda", max_batch=b, num_qo_heads=hq, head_dim=dim)
            plan = dec.plan_batch_decode(
                d_indptr, indices, d_last, num_qo_heads=hq, num_kv_heads=hk, head_dim=dim,
                page_size=page, workspace=ws, q_dtype=dt, kv_dtype=key[1],
                host_indptr=h_indptr, host_last_page_len=h_last,
            )  # fmt: skip
            out = torch.full_like(q, float("nan"))
            dec.batch_decode(q, cache, plan, out=out)
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            ok = bool(torch.isfinite(out).all()) and err < 2e-2
            wave = ws.wave(*key)[1]
            print(
                f"{cname} {v}: units {plan.n_work} chunk {plan.chunk} partials {plan.n_partials} "
                f"wave {wave} max err {err:.2e} {'ok' if ok else 'WRONG'}",
                flush=True,
            )
            if ok:
                fns[v] = functools.partial(run_variant, key, mod, q, cache, plan, out)
        dec._DECODE.pop(key, None)
        res: dict[str, list[float]] = {v: [] for v in fns}
        for _ in range(a.rounds):
            for v, fn in fns.items():
                res[v].append(graph_us(fn))
        for v, ts in res.items():
            us = statistics.median(ts)
            print(f"  {cname:8s} {v:6s} {us:8.1f} us  {nbytes / us / 1e3:7.0f} GB/s  rounds {ts}")
        del cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
