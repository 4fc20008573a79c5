"""A NumPy model of the sampling filters' radix select (``radix_select`` in
ember/csrc/include/ember/sampling_filter.cuh; one CTA stands for the cluster), checked against
the exact kept-set reference (``ember.testing.reference.filter_threshold_ref``) on random rows:
peaked and flat, zeros, ties, top-k/top-p/min-p combined, and the first pass's cut with its retry.

    python tools/radix_emulate.py [--trials 300] [--relative] [--stream]
    # prints the mismatches, retries and (--stream) the streaming kernel's fallbacks seen
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from ember.testing.reference import filter_threshold_ref

RETRIES: list[int] = []
STREAM_FALLBACKS: list[int] = []
ABSOLUTE = (24, 16, 8, 0)  # digit shifts over the whole 32-bit key
RELATIVE = (20, 12, 4, 0)  # over key - bound when the bound is the cut or above (< 2^28 keys)


def order_key(x: np.ndarray) -> np.ndarray:
    b = x.view(np.uint32).astype(np.uint64)
    return np.where(b & 0x80000000, (~b) & 0xFFFFFFFF, b | 0x80000000).astype(np.uint64)


@dataclass
class Query:
    floor: int
    cut: int
    by_mass: bool
    want: int = 0
    ratio: float = 0.0
    relative: bool = False  # -DEMBER_FILTER_RELATIVE=1
    row_mass: int = 0  # the row's fp64 sum in fixed point (the target's base when floor is 0)
    candidates: bool = False  # filter_stream_kernel: v holds the candidates; below the cut: None


def layout(qy: Query, bound: int) -> tuple[int, tuple[int, ...]]:
    """The digits' base and shifts: keys >= a bound at or above the cut span at most 2^27 (the
    cut is the row maximum's key less 16 exponents), so their offsets from the bound need 28 bits
    and level 0's digit (offset >> 20, at most 128) spreads over the bins."""
    if qy.relative and qy.cut != 0 and bound >= qy.cut:
        return bound, RELATIVE
    return 0, ABSOLUTE


def select(v: np.ndarray, scale: np.float32, qy: Query) -> int | None:
    k = order_key(v)
    q = np.trunc(v * scale).astype(np.uint64) if qy.by_mass else np.ones_like(k)
    for attempt in range(2):
        bound = qy.cut if attempt == 0 and qy.cut > qy.floor else qy.floor
        prefix, need, retry = 0, qy.want, False
        base, shifts = layout(qy, bound)
        r = (k - base) & 0xFFFFFFFF  # (only keys >= bound, so >= base, are ever selected)
        for level in range(4):
            shift = shifts[level]
            high = 0 if level == 0 else (0xFFFFFFFF << shifts[level - 1]) & 0xFFFFFFFF
            width = 8 if level == 0 else shifts[level - 1] - shift
            sel = (k >= bound) & ((r & high) == prefix)
            below = (k < bound) & (k >= qy.floor)
            rest = int(q[below].sum()) if level == 0 and bound != qy.floor else 0
            bins = ((r[sel] >> shift) & ((1 << width) - 1)).astype(np.int64)
            assert level > 0 or int(r[sel].max(initial=0)) >> shift < 256
            sums = [int(q[sel][bins == b].sum()) for b in range(256)]
            own = sums[::-1]  # thread t holds bin 255 - t
            incl = list(itertools.accumulate(own))
            if level == 0 and qy.by_mass:
                everything = incl[-1] + rest
                if qy.floor == 0:
                    everything = max(qy.row_mass, incl[-1])
                goal = math.ceil(float(np.float32(qy.ratio)) * float(everything))
                need = 1 if goal < 1 else min(goal, everything)
            pick = None
            for t in range(256):
                if incl[t] >= need and incl[t] - own[t] < need and own[t] != 0:
                    pick = (255 - t, incl[t] == need, incl[t] - own[t])
            if pick is None:
                if qy.candidates:
                    return None
                retry = True
                RETRIES.append(1)
                break
            prefix |= pick[0] << shift
            need -= pick[2]
            if pick[1] or level == 3:
                return max(base + prefix, bound)
        if not retry:
            break
    return qy.floor


def threshold_key(
    v: np.ndarray,
    top_k: int,
    top_p: float,
    min_p: float,
    *,
    relative: bool = False,
    stream: np.random.Generator | None = None,
) -> int:
    """The kept set's key (keep ``order_key(v) >= it``). ``stream``: model filter_stream_kernel
    first (the select over the candidates only: every value at or above the cut and, as the
    running cut admits them, some below it), falling back to the whole row as it does."""
    m = np.float32(v.max())
    if not m > 0:
        return 0
    scale = np.float32(np.float32(2.0**40) / m)
    cut_v = m * np.float32(1.52587890625e-05)
    cut = int(order_key(np.array([cut_v], dtype=np.float32))[0])
    row_mass = math.trunc(float(v.astype(np.float64).sum()) * float(scale))
    if stream is not None:
        extra = (v < cut_v) & (v > 0) & (stream.random(v.size) < 0.3)
        c = v[(v >= cut_v) | extra]
        tau = 0
        ok = True
        if 0 < top_k < v.size:
            got = select(c, scale, Query(0, cut, False, want=top_k, relative=True, candidates=True))
            ok = got is not None
            tau = got or 0
        if ok and top_p < 1:
            q = Query(tau, cut, True, ratio=top_p, relative=True, row_mass=row_mass,
                      candidates=True)  # fmt: skip
            got = select(c, scale, q)
            ok = got is not None
            tau = max(tau, got or 0)
        if min_p > 0:
            m_thr = np.array([np.float32(min(min_p, 1)) * m], dtype=np.float32)
            tau = max(tau, int(order_key(m_thr)[0]))
        if ok and tau >= cut:
            return tau
        STREAM_FALLBACKS.append(1)
    tau = 0
    if 0 < top_k < v.size:
        tau = select(v, scale, Query(0, cut, False, want=top_k, relative=relative)) or 0
    if top_p < 1:
        q = Query(tau, cut, True, ratio=top_p, relative=relative, row_mass=row_mass)
        tau = max(tau, select(v, scale, q) or 0)
    if min_p > 0:
        m_thr = np.array([np.float32(min(min_p, 1)) * m], dtype=np.float32)
        tau = max(tau, int(order_key(m_thr)[0]))
    return tau


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--relative", action="store_true", help="model -DEMBER_FILTER_RELATIVE=1")
    ap.add_argument("--stream", action="store_true", help="model filter_stream_kernel first")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    bad = 0
    for trial in range(args.trials):
        n = int(rng.integers(10, 3000))
        sharp = float(rng.choice([0.1, 1, 4, 8]))
        x = torch.softmax(torch.tensor(rng.standard_normal(n) * sharp, dtype=torch.float32), -1)
        if trial % 7 == 0:
            x[rng.integers(0, n, 5)] = 0
        if trial % 11 == 0:
            x = torch.round(x * 50) / 50  # ties (and all-zero rows)
        v = x.numpy().astype(np.float32)
        top_k = int(rng.integers(0, n + 2))
        top_p = float(rng.choice([0.0, 0.3, 0.9, 0.999, 1.0, float(rng.random())]))
        min_p = float(rng.choice([0, 0.05, 0.5]))
        tau = threshold_key(
            v, top_k, top_p, min_p, relative=args.relative, stream=rng if args.stream else None
        )
        kept = order_key(v) >= tau
        thr = filter_threshold_ref(x[None], top_k=top_k, top_p=top_p, min_p=min_p)[0]
        if not np.array_equal(kept, (x >= thr).numpy()):
            bad += 1
            print("mismatch", trial, n, sharp, top_k, top_p, min_p)
    print(
        f"{args.trials} rows: {bad} mismatches, {len(RETRIES)} retries past the cut, "
        f"{len(STREAM_FALLBACKS)} stream fallbacks"
    )
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
