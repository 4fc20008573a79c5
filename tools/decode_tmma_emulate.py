"""Lane-by-lane CPU emulation of decode_tc_kernel's EMBER_DECODE_TMMA=1 path
(ember/csrc/include/ember/decode_tc.cuh): tokens as the MMA's M, heads as its N. One warp's 16
tokens of one 64-token tile, for fp8 e4m3 K/V (raw rows, swz8) and 16-bit K/V (swz).

Emulates: load_tile's thread -> chunk mapping, ldmatrix .x4 / .x4.trans and mma.m16n8k16 (from
tools/decode_fp8_emulate.py, PTX ISA fragment semantics), movmatrix.m8n8.trans, the qb fragment
load, S^T's two k-step chains, P^T's packing, O^T's m-tiles and the combine's stores into
so[head][dim]. The softmax between them is scalar code the GPU tests check; here P is random.
Passes for D 64/128, groups 1/4/8, warps 0-3, both K/V widths, and fails on each planted error.
Run it (python tools/decode_tmma_emulate.py) after any change to the TMMA path's layouts;
tests/unit/test_decode_tmma_model.py runs it in CI.
"""

# ruff: noqa: B023, E501, E731, E741, N803, N806, PLR0912, PLR0915, PLR0917
# (a model of the kernel in its own notation: D, G, lane `l`, per-iteration closures used at once)

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_fp8_emulate import (
    KTILE,
    KWARPS,
    e4m3_pairs_to_half,
    e4m3_val,
    ldmatrix_x4,
    mma_m16n8k16,
    pack2_half,
    rand_e4m3,
    rel_errors,
    swz8,
)

BUGS = (
    "q_2c_pairs",  # fp8: q's B rows as the standard 2c layout, not K's converted pairs
    "k_a_order",  # A from one token half only: {f0.lo, f0.hi, f1.lo, f1.hi}
    "no_movmatrix",  # P's accumulators used as B without the transpose
    "v_a_order",  # fp8 V: {ev0, ev1, od0, od1}
    "v_rows",  # 16-bit V: the K row mapping (tokens 8 ((l / 8) % 2)) for V's transposed load
    "store_rows",  # the combine's dims as the 16-bit layout for fp8 (or the reverse)
)


def movmatrix_t(regs):
    """movmatrix.sync.aligned.m8n8.trans.b16: regs[lane] holds row lane/4, columns 2(lane%4)
    and +1 (low half first) of an 8 x 8 matrix of b16; returns the transpose in that layout."""
    M = np.zeros((8, 8), dtype=np.int64)
    for t in range(32):
        M[t // 4, 2 * (t % 4)] = regs[t] & 0xFFFF
        M[t // 4, 2 * (t % 4) + 1] = regs[t] >> 16
    T = M.T
    return [int(T[t // 4, 2 * (t % 4)]) | int(T[t // 4, 2 * (t % 4) + 1]) << 16 for t in range(32)]


def swz16(D, r, c):  # swz<D>: 16-bit rows of 2D bytes
    return r * 2 * D + ((c ^ (r & 7)) << 4)


def f16_bytes(x):
    return np.frombuffer(x.astype(np.float16).tobytes(), dtype=np.uint8).reshape(x.shape[0], -1)


def run_warp(D, G, warp, fp8, K, V, q16, P16, bug=None):
    """K, V: the tile's 64 rows as stored (uint8 e4m3 codes [64, D], or float16 [64, D])."""
    row_bytes = D if fp8 else 2 * D
    chunks = row_bytes // 16
    kKS = D // 16
    sw = (lambda r, c: swz8(row_bytes, r, c)) if fp8 else (lambda r, c: swz16(D, r, c))
    Kb = K if fp8 else f16_bytes(K)
    Vb = V if fp8 else f16_bytes(V)

    # load_tile: cp.async16 of every thread's chunk cc of rows r0, r0 + kRowStep, ...
    ks, vs = 0, KTILE * row_bytes
    smem = np.full(2 * KTILE * row_bytes, 0xAA, dtype=np.uint8)
    written = np.zeros(smem.size, dtype=np.int32)
    step = KWARPS * 32 // chunks
    for tid in range(KWARPS * 32):
        r0, cc = tid // chunks, tid % chunks
        for j in range(KTILE // step):
            r = r0 + j * step
            off = sw(r, cc)
            smem[ks + off : ks + off + 16] = Kb[r, 16 * cc : 16 * cc + 16]
            smem[vs + off : vs + off + 16] = Vb[r, 16 * cc : 16 * cc + 16]
            written[ks + off : ks + off + 16] += 1
            written[vs + off : vs + off + 16] += 1
    assert (written == 1).all(), "load_tile does not write every byte exactly once"

    # qb: head g = lane / 4 (zero from G on), two registers a k-step.
    qb = [[[0, 0] for _ in range(kKS)] for _ in range(32)]
    for lane in range(32):
        g, c = lane // 4, lane % 4
        qrow = q16[g] if g < G else np.zeros(D, np.float16)
        for k in range(kKS):
            if fp8 and bug != "q_2c_pairs":
                e = [qrow[16 * k + 4 * c + i] for i in range(4)]
            else:
                b = 16 * k + 2 * c
                e = [qrow[b], qrow[b + 1], qrow[b + 8], qrow[b + 9]]
            qb[lane][k] = [
                pack2_half(float(e[0]), float(e[1])),
                pack2_half(float(e[2]), float(e[3])),
            ]

    row0 = warp * 16
    rk = [row0 + ((l // 8) % 2) * 8 + l % 8 for l in range(32)]
    rv16 = [row0 + (l // 16) * 8 + l % 8 for l in range(32)]
    rv = rk if fp8 or bug == "v_rows" else rv16
    lanes = range(32)

    # S^T = K Q^T, even k-steps into st, odd into su, then st += su.
    st = [[0.0] * 4 for _ in lanes]
    su = [[0.0] * 4 for _ in lanes]
    if fp8:
        for k in range(0, kKS, 2):
            b = ldmatrix_x4(smem, [ks + sw(rk[l], k + l // 16) for l in lanes], trans=False)
            f = [[e4m3_pairs_to_half(b[l][j], 0x4140, 0x4342) for j in range(4)] for l in lanes]
            if bug == "k_a_order":
                a0 = [[f[l][0][0], f[l][0][1], f[l][1][0], f[l][1][1]] for l in lanes]
                a1 = [[f[l][2][0], f[l][2][1], f[l][3][0], f[l][3][1]] for l in lanes]
            else:
                a0 = [[f[l][0][0], f[l][1][0], f[l][0][1], f[l][1][1]] for l in lanes]
                a1 = [[f[l][2][0], f[l][3][0], f[l][2][1], f[l][3][1]] for l in lanes]
            mma_m16n8k16(st, a0, [qb[l][k][0] for l in lanes], [qb[l][k][1] for l in lanes])
            mma_m16n8k16(su, a1, [qb[l][k + 1][0] for l in lanes], [qb[l][k + 1][1] for l in lanes])
    else:
        for k in range(kKS):
            a = ldmatrix_x4(smem, [ks + sw(rk[l], 2 * k + l // 16) for l in lanes], trans=False)
            if bug == "k_a_order":
                a = [[x[0], x[2], x[1], x[3]] for x in a]
            mma_m16n8k16(
                st if k % 2 == 0 else su,
                a,
                [qb[l][k][0] for l in lanes],
                [qb[l][k][1] for l in lanes],
            )
    for l in lanes:
        for j in range(4):
            st[l][j] = float(np.float32(st[l][j] + su[l][j]))
    # S as the kernel holds it: token row0 + lane/4 + 8 (j / 2), head 2 (lane % 4) + j % 2
    S = np.zeros((16, 8))
    for l in lanes:
        for j in range(4):
            S[l // 4 + 8 * (j // 2), 2 * (l % 4) + j % 2] = st[l][j]

    # P (random, in S's layout) -> P^T's B fragment.
    p_lo = [
        pack2_half(float(P16[l // 4, 2 * (l % 4)]), float(P16[l // 4, 2 * (l % 4) + 1]))
        for l in lanes
    ]
    p_hi = [
        pack2_half(float(P16[l // 4 + 8, 2 * (l % 4)]), float(P16[l // 4 + 8, 2 * (l % 4) + 1]))
        for l in lanes
    ]
    if bug == "no_movmatrix":
        pb0, pb1 = p_lo, p_hi
    else:
        pb0, pb1 = movmatrix_t(p_lo), movmatrix_t(p_hi)

    # O^T += V^T P^T
    to = [[[0.0] * 4 for _ in lanes] for _ in range(D // 16)]
    if fp8:
        for ch in range(0, D // 16, 2):
            b = ldmatrix_x4(smem, [vs + sw(rv[l], ch + l // 16) for l in lanes], trans=True)
            cv = [[e4m3_pairs_to_half(b[l][j], 0x4240, 0x4341) for j in range(4)] for l in lanes]
            ev = lambda l, j: cv[l][j][0]
            od = lambda l, j: cv[l][j][1]
            if bug == "v_a_order":
                a0 = [[ev(l, 0), ev(l, 1), od(l, 0), od(l, 1)] for l in lanes]
                a1 = [[ev(l, 2), ev(l, 3), od(l, 2), od(l, 3)] for l in lanes]
            else:
                a0 = [[ev(l, 0), od(l, 0), ev(l, 1), od(l, 1)] for l in lanes]
                a1 = [[ev(l, 2), od(l, 2), ev(l, 3), od(l, 3)] for l in lanes]
            mma_m16n8k16(to[ch], a0, pb0, pb1)
            mma_m16n8k16(to[ch + 1], a1, pb0, pb1)
    else:
        for mt in range(D // 16):
            a = ldmatrix_x4(
                smem, [vs + sw(rv[l], 2 * mt + (l // 8) % 2) for l in lanes], trans=True
            )
            mma_m16n8k16(to[mt], a, pb0, pb1)

    # The combine's stores: so[head][dim] for heads 2c, 2c + 1.
    so = np.full((16, D), np.nan)
    fp8_rows = fp8 != (bug == "store_rows")
    for l in lanes:
        g, hd = l // 4, 2 * (l % 4)
        for mt in range(D // 16):
            if fp8_rows:
                d = 16 * mt + 2 * g
                so[hd, d : d + 2] = (to[mt][l][0], to[mt][l][2])
                so[hd + 1, d : d + 2] = (to[mt][l][1], to[mt][l][3])
            else:
                d = 16 * mt + g
                so[hd, d], so[hd + 1, d] = to[mt][l][0], to[mt][l][1]
                so[hd, d + 8], so[hd + 1, d + 8] = to[mt][l][2], to[mt][l][3]
    return S, so[:8]


def one(D, G, warp, fp8, seed, bug=None):
    rng = np.random.default_rng(seed)
    if fp8:
        K, V = rand_e4m3(rng, (KTILE, D)), rand_e4m3(rng, (KTILE, D))
        Kf, Vf = e4m3_val(K) * 2.0**-8, e4m3_val(V) * 2.0**-8  # the bit-move conversion's values
    else:
        K = rng.standard_normal((KTILE, D)).astype(np.float16)
        V = rng.standard_normal((KTILE, D)).astype(np.float16)
        Kf, Vf = K.astype(np.float64), V.astype(np.float64)
    q16 = (rng.standard_normal((G, D)) * 4).astype(np.float16)
    P16 = rng.random((16, 8)).astype(np.float16)  # tokens x heads
    S, so = run_warp(D, G, warp, fp8, K, V, q16, P16, bug)
    row0 = warp * 16
    qf = np.zeros((8, D))
    qf[:G] = q16.astype(np.float64)
    S_ref = Kf[row0 : row0 + 16] @ qf.T  # [tokens, heads]
    O_ref = P16.astype(np.float64).T @ Vf[row0 : row0 + 16]  # [heads, dims]
    return rel_errors(S, S_ref, so, O_ref)


def main():
    TOL = 1e-5  # relative to max |ref|; fp32 accumulation of exact fp16 products
    ok_all = True
    for fp8 in (True, False):
        for D in (64, 128):
            for G in (1, 4, 8):
                worst_s = worst_o = 0.0
                for warp in range(4):
                    es, eo = one(D, G, warp, fp8, seed=1000 * D + 10 * G + warp + 7 * fp8)
                    worst_s, worst_o = max(worst_s, es), max(worst_o, eo)
                ok = worst_s < TOL and worst_o < TOL
                ok_all &= ok
                print(
                    f"{'fp8 ' if fp8 else 'fp16'} D={D:3d} G={G} warps 0-3: max rel err S={worst_s:.2e} O={worst_o:.2e}  {'PASS' if ok else 'FAIL'}"
                )
    print("planted errors (each must FAIL for the K/V widths it applies to):")
    caught = True
    applies = {"q_2c_pairs": (True,), "v_a_order": (True,), "v_rows": (False,)}
    for bug in BUGS:
        res = []
        for fp8 in applies.get(bug, (True, False)):
            es = eo = 0.0
            for warp in range(4):
                a, b = one(128, 8, warp, fp8, seed=7 + warp, bug=bug)
                es, eo = max(es, a), max(eo, b)
            bad = es >= TOL or eo >= TOL
            caught &= bad
            res.append(
                f"{'fp8' if fp8 else 'fp16'}: S={es:.2e} O={eo:.2e} {'FAIL(caught)' if bad else 'PASS(MISSED!)'}"
            )
        print(f"  {bug:13s} " + " | ".join(res))
    print("OVERALL:", "PASS" if ok_all and caught else "FAIL")
    return 0 if ok_all and caught else 1


if __name__ == "__main__":
    sys.exit(main())
