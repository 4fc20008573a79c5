"""Lane-by-lane CPU emulation of the kRegs (fp8 e4m3 K/V in registers) path of
ember/csrc/include/ember/decode_tc.cuh::decode_tc_kernel, one warp's 16 tokens of one tile.

Emulates: load_tile (thread->chunk mapping, kv_off = swz8<ROW>), ldmatrix .x4 / .x4.trans
(PTX ISA fragment semantics), prmt.b32, the e4m3->fp16 bit trick, mma.m16n8k16 row.col
f16->f32 fragments, the qa fragment load, the pa packing and the combine's float4 store.
Passes for D 64/128, groups 1/4/8, warps 0-3, and fails on each of five planted errors. Run it
(python tools/decode_fp8_emulate.py) after any change to the fp8 register path's layouts.
It models the bit-move conversion (EMBER_DECODE_FP8_CONV=0); the default since session 23 is
the hardware cvt.rn.f16x2.e4m3x2 on the same prmt byte pairs, exact by the PTX ISA, which the
GPU tests check against fp64.
"""

# ruff: noqa: B023, B905, E501, E731, E741, N803, N806, PLR0912, PLR0915, PLR0917
# (a model of the kernel in its own notation: D, G, lane `l`, per-iteration closures used at once)

import sys

import numpy as np
import torch

KTILE, KWARPS = 64, 4
M32 = 0xFFFFFFFF


# ---------------------------------------------------------------- primitives
def swz8(ROW, r, c):
    kNC = ROW // 16
    return r * ROW + ((c ^ ((r * kNC // 8) % kNC)) << 4)


def prmt(a, b, sel):
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for k in range(4):
        n = (sel >> (4 * k)) & 0xF
        assert n < 8  # no sign-replication mode used
        out |= src[n] << (8 * k)
    return out


def cvt_bits(x):
    return (((x << 8) & 0x80008000) | ((x << 7) & 0x3F803F80)) & M32


def e4m3_pairs_to_half(w, Lo, Hi):
    return cvt_bits(prmt(w, 0, Lo)), cvt_bits(prmt(w, 0, Hi))


def h2f(bits16):
    return float(np.array([bits16], dtype=np.uint16).view(np.float16)[0])


def f2h(x):
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


def pack2_half(lo, hi):  # pack2<half>(float lo, float hi)
    return f2h(lo) | (f2h(hi) << 16)


def unpack2(w):
    return h2f(w & 0xFFFF), h2f(w >> 16)


def rd32(smem, addr):
    return (
        int(smem[addr])
        | int(smem[addr + 1]) << 8
        | int(smem[addr + 2]) << 16
        | int(smem[addr + 3]) << 24
    )


def ldmatrix_x4(smem, addrs, trans):
    """addrs[lane] = row address supplied by that lane. Returns regs[lane][4] (uint32)."""
    assert all(a % 16 == 0 for a in addrs)
    regs = [[0] * 4 for _ in range(32)]
    for i in range(4):
        rows = [addrs[8 * i + j] for j in range(8)]  # 8 rows x 16 bytes (8 b16 elements)
        for t in range(32):
            if not trans:
                regs[t][i] = rd32(smem, rows[t // 4] + 4 * (t % 4))
            else:
                col = t // 4
                r0, r1 = 2 * (t % 4), 2 * (t % 4) + 1
                lo = int(smem[rows[r0] + 2 * col]) | int(smem[rows[r0] + 2 * col + 1]) << 8
                hi = int(smem[rows[r1] + 2 * col]) | int(smem[rows[r1] + 2 * col + 1]) << 8
                regs[t][i] = lo | hi << 16
    return regs


def mma_m16n8k16(c, a, b0, b1):
    """c[lane][4] float32 (in/out), a[lane][4], b0[lane], b1[lane] uint32 of two fp16."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for t in range(32):
        g, q = t // 4, t % 4
        for reg, (row, k) in zip(
            a[t], [(g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8)]
        ):
            A[row, k], A[row, k + 1] = unpack2(reg)
        for reg, k in ((b0[t], 2 * q), (b1[t], 2 * q + 8)):
            B[k, g], B[k + 1, g] = unpack2(reg)
    Dm = A @ B  # exact products of fp16 in float64
    for t in range(32):
        g, q = t // 4, t % 4
        for j, (row, col) in enumerate(
            [(g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1)]
        ):
            c[t][j] = float(np.float32(c[t][j] + Dm[row, col]))


# ---------------------------------------------------------------- the kernel's warp
def run_warp(D, G, warp, Kc, Vc, q16, P16, bug=None):
    ROW = D  # S::kKvRowBytes (KVB = 1)
    kKvChunks = ROW // 16
    kKS, kNT = D // 16, D // 8
    sw = (
        (lambda r, c: r * ROW + c * 16)
        if bug == "noswizzle_read"
        else (lambda r, c: swz8(ROW, r, c))
    )

    # load_tile: every thread's cp.async16 of K and V chunks into the (single) stage.
    ks, vs = 0, KTILE * ROW
    smem = np.full(2 * KTILE * ROW, 0xAA, dtype=np.uint8)
    written = np.zeros(2 * KTILE * ROW, dtype=np.int32)
    kRowStep = KWARPS * 32 // kKvChunks
    for tid in range(KWARPS * 32):
        r0, cc = tid // kKvChunks, tid % kKvChunks
        for j in range(KTILE // kRowStep):
            r = r0 + j * kRowStep
            off = swz8(ROW, r, cc)  # kv_off(r, cc)
            smem[ks + off : ks + off + 16] = Kc[r, 16 * cc : 16 * cc + 16]
            smem[vs + off : vs + off + 16] = Vc[r, 16 * cc : 16 * cc + 16]
            written[ks + off : ks + off + 16] += 1
            written[vs + off : vs + off + 16] += 1
    assert (written == 1).all(), "load_tile does not write every byte exactly once"

    # qa from global (fp16 q, qs = 1)
    qa = [[[0] * 4 for _ in range(kKS)] for _ in range(32)]
    for lane in range(32):
        r, c = lane // 4, lane % 4
        qrow = q16[r] if r < G else np.zeros(D, np.float16)
        for k in range(kKS):
            if bug == "unpermuted_q":  # the standard m16n8k16 A layout instead of the permuted one
                e = [
                    qrow[16 * k + 2 * c],
                    qrow[16 * k + 2 * c + 1],
                    qrow[16 * k + 2 * c + 8],
                    qrow[16 * k + 2 * c + 9],
                ]
            else:
                e = [qrow[16 * k + 4 * c + i] for i in range(4)]
            qa[lane][k][0] = pack2_half(float(e[0]), float(e[1]))
            qa[lane][k][2] = pack2_half(float(e[2]), float(e[3]))

    row0 = warp * 16
    # S = Q K^T
    sc = [[[0.0] * 4 for _ in range(32)] for _ in range(2)]
    selK = (0x4240, 0x4341) if bug == "swap_qk_sel" else (0x4140, 0x4342)
    for k in range(0, kKS, 2):
        addrs = []
        for lane in range(32):
            r = row0 + (lane // 16) * 8 + lane % 8
            c = k + (lane // 8) % 2
            addrs.append(ks + sw(r, c))
        b = ldmatrix_x4(smem, addrs, trans=False)
        f = [[e4m3_pairs_to_half(b[l][j], *selK) for j in range(4)] for l in range(32)]
        qk = [qa[l][k] for l in range(32)]
        qk1 = [qa[l][k + 1] for l in range(32)]
        mma_m16n8k16(sc[0], qk, [f[l][0][0] for l in range(32)], [f[l][0][1] for l in range(32)])
        mma_m16n8k16(sc[0], qk1, [f[l][1][0] for l in range(32)], [f[l][1][1] for l in range(32)])
        mma_m16n8k16(sc[1], qk, [f[l][2][0] for l in range(32)], [f[l][2][1] for l in range(32)])
        mma_m16n8k16(sc[1], qk1, [f[l][3][0] for l in range(32)], [f[l][3][1] for l in range(32)])
    # S as the kernel holds it: row lane/4 + 8(j/2), token n*8 + 2(lane%4) + (j&1)
    S = np.zeros((16, 16))
    for lane in range(32):
        for n in range(2):
            for j in range(4):
                S[lane // 4 + 8 * (j // 2), n * 8 + 2 * (lane % 4) + (j & 1)] = sc[n][lane][j]

    # Replace the accumulators by P (the softmax output) in the same layout, then pack pa.
    for lane in range(32):
        for n in range(2):
            for j in range(4):
                sc[n][lane][j] = float(
                    P16[lane // 4 + 8 * (j // 2), n * 8 + 2 * (lane % 4) + (j & 1)]
                )
    pa = [
        [
            pack2_half(sc[0][l][0], sc[0][l][1]),
            pack2_half(sc[0][l][2], sc[0][l][3]),
            pack2_half(sc[1][l][0], sc[1][l][1]),
            pack2_half(sc[1][l][2], sc[1][l][3]),
        ]
        for l in range(32)
    ]

    # O = P V
    o = [[[0.0] * 4 for _ in range(32)] for _ in range(kNT)]
    selV = (0x4341, 0x4240) if bug == "swap_pv_sel" else (0x4240, 0x4341)
    for blk in range(0, D // 16, 2):
        addrs = []
        for lane in range(32):
            r = row0 + ((lane // 8) % 2) * 8 + lane % 8
            c = blk + lane // 16
            addrs.append(vs + sw(r, c))
        b = ldmatrix_x4(smem, addrs, trans=True)
        cv = [[e4m3_pairs_to_half(b[l][j], *selV) for j in range(4)] for l in range(32)]
        ev = lambda j: [cv[l][j][0] for l in range(32)]
        od = lambda j: [cv[l][j][1] for l in range(32)]
        mma_m16n8k16(o[2 * blk], pa, ev(0), ev(1))
        mma_m16n8k16(o[2 * blk + 1], pa, od(0), od(1))
        mma_m16n8k16(o[2 * blk + 2], pa, ev(2), ev(3))
        mma_m16n8k16(o[2 * blk + 3], pa, od(2), od(3))

    # combine store (kRegs): float4 at d = blk*16 + (lane%4)*4, row lane/4 + 8h
    so = np.full((16, D), np.nan)
    for lane in range(32):
        for h in range(2):
            r = lane // 4 + 8 * h
            if bug == "no_combine_perm":  # the 16-bit path's float2 store
                for n in range(kNT):
                    d = n * 8 + (lane % 4) * 2
                    so[r, d : d + 2] = (o[n][lane][2 * h], o[n][lane][2 * h + 1])
                continue
            for blk in range(D // 16):
                d = blk * 16 + (lane % 4) * 4
                so[r, d : d + 4] = (
                    o[2 * blk][lane][2 * h],
                    o[2 * blk + 1][lane][2 * h],
                    o[2 * blk][lane][2 * h + 1],
                    o[2 * blk + 1][lane][2 * h + 1],
                )
    return S, so


# ---------------------------------------------------------------- driver
def rand_e4m3(rng, shape):
    x = rng.integers(0, 256, size=shape, dtype=np.uint16).astype(np.uint8)
    x[(x & 0x7F) == 0x7F] = 0x00  # no NaN codes
    return x


def e4m3_val(codes):
    return torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn).to(torch.float64).numpy()


def check_conversion():
    codes = np.array([c for c in range(256) if (c & 0x7F) != 0x7F], dtype=np.uint8)
    ref = e4m3_val(codes) * 2.0**-8
    got = []
    for c in codes:
        lo, _ = e4m3_pairs_to_half(int(c), 0x4140, 0x4342)
        got.append(h2f(lo & 0xFFFF))
    got = np.array(got)
    assert np.array_equal(got, ref) and np.array_equal(np.signbit(got), np.signbit(ref)), (
        "conversion"
    )
    # pair selection on a full word
    w = 0x44332211
    assert e4m3_pairs_to_half(w, 0x4140, 0x4342) == (cvt_bits(0x00220011), cvt_bits(0x00440033))
    assert e4m3_pairs_to_half(w, 0x4240, 0x4341) == (cvt_bits(0x00330011), cvt_bits(0x00440022))
    return len(codes)


def rel_errors(S, S_ref, so, O_ref):
    """Max |error| of the scores and of the output, each relative to its reference's max |value|
    (the output's is infinite when it holds a NaN: an unwritten or poisoned element)."""
    es = np.max(np.abs(S - S_ref)) / max(1e-30, np.max(np.abs(S_ref)))
    eo = np.max(np.abs(so - O_ref)) / max(1e-30, np.max(np.abs(O_ref)))
    return es, (np.inf if np.isnan(so).any() else eo)


def one(D, G, warp, seed, bug=None):
    rng = np.random.default_rng(seed)
    Kc, Vc = rand_e4m3(rng, (KTILE, D)), rand_e4m3(rng, (KTILE, D))
    q16 = (rng.standard_normal((G, D)) * 4).astype(np.float16)
    P16 = rng.random((16, 16)).astype(np.float16)
    S, so = run_warp(D, G, warp, Kc, Vc, q16, P16, bug)
    row0 = warp * 16
    K = e4m3_val(Kc) * 2.0**-8
    V = e4m3_val(Vc) * 2.0**-8
    qf = np.zeros((16, D))
    qf[:G] = q16.astype(np.float64)
    S_ref = qf @ K[row0 : row0 + 16].T
    O_ref = P16.astype(np.float64) @ V[row0 : row0 + 16]
    return rel_errors(S, S_ref, so, O_ref)


def main():
    TOL = 1e-5  # relative to max |ref|; fp32 accumulation of exact fp16 products
    n = check_conversion()
    print(
        f"conversion: all {n} non-NaN e4m3 codes -> fp16 == e4m3 * 2^-8 exactly; prmt pair selection OK"
    )
    ok_all = True
    for D in (64, 128):
        for G in (1, 4, 8):
            worst_s = worst_o = 0.0
            for warp in range(4):
                es, eo = one(D, G, warp, seed=1000 * D + 10 * G + warp)
                worst_s, worst_o = max(worst_s, es), max(worst_o, eo)
            ok = worst_s < TOL and worst_o < TOL
            ok_all &= ok
            print(
                f"D={D:3d} G={G} warps 0-3: max rel err S={worst_s:.2e} O={worst_o:.2e}  {'PASS' if ok else 'FAIL'}"
            )
    print("planted errors (must FAIL):")
    caught = True
    for bug in ("swap_pv_sel", "noswizzle_read", "unpermuted_q", "swap_qk_sel", "no_combine_perm"):
        res = []
        for D in (64, 128):
            es = eo = 0.0
            for warp in range(4):
                a, b = one(D, 8, warp, seed=7 + warp, bug=bug)
                es, eo = max(es, a), max(eo, b)
            bad = es >= TOL or eo >= TOL
            caught &= bad
            res.append(f"D={D}: S={es:.2e} O={eo:.2e} {'FAIL(caught)' if bad else 'PASS(MISSED!)'}")
        print(f"  {bug:16s} " + " | ".join(res))
    print("OVERALL:", "PASS" if ok_all and caught else "FAIL")
    return 0 if ok_all and caught else 1


if __name__ == "__main__":
    sys.exit(main())
