"""Lane-by-lane CPU emulation of decode_tc_kv2_kernel (EMBER_DECODE_KV2=1, 16-bit K/V) in
ember/csrc/include/ember/decode_tc.cuh: one CTA (4 warps) over one unit, every tile.

Emulates the page-table gather of load_rows (thread -> rows and chunk, swz<D>, zero fill past the
unit), the query block's cp.async and ldmatrix, ldmatrix .x4 / .x4.trans and mma.m16n8k16 with
the PTX fragment layouts (tools/decode_fp8_emulate.py's primitives), the per-warp online softmax
over 32 tokens an iteration in the log2 domain, the P fragments and the warps' combine, and
compares the output with fp64 attention. The pipeline's waits and barriers are not modelled (the
GPU tests cover them). Passes for D 64/128, groups 1/4/8, page sizes 1/16, and fails on each of
the planted errors. Run it (python tools/decode_kv2_emulate.py) after any change to the kernel's
layouts.
"""

# ruff: noqa: E501, E741, N803, N806, PLR0912, PLR0915, PLR0917
# (a model of the kernel in its own notation: D, G, lane `l`)

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_fp8_emulate import ldmatrix_x4, mma_m16n8k16, pack2_half

KTILE2, KWARPS = 128, 4
LOG2E = 1.4426950408889634


def swz(D, r, c):
    return r * 2 * D + ((c ^ (r & 7)) << 4)


def f16_bytes(row):
    return np.asarray(row, dtype=np.float16).view(np.uint8)


def run_cta(D, G, page, q, k_cache, v_cache, pages, kv_start, kv_end, sm_scale, bug=None):
    """q [G, D] fp16; k/v_cache [n_pages, page, D] fp16 (one kv head); pages: the request's
    page numbers. Returns the [G, D] output the kernel writes (fp32 before the final cast)."""
    kChunks = 2 * D // 16
    kKS, kNT = D // 16, D // 8
    kRowStep = KWARPS * 32 // kChunks
    qbytes = 16 * 2 * D
    q_smem = np.zeros(qbytes, np.uint8)
    for i in range(16 * kChunks):
        r, c = i // kChunks, i % kChunks
        if r < G:
            q_smem[swz(D, r, c) : swz(D, r, c) + 16] = f16_bytes(q[r, 8 * c : 8 * c + 8])
    qa = [[None] * kKS for _ in range(32)]
    for k in range(kKS):
        addrs = [swz(D, l % 16, 2 * k + l // 16) for l in range(32)]
        regs = ldmatrix_x4(q_smem, addrs, trans=False)
        for l in range(32):
            qa[l][k] = regs[l]

    def load_rows(cache, tile):
        buf = np.full(KTILE2 * 2 * D, 0xAA, np.uint8)
        written = np.zeros(buf.size, np.int32)
        for tid in range(KWARPS * 32):
            r0, cc = tid // kChunks, tid % kChunks
            for j in range(KTILE2 // kRowStep):
                r = r0 + j * kRowStep
                t = kv_start + tile * KTILE2 + r
                off = swz(D, r, cc) if bug != "noswizzle_write" else r * 2 * D + 16 * cc
                if t < kv_end:
                    pg = pages[t // page]
                    s = t - (t // page) * page
                    src = f16_bytes(cache[pg, s, 8 * cc : 8 * cc + 8])
                else:
                    src = np.zeros(16, np.uint8)
                buf[off : off + 16] = src
                written[off : off + 16] += 1
        assert (written == 1).all(), "load_rows does not write every byte exactly once"
        return buf

    scale = sm_scale * LOG2E
    n_tiles = (kv_end - kv_start + KTILE2 - 1) // KTILE2
    m = [[-np.inf, -np.inf] for _ in range(KWARPS * 32)]  # [thread][h]
    lsum = [[0.0, 0.0] for _ in range(KWARPS * 32)]
    o = {w: [[[0.0] * 4 for _ in range(32)] for _ in range(kNT)] for w in range(KWARPS)}
    for tile in range(n_tiles):
        k_smem = load_rows(k_cache, tile)
        v_smem = load_rows(v_cache, tile)
        for w in range(KWARPS):
            row0 = w * 32 if bug != "warp16" else w * 16
            sc = [[[0.0] * 4 for _ in range(32)] for _ in range(4)]
            for k in range(kKS):
                for hh in range(2):
                    addrs = []
                    for l in range(32):
                        r = row0 + 16 * hh + (l // 16) * 8 + l % 8
                        c = 2 * k + (l // 8) % 2
                        addrs.append(swz(D, r, c))
                    b = ldmatrix_x4(k_smem, addrs, trans=False)
                    a = [qa[l][k] for l in range(32)]
                    mma_m16n8k16(
                        sc[2 * hh], a, [b[l][0] for l in range(32)], [b[l][1] for l in range(32)]
                    )
                    mma_m16n8k16(
                        sc[2 * hh + 1],
                        a,
                        [b[l][2] for l in range(32)],
                        [b[l][3] for l in range(32)],
                    )
            # online softmax, a thread's rows lane/4 (h 0) and lane/4 + 8 (h 1)
            mx = [[m[32 * w + l][0], m[32 * w + l][1]] for l in range(32)]
            for l in range(32):
                tok0 = kv_start + tile * KTILE2 + row0 + (l % 4) * 2
                for n in range(4):
                    for j in range(4):
                        x = float(np.float32(sc[n][l][j] * scale))
                        t = tok0 + n * 8 + (j & 1)
                        if bug == "nomask":
                            pass
                        elif t >= kv_end:
                            x = -np.inf
                        sc[n][l][j] = x
                        mx[l][j // 2] = max(mx[l][j // 2], x)
            for h in range(2):  # quad all-reduce (xor 1, 2)
                for l in range(32):
                    base = l & ~3
                    mx[l][h] = max(mx[base + i][h] for i in range(4))
            corr = [[0.0, 0.0] for _ in range(32)]
            for l in range(32):
                for h in range(2):
                    mo = m[32 * w + l][h]
                    corr[l][h] = 1.0 if mx[l][h] == -np.inf else 2.0 ** (mo - mx[l][h])
                    m[32 * w + l][h] = mx[l][h]
            rs = [[0.0, 0.0] for _ in range(32)]
            for l in range(32):
                for n in range(4):
                    for j in range(4):
                        mm = m[32 * w + l][j // 2]
                        e = 0.0 if mm == -np.inf else 2.0 ** (sc[n][l][j] - mm)
                        sc[n][l][j] = e
                        rs[l][j // 2] += e
            for h in range(2):
                tot = [sum(rs[(l & ~3) + i][h] for i in range(4)) for l in range(32)]
                for l in range(32):
                    lsum[32 * w + l][h] = lsum[32 * w + l][h] * corr[l][h] + tot[l]
            for n in range(kNT):
                for l in range(32):
                    o[w][n][l][0] *= corr[l][0]
                    o[w][n][l][1] *= corr[l][0]
                    o[w][n][l][2] *= corr[l][1]
                    o[w][n][l][3] *= corr[l][1]
            pa = []
            for hh in range(2):
                lo, hi = (2 * hh, 2 * hh + 1) if bug != "swap_pa" else (2 * hh + 1, 2 * hh)
                pa.append(
                    [
                        [
                            pack2_half(sc[lo][l][0], sc[lo][l][1]),
                            pack2_half(sc[lo][l][2], sc[lo][l][3]),
                            pack2_half(sc[hi][l][0], sc[hi][l][1]),
                            pack2_half(sc[hi][l][2], sc[hi][l][3]),
                        ]
                        for l in range(32)
                    ]
                )
            for hh in range(2):
                for n in range(0, kNT, 2):
                    addrs = []
                    for l in range(32):
                        r = row0 + 16 * hh + ((l // 8) % 2) * 8 + l % 8
                        c = n + l // 16
                        addrs.append(swz(D, r, c))
                    b = ldmatrix_x4(v_smem, addrs, trans=True)
                    mma_m16n8k16(
                        o[w][n], pa[hh], [b[l][0] for l in range(32)], [b[l][1] for l in range(32)]
                    )
                    mma_m16n8k16(
                        o[w][n + 1],
                        pa[hh],
                        [b[l][2] for l in range(32)],
                        [b[l][3] for l in range(32)],
                    )
    # the warps' combine
    kO = D + 8
    so = np.zeros((KWARPS, 16, kO))
    smx = np.full((KWARPS, 16), -np.inf)
    sl = np.zeros((KWARPS, 16))
    for w in range(KWARPS):
        for l in range(32):
            for h in range(2):
                r = l // 4 + 8 * h
                if l % 4 == 0:
                    smx[w, r] = m[32 * w + l][h]
                    sl[w, r] = lsum[32 * w + l][h]
                for n in range(kNT):
                    d = n * 8 + (l % 4) * 2
                    so[w, r, d] = o[w][n][l][2 * h]
                    so[w, r, d + 1] = o[w][n][l][2 * h + 1]
    out = np.zeros((G, D))
    for g in range(G):
        mxg = smx[:, g].max()
        if mxg == -np.inf:
            continue
        c = 2.0 ** (smx[:, g] - mxg)
        s = (sl[:, g] * c).sum()
        out[g] = (so[:, g, :D] * c[:, None]).sum(0) / s
    return out


def check(D, G, page, length, start=0, bug=None, seed=0):
    rng = np.random.default_rng(seed)
    n_pages = (length + page - 1) // page
    pool = n_pages + 5
    pages = rng.permutation(pool)[:n_pages]
    k_cache = rng.standard_normal((pool, page, D)).astype(np.float16)
    v_cache = rng.standard_normal((pool, page, D)).astype(np.float16)
    q = rng.standard_normal((G, D)).astype(np.float16)
    sm_scale = 1.0 / np.sqrt(D)
    got = run_cta(D, G, page, q, k_cache, v_cache, pages, start, length, sm_scale, bug)
    toks = np.arange(start, length)
    K = k_cache[pages[toks // page], toks % page].astype(np.float64)
    V = v_cache[pages[toks // page], toks % page].astype(np.float64)
    logits = q.astype(np.float64) @ K.T * sm_scale
    p = np.exp(logits - logits.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ V
    return float(np.abs(got - ref).max() / np.abs(ref).max())  # relative to the output's size


def main() -> int:
    ok = True
    for D, G, page, length, start in [
        (128, 8, 16, 300, 0),
        (128, 4, 1, 200, 0),
        (64, 1, 16, 140, 0),
        (64, 8, 16, 384, 128),
        (128, 1, 16, 57, 0),
    ]:
        err = check(D, G, page, length, start)
        good = err < 1e-2  # P in fp16, exact fp16 products in float64
        ok &= good
        print(
            f"D={D} G={G} page={page} tokens [{start}, {length}): max err {err:.2e} (relative) {'ok' if good else 'FAIL'}"
        )
    for bug in ("noswizzle_write", "warp16", "nomask", "swap_pa"):
        try:
            err = check(128, 8, 16, 300, bug=bug)
            caught = err > 5e-2
        except AssertionError:
            caught = True
        ok &= caught
        print(f"planted {bug}: {'caught' if caught else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
