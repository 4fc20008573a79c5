// Rotary position embedding for q and k in one launch. Framework-free (R3.1, R3.2).
//
// One CTA per token. A rotation pair's angle depends only on the token and the pair index, so
// each thread owns one chunk of pair indices (PAIRS pairs), takes its cos/sin once (from the cache
// or computed) and applies them to that chunk of every q and k head of the token. NeoX pairs are
// (i, i + rotary_dim / 2): a chunk is PAIRS elements of each half; GPT-J pairs are (2i, 2i + 1):
// a chunk is 2 * PAIRS consecutive elements. Aligned rows move 16 bytes per access.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/dtype.cuh"
#include "ember/launch.cuh"
#include "ember/rope.h"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace rope {

constexpr int kMaxThreads = 256;

// inv_freq of pair i: theta^(-2i / rotary_dim) / scale, with Llama-3.1's scaling: wavelengths
// shorter than old_context / high keep their frequency, longer than old_context / low divide it
// by factor, and those between blend the two.
__device__ __forceinline__ float inv_freq(const Params& p, int i) {
  float f = powf(p.theta, -2.f * static_cast<float>(i) / static_cast<float>(p.rotary_dim));
  if (p.llama31_factor > 0.f) {
    const float wavelen = 6.28318530717958648f / f;
    const float low_wavelen = p.llama31_old_context / p.llama31_low;
    const float high_wavelen = p.llama31_old_context / p.llama31_high;
    if (wavelen > low_wavelen) {
      f = f / p.llama31_factor;
    } else if (wavelen >= high_wavelen) {
      const float smooth =
          (p.llama31_old_context / wavelen - p.llama31_low) / (p.llama31_high - p.llama31_low);
      f = (1.f - smooth) * f / p.llama31_factor + smooth * f;
    }
  }
  return f * p.inv_scale;
}

// A token's position, and whether its angles exist (a cache row for it, or computed angles).
__device__ __forceinline__ bool token_position(const Params& p, int64_t token, int64_t& pos) {
  pos = p.positions_i64 ? static_cast<const int64_t*>(p.positions)[token]
                        : static_cast<const int32_t*>(p.positions)[token];
  return pos >= 0 && (!p.has_cache || pos < p.cos_sin_rows);
}

// cos and sin of pairs c * PAIRS ... c * PAIRS + PAIRS - 1 at `pos` (in range).
template <int PAIRS>
__device__ __forceinline__ void angles(const Params& p, int64_t pos, int c, float* cs, float* sn) {
  const int half = p.rotary_dim / 2;
#pragma unroll
  for (int j = 0; j < PAIRS; ++j) {
    const int i = c * PAIRS + j;
    if (p.has_cache) {
      const float* row = p.cos_sin + pos * p.rotary_dim;
      cs[j] = row[i];
      sn[j] = row[half + i];
    } else {
      sincosf(static_cast<float>(pos) * inv_freq(p, i), &sn[j], &cs[j]);
    }
  }
}

// Head h of q (h < q.heads) or k (the rest) of a token: its input and output rows.
template <typename T>
__device__ __forceinline__ const T* head_in(const Params& p, int h, int64_t token) {
  const Heads& hs = h < p.q.heads ? p.q : p.k;
  const int hh = h < p.q.heads ? h : h - p.q.heads;
  return static_cast<const T*>(hs.in) + token * hs.in_token_stride + hh * hs.in_head_stride;
}
template <typename T>
__device__ __forceinline__ T* head_out(const Params& p, int h, int64_t token) {
  const Heads& hs = h < p.q.heads ? p.q : p.k;
  const int hh = h < p.q.heads ? h : h - p.q.heads;
  return static_cast<T*>(hs.out) + token * hs.out_token_stride + hh * hs.out_head_stride;
}

// Pair (x0, x1) turned by the angle of cosine c and sine s (every kernel here rotates through it).
__device__ __forceinline__ void turn(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = x0 * c - x1 * s;
  y1 = x1 * c + x0 * s;
}

// A thread's chunk `c` of one head, loaded whole before it is rotated: NeoX, PAIRS elements at c
// of each half (a, b); GPT-J, 2 * PAIRS consecutive elements at c (a; PAIRS == 1 is the
// element-by-element path of unaligned rows).
template <typename T, int PAIRS, bool INTERLEAVE>
struct Chunk {
  using V = Vec<T, INTERLEAVE ? 2 * PAIRS : PAIRS>;
  V a, b;

  // Unaligned GPT-J rows (PAIRS == 1) move element by element: a pair need not be 2-element
  // aligned there.
  static constexpr bool kElementwise = INTERLEAVE && PAIRS == 1;

  __device__ __forceinline__ void load(const T* in, int c, int half) {
    if constexpr (kElementwise) {
      a.v[0] = in[2 * c];
      a.v[1] = in[2 * c + 1];
      return;
    }
    a = reinterpret_cast<const V*>(in)[c];
    if constexpr (!INTERLEAVE) b = reinterpret_cast<const V*>(in + half)[c];
  }

  __device__ __forceinline__ void rotate_store(T* out, int c, int half, const float* cs,
                                               const float* sn) const {
    if constexpr (INTERLEAVE) {
      V y;
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) {
        float y0, y1;
        turn(to_float(a.v[2 * j]), to_float(a.v[2 * j + 1]), cs[j], sn[j], y0, y1);
        y.v[2 * j] = from_float<T>(y0);
        y.v[2 * j + 1] = from_float<T>(y1);
      }
      if constexpr (kElementwise) {
        out[2 * c] = y.v[0];
        out[2 * c + 1] = y.v[1];
      } else {
        reinterpret_cast<V*>(out)[c] = y;
      }
    } else {
      V y1, y2;
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) {
        float r0, r1;
        turn(to_float(a.v[j]), to_float(b.v[j]), cs[j], sn[j], r0, r1);
        y1.v[j] = from_float<T>(r0);
        y2.v[j] = from_float<T>(r1);
      }
      reinterpret_cast<V*>(out)[c] = y1;
      reinterpret_cast<V*>(out + half)[c] = y2;
    }
  }
};

template <typename T, int PAIRS, bool INTERLEAVE>
__global__ void __launch_bounds__(kMaxThreads) rope_kernel(Params p) {
  const int64_t token = blockIdx.x;
  const int half = p.rotary_dim / 2;
  const int chunks = half / PAIRS;  // per head
  const int c = threadIdx.x % chunks;
  const int heads_per_pass = blockDim.x / chunks;
  const int total = p.q.heads + p.k.heads;
  pdl_wait();
  int64_t pos;
  const bool in_range = token_position(p, token, pos);
  if (in_range) {  // out of range: the token is left as it is (in place) / not written
    float cs[PAIRS], sn[PAIRS];
    angles<PAIRS>(p, pos, c, cs, sn);
    for (int h = static_cast<int>(threadIdx.x) / chunks; h < total; h += heads_per_pass) {
      Chunk<T, PAIRS, INTERLEAVE> x;
      x.load(head_in<T>(p, h, token), c, half);
      x.rotate_store(head_out<T>(p, h, token), c, half, cs, sn);
    }
  }
  // Dims past rotary_dim: copied when out of place (in place they are already there).
  const int rest = p.head_dim - p.rotary_dim;
  if (rest > 0 && in_range) {
    for (int idx = threadIdx.x; idx < total * rest; idx += blockDim.x) {
      const int h = idx / rest, d = p.rotary_dim + idx % rest;
      const T* in = head_in<T>(p, h, token);
      T* out = head_out<T>(p, h, token);
      if (in != out) out[d] = in[d];
    }
  }
  pdl_launch_dependents();
}

#ifndef EMBER_ROPE_GROUPED
#define EMBER_ROPE_GROUPED 1  // NOTE: 0 = rope_kernel for every shape (A/B)
#endif
constexpr int kGroupThreads = 512;
// NOTE: measured on the H200 (docs/perf/notes/act.md): the grouped kernel wins at 1-64 tokens
// (2.05 / 3.08 against 2.12 / 3.20 us), rope_kernel from 512 tokens (5.68 against 7.30 us; at
// 8192 tokens 51.4 against 74 us, and 63.5 / 66 / 76 us with 4 / 2 / 8 heads a thread).
constexpr int kGroupMaxTokens = 128;

// Few tokens, on the vector path when the whole head rotates (rotary_dim == head_dim): one
// thread a (head, chunk) of a token, its data loaded *before* the token's position is read (the
// address does not depend on it): a token costs two memory round trips, data and position
// overlapped, then cos/sin, where rope_kernel takes three. A block holds as many whole tokens as
// fit in 256 threads.
template <typename T, int PAIRS, bool INTERLEAVE>
__global__ void __launch_bounds__(kGroupThreads) rope_group_kernel(Params p, int tokens_per_block) {
  const int half = p.rotary_dim / 2;
  const int chunks = half / PAIRS;
  const int total = p.q.heads + p.k.heads;
  const int per_token = total * chunks;
  const int64_t token =
      static_cast<int64_t>(blockIdx.x) * tokens_per_block + threadIdx.x / per_token;
  const int h = static_cast<int>(threadIdx.x) % per_token / chunks;
  const int c = static_cast<int>(threadIdx.x) % chunks;
  pdl_wait();
  if (token < p.tokens) {
    Chunk<T, PAIRS, INTERLEAVE> x;
    x.load(head_in<T>(p, h, token), c, half);
    int64_t pos;
    if (token_position(p, token, pos)) {  // out of range: left as it is / not written
      float cs[PAIRS], sn[PAIRS];
      angles<PAIRS>(p, pos, c, cs, sn);
      x.rotate_store(head_out<T>(p, h, token), c, half, cs, sn);
    }
  }
  pdl_launch_dependents();
}

template <typename T, int PAIRS, bool INTERLEAVE>
cudaError_t launch_group(const Params& p, cudaStream_t stream) {
  const int per_token = (p.q.heads + p.k.heads) * (p.rotary_dim / 2 / PAIRS);
  const int tokens_per_block = max(256 / per_token, 1);
  const int64_t blocks = (p.tokens + tokens_per_block - 1) / tokens_per_block;
  return launch_kernel<rope_group_kernel<T, PAIRS, INTERLEAVE>>(
      dim3(static_cast<unsigned>(blocks)),
      dim3(static_cast<unsigned>(tokens_per_block * per_token)), 0, stream, p.pdl, p.device, p,
      tokens_per_block);
}

// NOTE: 0 = rope_kernel for every shape (A/B). Session 9 on the H200, 8192 tokens in place: 45.18
// us against 49.66 (FlashInfer 50.82); a paired-load form (both heads of a thread loaded before
// either is rotated: 63 registers, 4 CTAs an SM) took 46.40 and was removed after 30b48ac
#ifndef EMBER_ROPE_STATIC
#define EMBER_ROPE_STATIC 1
#endif

// rope_kernel with the shape known at compile time, for many tokens on the common shapes: angles
// from a 16-byte aligned cache, the whole head rotated (rotary_dim == head_dim == ROT), 16-byte
// accesses. One CTA of 256 threads per token and a thread's heads in passes as in rope_kernel,
// but the chunk count is a constant (shifts, not divisions), q's and k's heads run in two loops
// from their own token rows with 32-bit offsets (no per-head q/k selection), the angles come in
// 16-byte loads, and in place one pointer serves the load and the store. Same values, same
// float expressions: the same results bit for bit.
// NOTE: registers set the occupancy, and occupancy has decided RoPE's A/Bs so far: rope_kernel
// takes 48 (5 CTAs, 40 warps an SM); the all-heads-one-pass variant took 56 (320 threads: 30
// warps) and measured 61.5 against 52.1 us. This kernel is held to 32 registers in place (8 CTAs,
// 64 warps; the NeoX path spills two values a head to the stack) and 40 out of place (6 CTAs).
template <typename T, int PAIRS, bool INTERLEAVE, int ROT>
struct StaticShape {
  static constexpr int kE = 16 / static_cast<int>(sizeof(T));  // elements per 16 bytes
  static_assert(PAIRS == (INTERLEAVE ? kE / 2 : kE), "the 16-byte vector paths only");
  static constexpr int kAccesses = INTERLEAVE ? 1 : 2;  // 16-byte accesses per head chunk
  static constexpr int kChunks = ROT / 2 / PAIRS;       // per head
  static_assert(kChunks >= 1 && kMaxThreads % kChunks == 0, "chunks must tile the block");
  static constexpr int kPerPass = kMaxThreads / kChunks;  // heads in one pass of the block
};

// A token's rows of q or k (uniform over the block): a thread's chunk of head hh starts
// hh * stride + ck elements in, an offset in range of int (checked on the host).
template <typename T>
struct StaticRows {
  const T* in;
  T* out;
  int in_stride, out_stride;  // head strides

  __device__ __forceinline__ const T* in_at(int hh, int ck) const {
    return in + (hh * in_stride + ck);
  }
  __device__ __forceinline__ T* out_at(int hh, int ck) const {
    return out + (hh * out_stride + ck);
  }
};
// In place (the host checked `in` == `out` with the same strides) both come from `out`, so the
// compiler sees one address per head.
template <typename T, bool INPLACE>
__device__ __forceinline__ StaticRows<T> static_rows(const Heads& hs, int64_t token) {
  T* out = static_cast<T*>(hs.out) + token * hs.out_token_stride;
  const int out_stride = static_cast<int>(hs.out_head_stride);
  if constexpr (INPLACE) return {out, out, out_stride, out_stride};
  return {static_cast<const T*>(hs.in) + token * hs.in_token_stride, out,
          static_cast<int>(hs.in_head_stride), out_stride};
}

// The conversions of to_float / from_float on whole 32-bit words (a bf16 word's upper element
// is the word with its low 16 bits cleared; the paired cvt rounds each element as the single
// one does).
__device__ __forceinline__ void unpack_word(uint32_t w, float* f, float) {
  f[0] = __uint_as_float(w);
}
__device__ __forceinline__ void unpack_word(uint32_t w, float* f, bfloat16) {
  f[0] = __uint_as_float(w << 16);
  f[1] = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ void unpack_word(uint32_t w, float* f, half) {
  f[0] = to_float(half{static_cast<uint16_t>(w & 0xffffu)});
  f[1] = to_float(half{static_cast<uint16_t>(w >> 16)});
}
__device__ __forceinline__ uint32_t pack_word(const float* f, float) {
  return __float_as_uint(f[0]);
}
__device__ __forceinline__ uint32_t pack_word(const float* f, bfloat16) {
  uint32_t w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(f[1]), "f"(f[0]));
  return w;
}
__device__ __forceinline__ uint32_t pack_word(const float* f, half) {
  uint32_t w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(f[1]), "f"(f[0]));
  return w;
}

// cos and sin of a thread's PAIRS pairs from its token's cache row: 16-byte loads (8-byte for
// fp32 GPT-J chunks, two pairs).
template <int PAIRS, int ROT>
__device__ __forceinline__ void static_angles(const float* row, int c, float* cs, float* sn) {
  constexpr int kW = PAIRS < 4 ? PAIRS : 4;
  using F = Vec<float, kW>;
#pragma unroll
  for (int j = 0; j < PAIRS; j += kW) {
    const F cv = *reinterpret_cast<const F*>(row + c * PAIRS + j);
    const F sv = *reinterpret_cast<const F*>(row + ROT / 2 + c * PAIRS + j);
#pragma unroll
    for (int i = 0; i < kW; ++i) {
      cs[j + i] = cv.v[i];
      sn[j + i] = sv.v[i];
    }
  }
}

// A thread's chunk of one head as 32-bit words, rotated in place: NeoX, PAIRS elements at the
// chunk in each half (x[0], x[1]); GPT-J, 2 * PAIRS consecutive elements (x[0]).
template <typename T, int PAIRS, bool INTERLEAVE, int ROT>
struct StaticChunks {
  using S = StaticShape<T, PAIRS, INTERLEAVE, ROT>;
  using W = Vec<uint32_t, 4>;
  static constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));  // elements a word
  W x[S::kAccesses];

  __device__ __forceinline__ void load(const T* in) {
#pragma unroll
    for (int a = 0; a < S::kAccesses; ++a) x[a] = *reinterpret_cast<const W*>(in + a * (ROT / 2));
  }
  __device__ __forceinline__ void store(T* out) const {
#pragma unroll
    for (int a = 0; a < S::kAccesses; ++a) *reinterpret_cast<W*>(out + a * (ROT / 2)) = x[a];
  }

  __device__ __forceinline__ void rotate(const float* cs, const float* sn) {
    if constexpr (!INTERLEAVE) {  // word w: pairs w * kPerWord + e, x0 in half 0, x1 in half 1
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float f0[kPerWord], f1[kPerWord], y0[kPerWord], y1[kPerWord];
        unpack_word(x[0].v[w], f0, T{});
        unpack_word(x[1].v[w], f1, T{});
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) {
          turn(f0[e], f1[e], cs[w * kPerWord + e], sn[w * kPerWord + e], y0[e], y1[e]);
        }
        x[0].v[w] = pack_word(y0, T{});
        x[1].v[w] = pack_word(y1, T{});
      }
    } else {  // pair j: elements 2j, 2j + 1 (one word of 16-bit elements, or two fp32 words)
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) {
        float f[2], y[2];
        if constexpr (kPerWord == 2) {
          unpack_word(x[0].v[j], f, T{});
        } else {
          unpack_word(x[0].v[2 * j], &f[0], T{});
          unpack_word(x[0].v[2 * j + 1], &f[1], T{});
        }
        turn(f[0], f[1], cs[j], sn[j], y[0], y[1]);
        if constexpr (kPerWord == 2) {
          x[0].v[j] = pack_word(y, T{});
        } else {
          x[0].v[2 * j] = pack_word(&y[0], T{});
          x[0].v[2 * j + 1] = pack_word(&y[1], T{});
        }
      }
    }
  }
};

// Head hh of rows `r` at chunk offset ck.
template <typename T, int PAIRS, bool INTERLEAVE, int ROT>
__device__ __forceinline__ void static_one(const StaticRows<T>& r, int hh, int ck, const float* cs,
                                           const float* sn) {
  StaticChunks<T, PAIRS, INTERLEAVE, ROT> x;
  x.load(r.in_at(hh, ck));
  x.rotate(cs, sn);
  x.store(r.out_at(hh, ck));
}

// CTAs an SM the register budget is set for (see the NOTE above).
constexpr int static_min_blocks(bool inplace) { return inplace ? 8 : 6; }

template <typename T, int PAIRS, bool INTERLEAVE, int ROT, bool INPLACE>
__global__ void __launch_bounds__(kMaxThreads, static_min_blocks(INPLACE))
    rope_static_kernel(Params p) {
  using S = StaticShape<T, PAIRS, INTERLEAVE, ROT>;
  constexpr int kP = S::kPerPass;
  const int64_t token = blockIdx.x;
  const int c = static_cast<int>(threadIdx.x % S::kChunks);
  pdl_wait();
  int64_t pos;
  if (token_position(p, token, pos)) {  // out of range: the token is left as it is / not written
    float cs[PAIRS], sn[PAIRS];
    static_angles<PAIRS, ROT>(p.cos_sin + pos * ROT, c, cs, sn);
    const StaticRows<T> q = static_rows<T, INPLACE>(p.q, token);
    const StaticRows<T> k = static_rows<T, INPLACE>(p.k, token);
    const int ck = c * S::kE;  // the chunk's first element in a head
    const int hq = p.q.heads, total = hq + p.k.heads;
    // The thread's heads are slots g = threadIdx.x / kChunks + i * kP of q's heads then k's.
    int g = static_cast<int>(threadIdx.x / S::kChunks);
    for (; g < hq; g += kP) static_one<T, PAIRS, INTERLEAVE, ROT>(q, g, ck, cs, sn);
    for (; g < total; g += kP) static_one<T, PAIRS, INTERLEAVE, ROT>(k, g - hq, ck, cs, sn);
  }
  pdl_launch_dependents();
}

// Whether rope_static_kernel covers the launch: a 16-byte aligned cache, whole heads of 64, 128
// or 256, every head's offset from its token's row in range of int.
inline bool static_heads_fit(const Heads& hs, int head_dim) {
  for (const int64_t s : {hs.in_head_stride, hs.out_head_stride}) {
    if (s < 0 || s > INT32_MAX || (hs.heads - 1) * s > INT32_MAX - head_dim) return false;
  }
  return true;
}
inline bool static_fits(const Params& p) {
  return p.has_cache && reinterpret_cast<uintptr_t>(p.cos_sin) % 16 == 0 &&
         p.rotary_dim == p.head_dim &&
         (p.rotary_dim == 64 || p.rotary_dim == 128 || p.rotary_dim == 256) &&
         static_heads_fit(p.q, p.head_dim) && static_heads_fit(p.k, p.head_dim);
}
inline bool in_place(const Heads& hs) {
  return hs.in == hs.out && hs.in_token_stride == hs.out_token_stride &&
         hs.in_head_stride == hs.out_head_stride;
}

template <typename T, int PAIRS, bool INTERLEAVE, int ROT>
cudaError_t launch_static(const Params& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.tokens)), block(kMaxThreads);
  if (in_place(p.q) && in_place(p.k)) {
    return launch_kernel<rope_static_kernel<T, PAIRS, INTERLEAVE, ROT, true>>(
        grid, block, 0, stream, p.pdl, p.device, p);
  }
  return launch_kernel<rope_static_kernel<T, PAIRS, INTERLEAVE, ROT, false>>(grid, block, 0, stream,
                                                                             p.pdl, p.device, p);
}

template <typename T, int PAIRS, bool INTERLEAVE>
cudaError_t launch_pairs(const Params& p, cudaStream_t stream) {
  const int chunks = p.rotary_dim / 2 / PAIRS;
  const int total = p.q.heads + p.k.heads;
  if constexpr (EMBER_ROPE_GROUPED && PAIRS > 1) {
    if (p.rotary_dim == p.head_dim) {
      // one head a thread: a token's heads spread over as many threads as fit a block
      if (p.tokens <= kGroupMaxTokens && total * chunks <= kGroupThreads) {
        return launch_group<T, PAIRS, INTERLEAVE>(p, stream);
      }
    }
  }
  if constexpr (EMBER_ROPE_STATIC && PAIRS > 1) {
    if (static_fits(p)) {
      switch (p.rotary_dim) {
        case 64:
          return launch_static<T, PAIRS, INTERLEAVE, 64>(p, stream);
        case 128:
          return launch_static<T, PAIRS, INTERLEAVE, 128>(p, stream);
        default:  // 256
          return launch_static<T, PAIRS, INTERLEAVE, 256>(p, stream);
      }
    }
  }
  const int threads = chunks >= kMaxThreads ? chunks : kMaxThreads / chunks * chunks;
  return launch_kernel<rope_kernel<T, PAIRS, INTERLEAVE>>(dim3(static_cast<unsigned>(p.tokens)),
                                                          dim3(static_cast<unsigned>(threads)), 0,
                                                          stream, p.pdl, p.device, p);
}

template <typename T>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  constexpr int kE = 16 / static_cast<int>(sizeof(T));  // elements per 16 bytes
  if (p.interleave) {
    if (p.vec > 1) return launch_pairs<T, kE / 2, true>(p, stream);
    return launch_pairs<T, 1, true>(p, stream);
  }
  if (p.vec > 1) return launch_pairs<T, kE, false>(p, stream);
  return launch_pairs<T, 1, false>(p, stream);
}

}  // namespace rope
}  // namespace ember

#pragma nv_diagnostic pop
