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

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

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
        const float x0 = to_float(a.v[2 * j]), x1 = to_float(a.v[2 * j + 1]);
        y.v[2 * j] = from_float<T>(x0 * cs[j] - x1 * sn[j]);
        y.v[2 * j + 1] = from_float<T>(x1 * cs[j] + x0 * sn[j]);
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
        const float x0 = to_float(a.v[j]), x1 = to_float(b.v[j]);
        y1.v[j] = from_float<T>(x0 * cs[j] - x1 * sn[j]);
        y2.v[j] = from_float<T>(x1 * cs[j] + x0 * sn[j]);
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
