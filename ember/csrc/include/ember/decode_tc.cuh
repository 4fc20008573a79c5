// Batch decode with tensor cores (mma.sync m16n8k16; head_dim 64 or 128; bf16/fp16 K and V, or
// fp8 e4m3 K and V run in fp16 after an exact bit-level conversion in shared memory: fp8 NaN
// encodings read as +-480). Framework-free (R3.1, R3.2).
//
// One CTA per (work unit, kv head), 4 warps. K and V stream through shared memory in tiles of
// kTile tokens with cp.async (kStages deep, rows gathered through the page table, zero-filled
// past the unit's end). Each warp owns 16 tokens of a tile: S = Q K^T for the 16-row query block
// (the G heads of the group, zero rows after them), an online softmax per row in the log2
// domain, then O += P V with P taken straight from the S accumulators. Shared-memory rows are
// swizzled (16-byte chunk c of row r lives at chunk c ^ (r % 8)) so that ldmatrix is
// conflict-free. The 4 warps' (max, sum, O) are combined through shared memory at the end, and
// written as in decode.cuh (direct output, or an fp32 partial for the merge).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ember/async_copy.cuh"
#include "ember/decode.cuh"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace decode {
namespace tc {

constexpr int kTile = 64;  // tokens per pipeline stage (16 per warp)

// Pipeline depth: tiles in flight + 1. 16-bit KV: 3 stages (100 KB at d128, 2 CTAs per SM);
// fp8: the tiles are half the bytes, so 4 stages keep as many bytes in flight in the same
// shared memory. EMBER_DECODE_STAGES16 / EMBER_DECODE_STAGES8 override (A/B probes).
#ifndef EMBER_DECODE_STAGES16
#define EMBER_DECODE_STAGES16 3
#endif
#ifndef EMBER_DECODE_STAGES8
#define EMBER_DECODE_STAGES8 4
#endif
// fp8 K/V: 1 (default) converts the fragments in registers straight from the raw tiles (no
// shared-memory pass, no query block in shared memory); 0 converts whole tiles into a 16-bit
// shared-memory copy first (the first fp8 kernel, kept for A/B runs).
#ifndef EMBER_DECODE_FP8_REGS
#define EMBER_DECODE_FP8_REGS 1
#endif
// Resident CTAs per SM the register allocation must allow: 16-bit K/V use 100 KB of shared
// memory (2 per SM whatever the registers); the register fp8 path uses 64 KB, so 3 fit when the
// registers do (<= 168 per thread). EMBER_DECODE_MINB overrides both (A/B probes).
#ifndef EMBER_DECODE_KV2
#define EMBER_DECODE_KV2 0  // A/B, session 17: decode_tc_kv2_kernel below
#endif
// Register fp8 path: tokens a warp owns in a tile. 16 (default): 64-token tiles of 8 KB of K
// and 8 KB of V. 32 (A/B, session 21): 128-token tiles, as many bytes a stage as a 16-bit tile,
// each warp two 16-token blocks a tile (twice the independent MMA chains, the softmax's
// shuffles, the O rescale and the barriers over twice the tokens); its 32 KB stages want
// EMBER_DECODE_STAGES8=2 (3 CTAs an SM) or =3 with EMBER_DECODE_MINB=2.
#ifndef EMBER_DECODE_FP8_WT
#define EMBER_DECODE_FP8_WT 16
#endif
// fp8 -> fp16 conversion: 2 (default) the hardware's cvt.rn.f16x2.e4m3x2 after one prmt a pair
// (exact values, 2 instructions a pair); 0 byte permutes then shifts and masks into 2^-8 times
// the value (10 instructions a register of four values); 1 masks and one shift a pair, with the
// pairs (b0, b2) / (b1, b3) of each register (7 a register) and q's fragment permuted to match
// in Q K^T. Measured (session 23, H100, the fixed probe, 64 x 4096 32/8 d128 e4m3, CUDA-graph
// replay): 0 220.8 us, 1 211.8, the cvt form 204.3 (at a0b5bbb's header, beside its own 221.5
// default); Pareto 193.9 / 185.6 / 177.5. notes/decode.md, "Sessions 22-23".
#ifndef EMBER_DECODE_FP8_CONV
#define EMBER_DECODE_FP8_CONV 2
#endif
static_assert(EMBER_DECODE_FP8_CONV >= 0 && EMBER_DECODE_FP8_CONV <= 2, "FP8_CONV is 0, 1 or 2");
// Tokens as the MMA's M, heads as its N (A/B, session 25): S^T = K Q^T with K as the A operand
// (the same x4 ldmatrix) and q as B (two registers a k-step, loaded once, no zero-padded rows),
// then O^T = V^T P^T with V^T from the transposed ldmatrix and P^T made from S^T's
// accumulators by movmatrix. Half the MMAs of the default (16 instead of 32 a warp a 16-token
// block at d128) and O^T in 32 registers instead of 64; the max over a head's tokens takes
// three shuffle levels (two heads a thread) instead of two. Layouts checked lane by lane on the
// CPU by tools/decode_tmma_emulate.py. Needs the register fp8 path and the pair conversions
// (FP8_CONV 0 or 2). 0: never; 1: every KV dtype; 2 (the default since session 26): fp8 KV
// only, where the register path and a pair conversion are on. Measured on an H100 (notes/
// decode.md, "Session 26"): fp8 -0.8 % streaming, -6.4 % on a latency-bound L2-resident case;
// 16-bit KV tied streaming and lost 1.5 % latency-bound at G = 8, so it keeps the default path.
// The K/V copies' address diet (written in session 26, the default since session 27; at
// fetch_pages / load_tile): 1 byte-stride multiply-adds, each row's token split once (in the
// page fetch), the page index unsigned (bf16 503 -> 431 instructions a tile, fp8 371 -> 341);
// 0 the element-unit form (A/B). Measured on an H100 (notes/decode.md, "Session 27"): streaming
// shapes tied (-0.6 to +0.9 %, within a std), latency-bound L2-resident cases -7 to -15 %.
#ifndef EMBER_DECODE_ADDR
#define EMBER_DECODE_ADDR 1
#endif
static_assert(EMBER_DECODE_ADDR == 0 || EMBER_DECODE_ADDR == 1, "EMBER_DECODE_ADDR is 0 or 1");
#ifndef EMBER_DECODE_TMMA
#define EMBER_DECODE_TMMA 2
#endif
static_assert(EMBER_DECODE_TMMA >= 0 && EMBER_DECODE_TMMA <= 2, "EMBER_DECODE_TMMA is 0, 1 or 2");
static_assert(EMBER_DECODE_TMMA != 1 || (EMBER_DECODE_FP8_REGS && EMBER_DECODE_FP8_CONV != 1),
              "EMBER_DECODE_TMMA=1 needs EMBER_DECODE_FP8_REGS=1 and FP8_CONV 0 or 2");
template <int KVB>
constexpr bool tmma() {
  return EMBER_DECODE_TMMA == 1 || (EMBER_DECODE_TMMA == 2 && KVB == 1 && EMBER_DECODE_FP8_REGS &&
                                    EMBER_DECODE_FP8_CONV != 1);
}

template <int KVB>
constexpr int min_blocks() {
#ifdef EMBER_DECODE_MINB
  return EMBER_DECODE_MINB;
#else
  return KVB == 1 && EMBER_DECODE_FP8_REGS ? 3 : 1;
#endif
}
template <int KVB>
constexpr int warp_tokens() {
  return KVB == 1 && EMBER_DECODE_FP8_REGS ? EMBER_DECODE_FP8_WT : kTile / kWarps;
}
template <int KVB>
constexpr int stages() {
  return KVB == 1 ? EMBER_DECODE_STAGES8 : EMBER_DECODE_STAGES16;
}

// KVB: bytes per K/V element (2, or 1 for fp8, which is staged raw and converted to 16-bit
// tiles before the MMAs).
template <int D, int KVB = 2>
struct Smem {
  static constexpr int kStages = stages<KVB>();
  static constexpr int kRowBytes = D * 2;               // a 16-bit row (Q, K/V as used)
  static constexpr int kChunks = kRowBytes / 16;        // 16-byte chunks per 16-bit row
  static constexpr int kTileBytes = kTile * kRowBytes;  // one 16-bit K (or V) tile
  static constexpr int kKvRowBytes = D * KVB;           // a row as stored in the cache
  static constexpr int kKvChunks = kKvRowBytes / 16;
  static constexpr int kTileTokens = kWarps * warp_tokens<KVB>();  // tokens a stage
  static constexpr int kSub = warp_tokens<KVB>() / 16;  // a warp's 16-token blocks a tile
  static_assert(kSub * 16 == warp_tokens<KVB>() && (KVB == 1 || kSub == 1), "16 or 32 a warp");
  static constexpr int kKvTileBytes = kTileTokens * kKvRowBytes;
  static constexpr int kStageBytes = 2 * kKvTileBytes;  // K and V
  static constexpr bool kFp8Regs = KVB == 1 && EMBER_DECODE_FP8_REGS;
  // The 16-row query block (the register fp8 path and TMMA read q's fragments from global).
  static constexpr int kQBytes = kFp8Regs || tmma<KVB>() ? 0 : 16 * kRowBytes;
  static constexpr int kConvBytes = KVB == 1 && !kFp8Regs ? 2 * kTileBytes : 0;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  // NOTE: combine rows padded by 8 floats and written as float2: each half-warp's 16 stores then
  // cover 16 distinct bank pairs (unpadded D-float rows put a warp's stores on 4 banks, 8-way).
  static constexpr int kOStride = D + 8;
  static constexpr int kCombineBytes = kWarps * 16 * kOStride * 4 + 2 * kWarps * 16 * 4;
  static constexpr int kBytes =
      kQBytes + kConvBytes + (kPipeBytes > kCombineBytes ? kPipeBytes : kCombineBytes);
};

// Byte offset of chunk `c` of row `r` in a swizzled tile.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * Smem<D>::kRowBytes + ((c ^ (r & 7)) << 4);
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// The warp's 8 x 8 matrix of 16-bit values (a thread: row lane / 4, columns 2 (lane % 4) and
// 2 (lane % 4) + 1) transposed, in the same layout.
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// a * b + c with a 32 x 32 -> 64-bit product, one IMAD.WIDE.U32 (the C++ form of the same sum
// compiles to a multiply, then the add with its own carry).
__device__ __forceinline__ const unsigned char* mad_wide(uint32_t a, uint32_t b,
                                                         const unsigned char* c) {
  uint64_t r;
  asm("mad.wide.u32 %0, %1, %2, %3;"
      : "=l"(r)
      : "r"(a), "r"(b), "l"(reinterpret_cast<uint64_t>(c)));
  return reinterpret_cast<const unsigned char*>(r);
}

// A 32-bit load from global memory at `a`: an LDG where dereferencing mad_wide's pointer would be
// a generic LD. Not volatile, so it schedules like a plain load: only for data this kernel never
// writes (the page table, unchanged until the step has run).
__device__ __forceinline__ int32_t ld_global_s32(const unsigned char* a) {
  int32_t v;
  asm("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(a));
  return v;
}

// Two fp32 values as one register of two 16-bit T (low half first).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T a = from_float<T>(lo), b = from_float<T>(hi);
  return static_cast<uint32_t>(a.bits) | (static_cast<uint32_t>(b.bits) << 16);
}

// q's elements 0..3 at `src` (8-byte aligned) as fp32 times `scale`, or zeros when !valid (a
// padding head): the four a register-fp8 thread's K bytes meet, whichever operand q is.
template <typename T>
__device__ __forceinline__ float4 q_quad(const T* src, bool valid, float scale) {
  uint2 raw = make_uint2(0u, 0u);
  if (valid) raw = *reinterpret_cast<const uint2*>(src);
  const T* e = reinterpret_cast<const T*>(&raw);
  return make_float4(to_float(e[0]) * scale, to_float(e[1]) * scale, to_float(e[2]) * scale,
                     to_float(e[3]) * scale);
}

// Two byte pairs of `w` (e4m3 values), picked by prmt selectors, as two registers of two fp16:
// Lo/Hi name the two bytes that become the low and high halves of `lo`, `hi` (0x4140: bytes
// 0,1; 0x4342: bytes 2,3; 0x4240: bytes 0,2; 0x4341: bytes 1,3 — the last two transpose a 2x2
// block of bytes). FP8_CONV 2: by cvt.rn.f16x2.e4m3x2, the values themselves (exact: every e4m3
// value, subnormals included, is an fp16 value; NaN stays NaN). Otherwise each is exactly the
// e4m3 value times 2^-8: the e4m3 exponent and mantissa bits are moved into fp16's positions
// and the exponent bias (7 vs 15) is left in the result, folded into the scales (kFp8Unscale);
// e4m3 subnormals land on fp16 subnormals, so every value (zero included) is exact. NOTE:
// session 14 measured the cvt form no faster (215.1 vs 215.7 us) and removed it, but that probe
// timed the default kernel for both; measured properly (session 23) it is the fastest form, so
// the fp8 loop is issue-bound.
template <unsigned Lo, unsigned Hi>
__device__ __forceinline__ void e4m3_pairs_to_half(uint32_t w, uint32_t& lo, uint32_t& hi) {
  if constexpr (EMBER_DECODE_FP8_CONV == 2) {
    // One prmt puts the four picked bytes in order (none when they are in order already); cvt
    // reads each 16-bit half in place (SASS: F2FP.F16.E4M3.UNPACK_B on R and R.H1).
    constexpr unsigned kSel =
        (Lo & 0xfu) | ((Lo >> 8) & 0xfu) << 4 | (Hi & 0xfu) << 8 | ((Hi >> 8) & 0xfu) << 12;
    uint32_t x = w;
    if constexpr (kSel != 0x3210u) asm("prmt.b32 %0, %1, 0, %2;" : "=r"(x) : "r"(w), "n"(kSel));
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
    return;
  }
  uint32_t x0, x1;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(x0) : "r"(w), "n"(Lo));
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(x1) : "r"(w), "n"(Hi));
  lo = ((x0 << 8) & 0x80008000u) | ((x0 << 7) & 0x3f803f80u);
  hi = ((x1 << 8) & 0x80008000u) | ((x1 << 7) & 0x3f803f80u);
}

// Four e4m3 values (one register, low byte first) as [b0, b1], [b2, b3] in fp16.
__device__ __forceinline__ void e4m3x4_to_half(uint32_t w, uint32_t& lo, uint32_t& hi) {
  e4m3_pairs_to_half<0x4140, 0x4342>(w, lo, hi);
}

// Bytes (b0, b2) and (b1, b3) of `w` (b0 lowest) as two registers of two fp16, each the e4m3
// value times 2^-8 as in e4m3x4_to_half: a byte in the high half of a 16-bit lane has its sign
// in place and its exponent and mantissa one bit too high.
__device__ __forceinline__ void e4m3_even_odd_to_half(uint32_t w, uint32_t& even, uint32_t& odd) {
  odd = (w & 0x80008000u) | ((w & 0x7f007f00u) >> 1);
  const uint32_t s = w << 8;
  even = (s & 0x80008000u) | ((s & 0x7f007f00u) >> 1);
}

// Byte offset of 16-byte chunk `c` of row `r` in a raw fp8 tile of ROW-byte rows, swizzled so
// that any 8 consecutive rows' chunk c fall on distinct bank groups (ldmatrix conflict-free).
template <int ROW>
__device__ __forceinline__ int swz8(int r, int c) {
  constexpr int kNC = ROW / 16;  // chunks per row: 4 (d64) or 8 (d128)
  return r * ROW + ((c ^ ((r * kNC / 8) % kNC)) << 4);
}

// NOTE: an fp8 K/V element converted by the bit moves (FP8_CONV 0 / 1) is 2^-8 times its value
// (by cvt, its value); a bf16 query is scaled by 2^-4 into fp16 (finite for |q| < 2^20; rounded
// to fp16, subnormal below ~2^-10).
constexpr float kFp8Unscale = EMBER_DECODE_FP8_CONV == 2 ? 1.f : 256.f;
constexpr float kBf16QScale = 0.0625f;

// The query row of the group's head g (group row 0's for the padding rows g >= G, which are
// loaded masked and never used): the one address expression of every query load below.
template <typename T, int G>
__device__ __forceinline__ const T* q_head_row(const Params& p, int req, int kv_head, int g) {
  return static_cast<const T*>(p.q) + req * p.q_stride_b +
         (kv_head * G + (g < G ? g : 0)) * p.q_stride_h;
}

// The warps' combine: each thread a set of the G x D outputs, from the warps' (max, sum, O) rows
// in shared memory (so [warps][16][kOStride], sm and sl [warps][16]), written as in decode.cuh.
template <typename T, int D, int G, int kOStride>
__device__ __forceinline__ void combine_write(const Params& p, const float* so, const float* sm,
                                              const float* sl, int req, int slot, int kv_head,
                                              float v_scale) {
  for (int idx = static_cast<int>(threadIdx.x); idx < G * D; idx += kWarps * 32) {
    const int g = idx / D;
    const int d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) mx = fmaxf(mx, sm[k * 16 + g]);
    float sum = 0.f, acc = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int k = 0; k < kWarps; ++k) {
        const float c = exp2f(sm[k * 16 + g] - mx);
        sum += sl[k * 16 + g] * c;
        acc += so[(k * 16 + g) * kOStride + d] * c;
      }
    }
    const float out = sum > 0.f ? acc * v_scale / sum : 0.f;
    const float lse = sum > 0.f ? (mx + log2f(sum)) * kLn2 : -INFINITY;
    write_result<T, D>(p, req, slot, kv_head * G + g, d, out, lse);
  }
}

template <typename T, typename TKV, int D, int G>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<sizeof(TKV)>())
    decode_tc_kernel(Params p) {
  constexpr bool kFp8 = sizeof(TKV) == 1;
  // fp8 K/V run the MMAs in fp16 (the cheap exact conversion above), whatever q's type.
  using TM = std::conditional_t<kFp8, half, T>;
  constexpr bool kQConvert = !std::is_same_v<T, TM>;  // bf16 q with fp8 K/V
  using S = Smem<D, sizeof(TKV)>;
  constexpr bool kRegs = S::kFp8Regs;
  constexpr bool kTm = tmma<sizeof(TKV)>();
  constexpr int kNT = D / 8;   // n-tiles of O
  constexpr int kKS = D / 16;  // k-steps of Q K^T
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* q_smem = smem;
  unsigned char* conv = smem + S::kQBytes;  // fp8 only: the stage's tiles as 16-bit
  unsigned char* pipe = conv + S::kConvBytes;
  constexpr int kStages = S::kStages;
  // NOTE: units fastest instead (FlashInfer's order, EMBER_DECODE_UNIT_FAST at 5e2097f) was
  // removed on a probe timing that ran this default kernel (notes/decode.md, "Sessions 22-23");
  // unmeasured: rebuild it with tools/decode_probe.py's `ufast` variant.
  const int unit = blockIdx.y;  // NOTE: heads fastest, so a unit's heads run side by side
  const int kv_head = blockIdx.x;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  pdl_wait();
  const Unit u = read_unit(p, unit);
  if (u.req < 0) return;
  const int req = u.req, kv_start = u.kv_start, kv_end = u.kv_end, slot = u.slot;
  const int32_t* pages = p.indices + p.indptr[req];
  const TKV* kb = static_cast<const TKV*>(p.k.base) + kv_head * p.k.head_stride;
  const TKV* vb = static_cast<const TKV*>(p.v.base) + kv_head * p.v.head_stride;
  constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(TKV));

  // Query block: rows 0..G-1 are the group's heads, the rest zero (the register fp8 path reads
  // its query fragments from global memory below instead).
  for (int i = tid; i < (kRegs || kTm ? 0 : 16 * S::kChunks); i += kWarps * 32) {
    const int r = i / S::kChunks, c = i % S::kChunks;
    const T* src = q_head_row<T, G>(p, req, kv_head, r) + c * 8;
    if constexpr (kQConvert) {
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r < G) {
        const uint4 raw = *reinterpret_cast<const uint4*>(src);
        const T* e = reinterpret_cast<const T*>(&raw);
        v = make_uint4(pack2<TM>(to_float(e[0]) * kBf16QScale, to_float(e[1]) * kBf16QScale),
                       pack2<TM>(to_float(e[2]) * kBf16QScale, to_float(e[3]) * kBf16QScale),
                       pack2<TM>(to_float(e[4]) * kBf16QScale, to_float(e[5]) * kBf16QScale),
                       pack2<TM>(to_float(e[6]) * kBf16QScale, to_float(e[7]) * kBf16QScale));
      }
      *reinterpret_cast<uint4*>(q_smem + swz<D>(r, c)) = v;
    } else {
      cp_async16(smem_u32(q_smem + swz<D>(r, c)), src, r < G);
    }
  }
  // Scales of the logits and the output, with the fp8 path's exponent offsets undone.
  const float k_scale =
      kFp8 ? p.k_scale * kFp8Unscale * (kQConvert ? 1.f / kBf16QScale : 1.f) : p.k_scale;
  const float v_scale = kFp8 ? p.v_scale * kFp8Unscale : p.v_scale;
  constexpr int kT = S::kTileTokens;
  constexpr int kSub = S::kSub;
  const int n_tiles = (kv_end - kv_start + kT - 1) / kT;
  // 16-bit rows land swizzled, ready for ldmatrix; fp8 rows land plain and are converted.
  auto kv_off = [](int r, int c) {
    if constexpr (kRegs) {
      return swz8<S::kKvRowBytes>(r, c);
    } else if constexpr (kFp8) {
      return r * S::kKvRowBytes + c * 16;
    } else {
      return swz<D>(r, c);
    }
  };
  // NOTE: sessions 16-17 removed these levers on probe timings that, through a probe defect,
  // ran this default kernel for every variant (notes/decode.md, "Sessions 22-23"), so none was
  // measured: two chunks a thread with 32-bit in-page offsets (1 021 -> 831 loop instructions,
  // `cpt` at 7e934a2); four Q K^T chains a warp and one barrier a tile (`qkob` at 6bfabe2); a
  // persistent form (`persist`); page numbers 3 tiles ahead with a one-round combine (`l3c` at
  // 038d343); an L2::256B prefetch hint (`l2pf`). tools/decode_probe.py rebuilds each from its
  // commit's header. Still valid (harness rows): the time grows with the bytes from 248 to 264
  // requests of 1 024 tokens (278.8 / 281.3 / 290.9 us against FlashInfer's 260.6 / 266.8 /
  // 274.0), so the gap there is not the last partial wave.
  // Each thread moves chunk `cc` of rows r0, r0 + kRowStep, ... of every tile. The page of
  // each of those rows is read one tile ahead (into pg), so the page-table load's latency
  // overlaps a tile's compute instead of stalling the next cp.async.
  constexpr int kRowStep = kWarps * 32 / S::kKvChunks;
  constexpr int kRowsPerThread = kT / kRowStep;
  static_assert(kT % kRowStep == 0, "tile rows split evenly over the threads");
  const int r0 = tid / S::kKvChunks, cc = tid % S::kKvChunks;
  const int shift = p.page_shift;  // log2(page_size), or -1
  auto page_of = [&](int t) { return shift >= 0 ? t >> shift : t / p.page_size; };
  auto row_valid = [&](int tile, int j) {
    return kv_start + tile * kT + r0 + j * kRowStep < kv_end;
  };
  auto row_token = [&](int tile, int j) {  // rows past the unit read a valid row, zero-filled
    return row_valid(tile, j) ? kv_start + tile * kT + r0 + j * kRowStep : kv_start;
  };
  int32_t pg[kRowsPerThread];
  // ADDR=1: the row's in-page slot is kept beside its page (-1: past the unit, zero-filled), so
  // the copy does not split the token again.
  int32_t sv[kRowsPerThread];
  const int neg_ps = -p.page_size;
  const unsigned char* pages_b = reinterpret_cast<const unsigned char*>(pages);
  auto fetch_pages = [&](int tile) {
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      if constexpr (EMBER_DECODE_ADDR == 1) {
        const int tt = row_token(tile, j);
        const int pi = page_of(tt);
        pg[j] = ld_global_s32(mad_wide(static_cast<uint32_t>(pi), 4u, pages_b));
        sv[j] = row_valid(tile, j) ? tt + pi * neg_ps : -1;
      } else {
        pg[j] = pages[page_of(row_token(tile, j))];
      }
    }
  };
  // A row's source is its page's start (one 32 x 32 -> 64-bit multiply-add of the page number)
  // plus a 32-bit in-page offset: the binding checks that every stride is below 2^31 elements
  // (decode.cc), so only page * page_stride needs 64 bits. The swizzles repeat every 8 rows and
  // a thread's rows are kRowStep apart, so its shared-memory offsets are one base plus
  // immediates.
  static_assert(kRowStep % 8 == 0, "a thread's rows share a swizzle phase");
  const uint32_t k_ps = static_cast<uint32_t>(p.k.page_stride);
  const uint32_t v_ps = static_cast<uint32_t>(p.v.page_stride);
  const uint32_t k_ss = static_cast<uint32_t>(p.k.slot_stride);
  const uint32_t v_ss = static_cast<uint32_t>(p.v.slot_stride);
  const TKV* kc = kb + cc * kElemsPerChunk;
  const TKV* vc = vb + cc * kElemsPerChunk;
  const uint32_t dst0 = smem_u32(pipe) + kv_off(r0, cc);
  // EMBER_DECODE_ADDR=1: the same addresses as byte offsets, page * page_bytes + slot *
  // slot_bytes, each one 32 x 32 -> 64-bit multiply-add onto the row's base (the strides in bytes
  // fit 32 bits: < 2^31 elements of at most 2 bytes), where the element form's products are
  // scaled by the element size and added with separate carries (~22 integer instructions a K/V
  // row pair in the bf16 loop; counted by tools/sass_loop.py).
  const unsigned char* kcb = reinterpret_cast<const unsigned char*>(kc);
  const unsigned char* vcb = reinterpret_cast<const unsigned char*>(vc);
  constexpr uint32_t kEb = sizeof(TKV);
  const uint32_t k_psb = k_ps * kEb, v_psb = v_ps * kEb, k_ssb = k_ss * kEb, v_ssb = v_ss * kEb;
  auto load_tile = [&](int tile, int stage) {
    const uint32_t kdst = dst0 + stage * S::kStageBytes;
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const uint32_t row = kdst + j * kRowStep * S::kKvRowBytes;
      if constexpr (EMBER_DECODE_ADDR == 1) {
        const bool valid = sv[j] >= 0;
        const uint32_t s = static_cast<uint32_t>(valid ? sv[j] : 0);
        const uint32_t page = static_cast<uint32_t>(pg[j]);
        cp_async16(row, mad_wide(s, k_ssb, mad_wide(page, k_psb, kcb)), valid);
        cp_async16(row + S::kKvTileBytes, mad_wide(s, v_ssb, mad_wide(page, v_psb, vcb)), valid);
      } else {
        const bool valid = row_valid(tile, j);
        const int tt = row_token(tile, j);
        const uint32_t s = static_cast<uint32_t>(tt - page_of(tt) * p.page_size);
        const uint64_t page = static_cast<uint32_t>(pg[j]);
        cp_async16(row, kc + s * k_ss + page * k_ps, valid);
        cp_async16(row + S::kKvTileBytes, vc + s * v_ss + page * v_ps, valid);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) {
      fetch_pages(s);
      load_tile(s, s);
    }
    cp_commit();  // NOTE: the first group also carries the query block
  }
  if (kStages - 1 < n_tiles) fetch_pages(kStages - 1);

  const bool capped = p.soft_cap > 0.f;
  const float qk = (capped ? p.sm_scale : p.sm_scale * kLog2e) * k_scale;
  const float inv_cap = capped ? 1.f / p.soft_cap : 0.f, cap_log2e = p.soft_cap * kLog2e;
  float m = -INFINITY;  // row lane / 4's running max, and this lane's part of its sum
  float l = 0.f;
  float o[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  uint32_t qa[kKS][4];
  bool q_loaded = false;
  // TMMA: S^T's and O^T's state. Thread (g, c) = (lane / 4, lane % 4) holds heads 2c, 2c + 1:
  // their running max (the same in every lane of that c) and this lane's share of their sums;
  // to[mt] is O^T's m-tile mt (16 dims x 8 heads), rows as in the combine below.
  float tm[2] = {-INFINITY, -INFINITY}, tl[2] = {0.f, 0.f};
  float to[D / 16][4];
  uint32_t qb[kKS][2];  // q as the B operand: head lane / 4 (zero from G on)
  if constexpr (kTm) {
#pragma unroll
    for (int n = 0; n < D / 16; ++n) to[n][0] = to[n][1] = to[n][2] = to[n][3] = 0.f;
    const int g = lane / 4, c = lane % 4;
    const T* qrow = q_head_row<T, G>(p, req, kv_head, g);
    const float qs = kQConvert ? kBf16QScale : 1.f;
#pragma unroll
    for (int k = 0; k < kKS; ++k) {
      if constexpr (kFp8) {
        // B's rows 2c, 2c + 1 / 2c + 8, 2c + 9 are head_dim 4c, 4c + 1 / 4c + 2, 4c + 3 of the
        // k-step: the pairs a thread's K register converts to (A's columns, below).
        const float4 e = q_quad(qrow + 16 * k + 4 * c, g < G, qs);
        qb[k][0] = pack2<TM>(e.x, e.y);
        qb[k][1] = pack2<TM>(e.z, e.w);
      } else {
        qb[k][0] = g < G ? *reinterpret_cast<const uint32_t*>(qrow + 16 * k + 2 * c) : 0u;
        qb[k][1] = g < G ? *reinterpret_cast<const uint32_t*>(qrow + 16 * k + 8 + 2 * c) : 0u;
      }
    }
    q_loaded = true;
  } else if constexpr (kRegs) {
    // K's fragments come from ldmatrix on raw fp8 rows: a thread holds bytes 4c..4c+3 (c = lane
    // % 4) of a 16-element k-step, as (b0, b1) = elements (4c, 4c+1), (4c+2, 4c+3). The sum over
    // head_dim does not care about order, so q's fragment is permuted the same way: a0 = q[4c,
    // 4c+1], a2 = q[4c+2, 4c+3] of each k-step (rows >= G and the a1/a3 rows 8..15 are zero).
    const int r = lane / 4, c = lane % 4;
    const T* qrow = q_head_row<T, G>(p, req, kv_head, r);
    const float qs = kQConvert ? kBf16QScale : 1.f;
#pragma unroll
    for (int k = 0; k < kKS; ++k) {
      const float4 e = q_quad(qrow + 16 * k + 4 * c, r < G, qs);
      if constexpr (EMBER_DECODE_FP8_CONV == 1) {  // K's pairs (4c, 4c+2), (4c+1, 4c+3)
        qa[k][0] = pack2<TM>(e.x, e.z);
        qa[k][2] = pack2<TM>(e.y, e.w);
      } else {
        qa[k][0] = pack2<TM>(e.x, e.y);
        qa[k][2] = pack2<TM>(e.z, e.w);
      }
      qa[k][1] = qa[k][3] = 0u;
    }
    q_loaded = true;
  }

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int pf = tile + kStages - 1;
    if (pf < n_tiles) {
      load_tile(pf, pf % kStages);
      if (pf + 1 < n_tiles) fetch_pages(pf + 1);
    }
    cp_commit();
    cp_wait<kStages - 1>();
    __syncthreads();
    if (!q_loaded) {
#pragma unroll
      for (int k = 0; k < kKS; ++k) {
        const int r = lane % 16, c = 2 * k + lane / 16;
        ldsm_x4(smem_u32(q_smem + swz<D>(r, c)), qa[k]);
      }
      q_loaded = true;
    }
    const unsigned char* ks = pipe + (tile % kStages) * S::kStageBytes;
    const unsigned char* vs = ks + S::kKvTileBytes;
    if constexpr (kFp8 && !kRegs) {
      // 16 e4m3 values -> two swizzled 16-byte chunks of fp16 (x 2^-8, undone in the scales).
      for (int i = tid; i < 2 * kT * S::kKvChunks; i += kWarps * 32) {
        const int which = i / (kT * S::kKvChunks);
        const int rc = i % (kT * S::kKvChunks);
        const int r = rc / S::kKvChunks, c = rc % S::kKvChunks;
        const uint4 raw =
            *reinterpret_cast<const uint4*>((which ? vs : ks) + r * S::kKvRowBytes + c * 16);
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
        uint32_t halves[8];  // 16 fp16 values
#pragma unroll
        for (int j = 0; j < 4; ++j) e4m3x4_to_half(w[j], halves[2 * j], halves[2 * j + 1]);
        unsigned char* dst = conv + which * S::kTileBytes;
        *reinterpret_cast<uint4*>(dst + swz<D>(r, 2 * c)) =
            make_uint4(halves[0], halves[1], halves[2], halves[3]);
        *reinterpret_cast<uint4*>(dst + swz<D>(r, 2 * c + 1)) =
            make_uint4(halves[4], halves[5], halves[6], halves[7]);
      }
      __syncthreads();
      ks = conv;
      vs = conv + S::kTileBytes;
    }
    if constexpr (kTm) {
      const int row0 = warp * 16 * kSub;  // this warp's 16 kSub tokens in the tile
      // The rows lane l supplies to an x4 ldmatrix: matrix l / 8 is tokens 8 ((l / 8) % 2) ...
      // of the block for K and fp8 V, tokens 8 (l / 16) ... for 16-bit V.
      const int rk = row0 + ((lane / 8) % 2) * 8 + lane % 8;
      const int rv = kFp8 ? rk : row0 + (lane / 16) * 8 + lane % 8;
      // S^T = K Q^T: block hh's 16 tokens x 8 heads; st[hh][0..1] token row0 + 16 hh + lane / 4
      // with heads 2 (lane % 4) and 2 (lane % 4) + 1, st[hh][2..3] the token 8 further on. Even
      // and odd k-steps accumulate apart (st, su), two MMA chains of kKS / 2 instead of one.
      float st[kSub][4];
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
        float su[4];
        st[hh][0] = st[hh][1] = st[hh][2] = st[hh][3] = 0.f;
        su[0] = su[1] = su[2] = su[3] = 0.f;
        if constexpr (kFp8) {
          // (tokens 0-7, k-step k), (8-15, k), (0-7, k + 1), (8-15, k + 1): a register holds
          // bytes 4c..4c+3 of its token's k-step, converted as the pairs (4c, 4c+1), (4c+2,
          // 4c+3), which are A's columns (2c, 2c+1), (2c+8, 2c+9) (q's rows match).
#pragma unroll
          for (int k = 0; k < kKS; k += 2) {
            uint32_t b[4];
            ldsm_x4(smem_u32(ks + swz8<S::kKvRowBytes>(rk + 16 * hh, k + lane / 16)), b);
            uint32_t f[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j) e4m3_pairs_to_half<0x4140, 0x4342>(b[j], f[j][0], f[j][1]);
            const uint32_t a0[4] = {f[0][0], f[1][0], f[0][1], f[1][1]};
            const uint32_t a1[4] = {f[2][0], f[3][0], f[2][1], f[3][1]};
            mma<TM>(st[hh], a0, qb[k][0], qb[k][1]);
            mma<TM>(su, a1, qb[k + 1][0], qb[k + 1][1]);
          }
        } else {
          // (tokens 0-7, dims 0-7 of k-step k), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): A.
#pragma unroll
          for (int k = 0; k < kKS; ++k) {
            uint32_t a[4];
            ldsm_x4(smem_u32(ks + swz<D>(rk + 16 * hh, 2 * k + lane / 16)), a);
            if (k % 2 == 0) {
              mma<TM>(st[hh], a, qb[k][0], qb[k][1]);
            } else {
              mma<TM>(su, a, qb[k][0], qb[k][1]);
            }
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) st[hh][j] += su[j];
      }
      // Scale, cap, mask as below; the online softmax over a head's tokens, which lie in the
      // 8 lanes of one lane % 4 (3 shuffle levels) and a thread's st[.][h] and st[.][h + 2].
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
#pragma unroll
        for (int j = 0; j < 4; ++j) st[hh][j] *= qk;
      }
      if (capped) {
#pragma unroll
        for (int hh = 0; hh < kSub; ++hh) {
#pragma unroll
          for (int j = 0; j < 4; ++j) st[hh][j] = cap_log2e * tanhf(st[hh][j] * inv_cap);
        }
      }
      if (kv_start + (tile + 1) * kT > kv_end) {
        const int tok0 = kv_start + tile * kT + row0 + lane / 4;
#pragma unroll
        for (int hh = 0; hh < kSub; ++hh) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (tok0 + 16 * hh + (j / 2) * 8 >= kv_end) st[hh][j] = -INFINITY;
          }
        }
      }
      float mx[2] = {tm[0], tm[1]};
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
        mx[0] = fmaxf(mx[0], fmaxf(st[hh][0], st[hh][2]));
        mx[1] = fmaxf(mx[1], fmaxf(st[hh][1], st[hh][3]));
      }
#pragma unroll
      for (int sh = 4; sh < 32; sh *= 2) {
        mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], sh));
        mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], sh));
      }
      float mu[2], corr[2];
      bool grew = false;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mu[h] = mx[h] == -INFINITY ? 0.f : mx[h];  // as below: no -inf - -inf
        corr[h] = exp2_approx(tm[h] - mu[h]);
        grew = grew || mx[h] != tm[h];
        tm[h] = mx[h];
      }
      float rs[2] = {0.f, 0.f};
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          st[hh][j] = exp2_approx(st[hh][j] - mu[j % 2]);
          rs[j % 2] += st[hh][j];
        }
      }
      tl[0] = tl[0] * corr[0] + rs[0];
      tl[1] = tl[1] * corr[1] + rs[1];
      if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int n = 0; n < D / 16; ++n) {
          to[n][0] *= corr[0];
          to[n][1] *= corr[1];
          to[n][2] *= corr[0];
          to[n][3] *= corr[1];
        }
      }
      // O^T += V^T P^T. P^T's B fragment (tokens 2c, 2c+1 / 2c+8, 2c+9 of head lane / 4) is
      // each 8 x 8 block of P (tokens x heads, as the accumulators hold it) transposed.
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
        const uint32_t pb0 = movmatrix_t(pack2<TM>(st[hh][0], st[hh][1]));
        const uint32_t pb1 = movmatrix_t(pack2<TM>(st[hh][2], st[hh][3]));
        if constexpr (kFp8) {
          // (tokens 0-7, chunk ch), (8-15, ch), (0-7, ch + 1), (8-15, ch + 1) transposed: a
          // register holds tokens 2c, 2c+1 of bytes 2g, 2g+1 (g = lane / 4); the pairs (b0, b2)
          // and (b1, b3) are V^T's dims 2g and 2g+1, made A's rows g and g + 8 of m-tile ch.
#pragma unroll
          for (int ch = 0; ch < D / 16; ch += 2) {
            uint32_t b[4];
            ldsm_x4_t(smem_u32(vs + swz8<S::kKvRowBytes>(rv + 16 * hh, ch + lane / 16)), b);
            uint32_t ev[4], od[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) e4m3_pairs_to_half<0x4240, 0x4341>(b[j], ev[j], od[j]);
            const uint32_t a0[4] = {ev[0], od[0], ev[1], od[1]};
            const uint32_t a1[4] = {ev[2], od[2], ev[3], od[3]};
            mma<TM>(to[ch], a0, pb0, pb1);
            mma<TM>(to[ch + 1], a1, pb0, pb1);
          }
        } else {
          // (tokens 0-7, dims 0-7 of m-tile mt), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15)
          // transposed: A = V^T, rows = dims.
#pragma unroll
          for (int mt = 0; mt < D / 16; ++mt) {
            uint32_t a[4];
            ldsm_x4_t(smem_u32(vs + swz<D>(rv + 16 * hh, 2 * mt + (lane / 8) % 2)), a);
            mma<TM>(to[mt], a, pb0, pb1);
          }
        }
      }
    } else {
      const int row0 = warp * 16 * kSub;  // this warp's 16 kSub tokens in the tile
      // S = Q K^T: two n-tiles of 8 tokens a 16-token block (n-tile n: tokens row0 + 8n ...).
      float sc[2 * kSub][4];
#pragma unroll
      for (int n = 0; n < 2 * kSub; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
        if constexpr (kRegs) {
          // One x4 load: (tokens 0-7, k-steps k, k+1), (tokens 8-15, k, k+1); a 16-byte chunk of
          // a raw fp8 row is one k-step.
#pragma unroll
          for (int k = 0; k < kKS; k += 2) {
            uint32_t b[4];
            const int r = row0 + 16 * hh + (lane / 16) * 8 + lane % 8;
            const int c = k + (lane / 8) % 2;
            ldsm_x4(smem_u32(ks + swz8<S::kKvRowBytes>(r, c)), b);
            uint32_t f[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if constexpr (EMBER_DECODE_FP8_CONV == 1) {
                e4m3_even_odd_to_half(b[j], f[j][0], f[j][1]);
              } else {
                e4m3_pairs_to_half<0x4140, 0x4342>(b[j], f[j][0], f[j][1]);
              }
            }
            mma<TM>(sc[2 * hh], qa[k], f[0][0], f[0][1]);
            mma<TM>(sc[2 * hh], qa[k + 1], f[1][0], f[1][1]);
            mma<TM>(sc[2 * hh + 1], qa[k], f[2][0], f[2][1]);
            mma<TM>(sc[2 * hh + 1], qa[k + 1], f[3][0], f[3][1]);
          }
        } else {
#pragma unroll
          for (int k = 0; k < kKS; ++k) {
            uint32_t b[4];
            const int r = row0 + 16 * hh + (lane / 16) * 8 + lane % 8;
            const int c = 2 * k + (lane / 8) % 2;
            ldsm_x4(smem_u32(ks + swz<D>(r, c)), b);
            mma<TM>(sc[2 * hh], qa[k], b[0], b[1]);
            mma<TM>(sc[2 * hh + 1], qa[k], b[2], b[3]);
          }
        }
      }
      // Scale, cap, mask; online softmax for row lane / 4 (its c0, c1). Rows 8-15 of the query
      // block are zero (G <= 8) and their O rows are never read, so they get no softmax: their P
      // is 0. One multiply an element (qk: sm_scale, log2(e) unless capped, K's scale); the cap and
      // the mask each behind one uniform branch, the mask only on the unit's last tile; 2^x one
      // MUFU.
#pragma unroll
      for (int n = 0; n < 2 * kSub; ++n) {
        sc[n][0] *= qk;
        sc[n][1] *= qk;
      }
      if (capped) {
#pragma unroll
        for (int n = 0; n < 2 * kSub; ++n) {
#pragma unroll
          for (int j = 0; j < 2; ++j) sc[n][j] = cap_log2e * tanhf(sc[n][j] * inv_cap);
        }
      }
      if (kv_start + (tile + 1) * kT > kv_end) {
        const int tok0 = kv_start + tile * kT + row0 + (lane % 4) * 2;
#pragma unroll
        for (int n = 0; n < 2 * kSub; ++n) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            if (tok0 + n * 8 + j >= kv_end) sc[n][j] = -INFINITY;
          }
        }
      }
      float mx = m;
#pragma unroll
      for (int n = 0; n < 2 * kSub; ++n) mx = fmaxf(mx, fmaxf(sc[n][0], sc[n][1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // mu: the row's max, or 0 while the row has seen no token (then every score is -inf and
      // 2^(-inf - 0) = 0, as is its correction); no -inf - -inf is formed.
      const float mu = mx == -INFINITY ? 0.f : mx;
      const float corr = exp2_approx(m - mu);
      const bool grew = mx != m;
      m = mx;
      float rs = 0.f;
#pragma unroll
      for (int n = 0; n < 2 * kSub; ++n) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          sc[n][j] = exp2_approx(sc[n][j] - mu);
          rs += sc[n][j];
        }
      }
      l = l * corr + rs;  // this lane's share of the row's sum (the 4 lanes are summed at the end)
      // O's rescale only when a row's max grew somewhere in the warp (corr is exactly 1 where it
      // did not): after a unit's first tiles a long row's max rarely moves.
      if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          o[n][0] *= corr;
          o[n][1] *= corr;
        }
      }
      // O += P V: P (16 x 16 tokens a block) from the S accumulators.
#pragma unroll
      for (int hh = 0; hh < kSub; ++hh) {
        uint32_t pa[4];
        pa[0] = pack2<TM>(sc[2 * hh][0], sc[2 * hh][1]);
        pa[1] = 0u;  // rows 8-15
        pa[2] = pack2<TM>(sc[2 * hh + 1][0], sc[2 * hh + 1][1]);
        pa[3] = 0u;
        if constexpr (kRegs) {
          // Transposed x4 loads of raw fp8 V: (tokens 0-7, chunk blk), (tokens 8-15, blk), then
          // blk + 1. A thread gets tokens (2c, 2c+1) of bytes (2n, 2n+1) of the chunk (n = lane /
          // 4): columns 2n and 2n+1 of the 16 head_dim elements. So accumulator tile 2 blk holds
          // the even columns of chunk blk and tile 2 blk + 1 the odd ones (undone when combining).
#pragma unroll
          for (int blk = 0; blk < D / 16; blk += 2) {
            uint32_t b[4];
            const int r = row0 + 16 * hh + ((lane / 8) % 2) * 8 + lane % 8;
            const int c = blk + lane / 16;
            ldsm_x4_t(smem_u32(vs + swz8<S::kKvRowBytes>(r, c)), b);
            uint32_t ev[4], od[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if constexpr (EMBER_DECODE_FP8_CONV == 1) {
                e4m3_even_odd_to_half(b[j], ev[j], od[j]);
              } else {
                e4m3_pairs_to_half<0x4240, 0x4341>(b[j], ev[j], od[j]);
              }
            }
            mma<TM>(o[2 * blk], pa, ev[0], ev[1]);
            mma<TM>(o[2 * blk + 1], pa, od[0], od[1]);
            mma<TM>(o[2 * blk + 2], pa, ev[2], ev[3]);
            mma<TM>(o[2 * blk + 3], pa, od[2], od[3]);
          }
        } else {
#pragma unroll
          for (int n = 0; n < kNT; n += 2) {
            uint32_t b[4];
            const int r = row0 + 16 * hh + ((lane / 8) % 2) * 8 + lane % 8;
            const int c = n + lane / 16;  // chunk = 8 columns of d
            ldsm_x4_t(smem_u32(vs + swz<D>(r, c)), b);
            mma<TM>(o[n], pa, b[0], b[1]);
            mma<TM>(o[n + 1], pa, b[2], b[3]);
          }
        }
      }
    }  // !kTm
    __syncthreads();  // the stage is refilled next iteration
  }
  cp_wait<0>();
  pdl_launch_dependents();

  // Combine the warps: row lane / 4 of each (rows 8-15 are padding, neither written nor read).
  __syncthreads();
  float* so = reinterpret_cast<float*>(pipe);  // [warps][16][kOStride]
  float* sm = so + kWarps * 16 * S::kOStride;  // [warps][16]
  float* sl = sm + kWarps * 16;                // [warps][16]
  if constexpr (kTm) {
    // Heads 2c, 2c + 1 (c = lane % 4; rows from G on are padding, never read). O^T's m-tile
    // mt holds, in rows g and g + 8 (g = lane / 4), dims 16 mt + g and + 8 (16-bit V) or dims
    // 16 mt + 2g and 2g + 1 (fp8 V: even and odd bytes of a chunk).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tl[h] += __shfl_xor_sync(0xffffffffu, tl[h], 4);
      tl[h] += __shfl_xor_sync(0xffffffffu, tl[h], 8);
      tl[h] += __shfl_xor_sync(0xffffffffu, tl[h], 16);
    }
    const int g = lane / 4, hd = 2 * (lane % 4);
    if (g == 0) {
      sm[warp * 16 + hd] = tm[0];
      sm[warp * 16 + hd + 1] = tm[1];
      sl[warp * 16 + hd] = tl[0];
      sl[warp * 16 + hd + 1] = tl[1];
    }
    float* o0 = so + (warp * 16 + hd) * S::kOStride;
    float* o1 = o0 + S::kOStride;
#pragma unroll
    for (int mt = 0; mt < D / 16; ++mt) {
      if constexpr (kFp8) {
        const int d = 16 * mt + 2 * g;
        *reinterpret_cast<float2*>(o0 + d) = make_float2(to[mt][0], to[mt][2]);
        *reinterpret_cast<float2*>(o1 + d) = make_float2(to[mt][1], to[mt][3]);
      } else {
        const int d = 16 * mt + g;
        o0[d] = to[mt][0];
        o1[d] = to[mt][1];
        o0[d + 8] = to[mt][2];
        o1[d + 8] = to[mt][3];
      }
    }
  } else {
    const int r = lane / 4;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (lane % 4 == 0) {
      sm[warp * 16 + r] = m;
      sl[warp * 16 + r] = l;
    }
    if constexpr (kRegs) {  // tiles 2 blk / 2 blk + 1: even / odd columns of chunk blk
#pragma unroll
      for (int blk = 0; blk < D / 16; ++blk) {
        const int d = blk * 16 + (lane % 4) * 4;
        *reinterpret_cast<float4*>(so + (warp * 16 + r) * S::kOStride + d) =
            make_float4(o[2 * blk][0], o[2 * blk + 1][0], o[2 * blk][1], o[2 * blk + 1][1]);
      }
    } else {
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const int d = n * 8 + (lane % 4) * 2;
        *reinterpret_cast<float2*>(so + (warp * 16 + r) * S::kOStride + d) =
            make_float2(o[n][0], o[n][1]);
      }
    }
  }
  __syncthreads();
  combine_write<T, D, G, S::kOStride>(p, so, sm, sl, req, slot, kv_head, v_scale);
}

#if EMBER_DECODE_KV2
// EMBER_DECODE_KV2=1 (A/B, session 17, written, not yet run; 16-bit K/V): FlashInfer's pipeline
// shape in place of the default's. Iterations of kTile2 = 128 tokens, 32 a warp; K and V each in
// one buffer of their own (68 KB at d128), so that V(t) is in flight while S = Q K(t)^T and the
// softmax run, and K(t + 1) while O += P V(t): one 32 KB tile in flight a CTA where the default
// keeps two (64-token K+V tiles, 3 stages). The next tile's page numbers are read before Q K^T,
// as FlashInfer reads its offsets. Session 17 tied every lever on the default kernel's warps; at
// the same grid, occupancy and bytes FlashInfer's shape streams 1-5 % faster (notes/decode.md).
constexpr int kTile2 = 128;

template <int D>
struct Smem2 {
  static constexpr int kRowBytes = D * 2;
  static constexpr int kChunks = kRowBytes / 16;
  static constexpr int kQBytes = 16 * kRowBytes;
  static constexpr int kTileBytes = kTile2 * kRowBytes;  // the K (or V) buffer
  static constexpr int kOStride = D + 8;
  static constexpr int kCombineBytes = kWarps * 16 * kOStride * 4 + 2 * kWarps * 16 * 4;
  static_assert(kCombineBytes <= 2 * kTileBytes, "the combine reuses the K and V buffers");
  static constexpr int kBytes = kQBytes + 2 * kTileBytes;
};

template <typename T, int D, int G>
__global__ void __launch_bounds__(kWarps * 32, 1) decode_tc_kv2_kernel(Params p) {
  using S = Smem2<D>;
  constexpr int kNT = D / 8;   // n-tiles of O
  constexpr int kKS = D / 16;  // k-steps of Q K^T
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* q_smem = smem;
  unsigned char* k_smem = smem + S::kQBytes;
  unsigned char* v_smem = k_smem + S::kTileBytes;
  const int unit = blockIdx.y;
  const int kv_head = blockIdx.x;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  pdl_wait();
  const Unit u = read_unit(p, unit);
  if (u.req < 0) return;
  const int req = u.req, kv_start = u.kv_start, kv_end = u.kv_end, slot = u.slot;
  const int32_t* pages = p.indices + p.indptr[req];
  const T* kb = static_cast<const T*>(p.k.base) + kv_head * p.k.head_stride;
  const T* vb = static_cast<const T*>(p.v.base) + kv_head * p.v.head_stride;
  for (int i = tid; i < 16 * S::kChunks; i += kWarps * 32) {
    const int r = i / S::kChunks, c = i % S::kChunks;
    const T* src = q_head_row<T, G>(p, req, kv_head, r) + c * 8;
    cp_async16(smem_u32(q_smem + swz<D>(r, c)), src, r < G);
  }
  const int n_tiles = (kv_end - kv_start + kTile2 - 1) / kTile2;
  // Thread `tid` copies chunk cc of rows r0, r0 + kRowStep, ... of each K and V tile; pg holds
  // those rows' page numbers for the tile copied next.
  constexpr int kRowStep = kWarps * 32 / S::kChunks;
  constexpr int kRowsPerThread = kTile2 / kRowStep;
  static_assert(kTile2 % kRowStep == 0, "tile rows split evenly over the threads");
  const int r0 = tid / S::kChunks, cc = tid % S::kChunks;
  const int shift = p.page_shift;
  auto page_of = [&](int t) { return shift >= 0 ? t >> shift : t / p.page_size; };
  int32_t pg[kRowsPerThread];
  auto fetch_pages = [&](int tile) {
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const int t = kv_start + tile * kTile2 + r0 + j * kRowStep;
      pg[j] = t < kv_end ? pages[page_of(t)] : 0;
    }
  };
  auto load_rows = [&](unsigned char* buf, const T* base, const CacheView& cv, int tile) {
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const int r = r0 + j * kRowStep;
      const int t = kv_start + tile * kTile2 + r;
      const bool valid = t < kv_end;
      const int s = valid ? t - page_of(t) * p.page_size : 0;
      cp_async16(smem_u32(buf + swz<D>(r, cc)),
                 base + static_cast<int64_t>(pg[j]) * cv.page_stride + s * cv.slot_stride + cc * 8,
                 valid);
    }
  };
  if (n_tiles > 0) {
    fetch_pages(0);
    load_rows(k_smem, kb, p.k, 0);
  }
  cp_commit();  // the query block and K(0)
  if (n_tiles > 0) load_rows(v_smem, vb, p.v, 0);
  cp_commit();  // V(0)

  const float scale = p.soft_cap > 0.f ? p.sm_scale : p.sm_scale * kLog2e;
  const float k_scale = p.k_scale;
  const float v_scale = p.v_scale;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.f, 0.f};
  float o[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  uint32_t qa[kKS][4];
  const int row0 = warp * 32;  // this warp's 32 tokens of an iteration
  for (int tile = 0; tile < n_tiles; ++tile) {
    const bool more = tile + 1 < n_tiles;
    if (more) fetch_pages(tile + 1);  // in flight during Q K^T
    cp_wait<1>();                     // K(tile) landed; V(tile) may not have
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int k = 0; k < kKS; ++k) {
        const int r = lane % 16, c = 2 * k + lane / 16;
        ldsm_x4(smem_u32(q_smem + swz<D>(r, c)), qa[k]);
      }
    }
    // S = Q K^T: four n-tiles of 8 tokens.
    float sc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kKS; ++k) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        uint32_t b[4];
        const int r = row0 + 16 * hh + (lane / 16) * 8 + lane % 8;
        const int c = 2 * k + (lane / 8) % 2;
        ldsm_x4(smem_u32(k_smem + swz<D>(r, c)), b);
        mma<T>(sc[2 * hh], qa[k], b[0], b[1]);
        mma<T>(sc[2 * hh + 1], qa[k], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with K(tile)
    if (more) load_rows(k_smem, kb, p.k, tile + 1);
    cp_commit();  // K(tile + 1)
    // Scale, cap, mask; online softmax for rows lane/4 (h = 0) and lane/4 + 8 (h = 1).
    // NOTE: decode_tc_kernel's online softmax over four n-tiles instead of two. Kept apart on
    // purpose until this A/B is measured: a shared helper (session 17) reordered the fp8 default
    // kernel's registers, a SASS change no GPU run had covered. Whichever kernel wins, one goes.
    const int tok0 = kv_start + tile * kTile2 + row0 + (lane % 4) * 2;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x = sc[n][j] * scale * k_scale;
        if (p.soft_cap > 0.f) x = p.soft_cap * tanhf(x / p.soft_cap) * kLog2e;
        const int t = tok0 + n * 8 + (j & 1);
        x = t < kv_end ? x : -INFINITY;
        sc[n][j] = x;
        mx[j / 2] = fmaxf(mx[j / 2], x);
      }
    }
    float corr[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      corr[h] = mx[h] == -INFINITY ? 1.f : exp2f(m[h] - mx[h]);
      m[h] = mx[h];
    }
    float rs[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float e = m[j / 2] == -INFINITY ? 0.f : exp2f(sc[n][j] - m[j / 2]);
        sc[n][j] = e;
        rs[j / 2] += e;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rs[h] += __shfl_xor_sync(0xffffffffu, rs[h], 1);
      rs[h] += __shfl_xor_sync(0xffffffffu, rs[h], 2);
      l[h] = l[h] * corr[h] + rs[h];
    }
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
    // O += P V: P's 32 tokens as two 16-token k-steps, straight from the S accumulators.
    uint32_t pa[2][4];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      pa[hh][0] = pack2<T>(sc[2 * hh][0], sc[2 * hh][1]);
      pa[hh][1] = pack2<T>(sc[2 * hh][2], sc[2 * hh][3]);
      pa[hh][2] = pack2<T>(sc[2 * hh + 1][0], sc[2 * hh + 1][1]);
      pa[hh][3] = pack2<T>(sc[2 * hh + 1][2], sc[2 * hh + 1][3]);
    }
    cp_wait<1>();  // V(tile) landed; K(tile + 1) may not have
    __syncthreads();
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
      for (int n = 0; n < kNT; n += 2) {
        uint32_t b[4];
        const int r = row0 + 16 * hh + ((lane / 8) % 2) * 8 + lane % 8;
        const int c = n + lane / 16;
        ldsm_x4_t(smem_u32(v_smem + swz<D>(r, c)), b);
        mma<T>(o[n], pa[hh], b[0], b[1]);
        mma<T>(o[n + 1], pa[hh], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with V(tile)
    if (more) load_rows(v_smem, vb, p.v, tile + 1);
    cp_commit();  // V(tile + 1)
  }
  cp_wait<0>();
  pdl_launch_dependents();

  // Combine the warps through the K and V buffers, as decode_tc_kernel does.
  __syncthreads();
  float* so = reinterpret_cast<float*>(k_smem);  // [warps][16][kOStride]
  float* sm = so + kWarps * 16 * S::kOStride;    // [warps][16]
  float* sl = sm + kWarps * 16;                  // [warps][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = lane / 4 + 8 * h;
    if (lane % 4 == 0) {
      sm[warp * 16 + r] = m[h];
      sl[warp * 16 + r] = l[h];
    }
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const int d = n * 8 + (lane % 4) * 2;
      *reinterpret_cast<float2*>(so + (warp * 16 + r) * S::kOStride + d) =
          make_float2(o[n][2 * h], o[n][2 * h + 1]);
    }
  }
  __syncthreads();
  combine_write<T, D, G, S::kOStride>(p, so, sm, sl, req, slot, kv_head, v_scale);
}
#endif  // EMBER_DECODE_KV2

// Opt-in shared memory per block on `device` (looked up once): the 16-bit d128 kernel needs
// 100 KiB, more than sm_86/sm_89/sm_120 allow (99 KiB), where the CUDA-core kernel runs instead.
inline int max_smem_optin(int device) {
  constexpr int kMaxDevices = 64;
  static int cached[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  if (cached[device] == 0) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
        cudaSuccess) {
      cudaGetLastError();
      v = -1;
    }
    cached[device] = v;
  }
  return cached[device];
}

// Resident CTAs per SM of the kernel `launch` runs on `device` (the planner's wave size).
template <typename T, typename TKV, int D, int G>
int ctas_per_sm(int device) {
  constexpr int kSmem = Smem<D, sizeof(TKV)>::kBytes;
  if (max_smem_optin(device) < kSmem) return decode::ctas_per_sm<T, TKV, D, G>();
  int n = 0;
#if EMBER_DECODE_KV2
  if constexpr (std::is_same_v<T, TKV>) {
    constexpr int kSmem2 = Smem2<D>::kBytes;
    if (allow_dynamic_smem<decode_tc_kv2_kernel<T, D, G>>(kSmem2) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_tc_kv2_kernel<T, D, G>,
                                                      kWarps * 32, kSmem2) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }
#endif
  if (allow_dynamic_smem<decode_tc_kernel<T, TKV, D, G>>(kSmem) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_tc_kernel<T, TKV, D, G>, kWarps * 32,
                                                    kSmem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

template <typename T, typename TKV, int D, int G>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  constexpr int kSmem = Smem<D, sizeof(TKV)>::kBytes;
  if (max_smem_optin(p.device) < kSmem) return decode::launch<T, TKV, D, G>(p, stream);
#if EMBER_DECODE_KV2
  if constexpr (std::is_same_v<T, TKV>) {
    if (p.grid > 0) {
      const dim3 grid(static_cast<unsigned>(p.kv_heads), static_cast<unsigned>(p.grid));
      const cudaError_t err = launch_kernel<decode_tc_kv2_kernel<T, D, G>>(
          grid, dim3(kWarps * 32), Smem2<D>::kBytes, stream, p.pdl, p.device, p);
      if (err != cudaSuccess) return err;
    }
    return launch_merge<T, D>(p, stream);
  }
#endif
  if (p.grid > 0) {
    const dim3 grid(static_cast<unsigned>(p.kv_heads), static_cast<unsigned>(p.grid));
    const cudaError_t err = launch_kernel<decode_tc_kernel<T, TKV, D, G>>(
        grid, dim3(kWarps * 32), kSmem, stream, p.pdl, p.device, p);
    if (err != cudaSuccess) return err;
  }
  return launch_merge<T, D>(p, stream);
}

}  // namespace tc
}  // namespace decode
}  // namespace ember

#pragma nv_diagnostic pop
