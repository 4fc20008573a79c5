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

namespace ember {
namespace rope {

constexpr int kMaxThreads = 1024;

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

#ifndef EMBER_ROPE_PREFETCH
#define EMBER_ROPE_PREFETCH 1  // NOTE: 0 = the b2a2be8 kernel (loads after the position), for A/B
#endif

template <typename T, int PAIRS, bool INTERLEAVE>
__global__ void __launch_bounds__(kMaxThreads) rope_kernel(Params p) {
  const int64_t token = blockIdx.x;
  const int half = p.rotary_dim / 2;
  const int chunks = half / PAIRS;  // per head
  const int c = threadIdx.x % chunks;
  const int heads_per_pass = blockDim.x / chunks;
  const int total = p.q.heads + p.k.heads;
  // A thread's accesses: NeoX: PAIRS elements at `c` of each half; GPT-J: 2 * PAIRS at `c`.
  constexpr bool kElementwise = INTERLEAVE && PAIRS == 1;  // unaligned GPT-J rows
  using V = Vec<T, INTERLEAVE ? 2 * PAIRS : PAIRS>;
  auto row_in = [&](int h) {
    const Heads& hs = h < p.q.heads ? p.q : p.k;
    const int hh = h < p.q.heads ? h : h - p.q.heads;
    return static_cast<const T*>(hs.in) + token * hs.in_token_stride + hh * hs.in_head_stride;
  };
  auto row_out = [&](int h) {
    const Heads& hs = h < p.q.heads ? p.q : p.k;
    const int hh = h < p.q.heads ? h : h - p.q.heads;
    return static_cast<T*>(hs.out) + token * hs.out_token_stride + hh * hs.out_head_stride;
  };
  auto load = [&](int h, V& x1, V& x2) {
    const T* in = row_in(h);
    x1 = reinterpret_cast<const V*>(in)[c];
    if constexpr (!INTERLEAVE) x2 = reinterpret_cast<const V*>(in + half)[c];
  };
  pdl_wait();
  // The first head's data does not depend on the position: its loads go out before the
  // position's (and the cos/sin row's), so a token costs two memory round trips, not three.
  int h = static_cast<int>(threadIdx.x) / chunks;
  V x1{}, x2{};
  const bool prefetched = EMBER_ROPE_PREFETCH && !kElementwise && h < total;
  if (prefetched) load(h, x1, x2);
  const int64_t pos = p.positions_i64 ? static_cast<const int64_t*>(p.positions)[token]
                                      : static_cast<const int32_t*>(p.positions)[token];
  const bool in_range = pos >= 0 && (!p.has_cache || pos < p.cos_sin_rows);
  float cs[PAIRS], sn[PAIRS];
#pragma unroll
  for (int j = 0; j < PAIRS; ++j) {
    const int i = c * PAIRS + j;
    if (!in_range) {
      cs[j] = 1.f;
      sn[j] = 0.f;
    } else if (p.has_cache) {
      const float* row = p.cos_sin + pos * p.rotary_dim;
      cs[j] = row[i];
      sn[j] = row[half + i];
    } else {
      sincosf(static_cast<float>(pos) * inv_freq(p, i), &sn[j], &cs[j]);
    }
  }
  if (in_range) {
    for (bool have = prefetched; h < total; h += heads_per_pass, have = false) {
      T* out = row_out(h);
      if constexpr (kElementwise) {
        const T* in = row_in(h);
        const float a = to_float(in[2 * c]), b = to_float(in[2 * c + 1]);
        out[2 * c] = from_float<T>(a * cs[0] - b * sn[0]);
        out[2 * c + 1] = from_float<T>(b * cs[0] + a * sn[0]);
      } else {
        if (!have) load(h, x1, x2);
        if constexpr (INTERLEAVE) {
          V y;
#pragma unroll
          for (int j = 0; j < PAIRS; ++j) {
            const float a = to_float(x1.v[2 * j]), b = to_float(x1.v[2 * j + 1]);
            y.v[2 * j] = from_float<T>(a * cs[j] - b * sn[j]);
            y.v[2 * j + 1] = from_float<T>(b * cs[j] + a * sn[j]);
          }
          reinterpret_cast<V*>(out)[c] = y;
        } else {
          V y1, y2;
#pragma unroll
          for (int j = 0; j < PAIRS; ++j) {
            const float a = to_float(x1.v[j]), b = to_float(x2.v[j]);
            y1.v[j] = from_float<T>(a * cs[j] - b * sn[j]);
            y2.v[j] = from_float<T>(b * cs[j] + a * sn[j]);
          }
          reinterpret_cast<V*>(out)[c] = y1;
          reinterpret_cast<V*>(out + half)[c] = y2;
        }
      }
    }
  }
  // Dims past rotary_dim: copied when out of place (in place they are already there).
  const int rest = p.head_dim - p.rotary_dim;
  if (rest > 0 && in_range) {
    for (int idx = threadIdx.x; idx < total * rest; idx += blockDim.x) {
      const int h = idx / rest, d = p.rotary_dim + idx % rest;
      const Heads& hs = h < p.q.heads ? p.q : p.k;
      const int hh = h < p.q.heads ? h : h - p.q.heads;
      if (hs.in == hs.out) continue;
      static_cast<T*>(hs.out)[token * hs.out_token_stride + hh * hs.out_head_stride + d] =
          static_cast<const T*>(hs.in)[token * hs.in_token_stride + hh * hs.in_head_stride + d];
    }
  }
  pdl_launch_dependents();
}

template <typename T, int PAIRS, bool INTERLEAVE>
cudaError_t launch_pairs(const Params& p, cudaStream_t stream) {
  // One pass over all of a token's heads where they fit in a block (32 + 8 heads of d128 bf16:
  // 320 threads), so no thread has a second, dependent round of loads.
  const int chunks = p.rotary_dim / 2 / PAIRS;
  const int total = p.q.heads + p.k.heads;
  const int heads_per_block =
      EMBER_ROPE_PREFETCH ? max(min(kMaxThreads / chunks, total), 1) : max(256 / chunks, 1);
  const int threads = heads_per_block * chunks;
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
