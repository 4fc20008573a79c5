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

template <typename T, int PAIRS, bool INTERLEAVE>
__global__ void __launch_bounds__(kMaxThreads) rope_kernel(Params p) {
  const int64_t token = blockIdx.x;
  const int half = p.rotary_dim / 2;
  const int chunks = half / PAIRS;  // per head
  const int c = threadIdx.x % chunks;
  const int heads_per_pass = blockDim.x / chunks;
  pdl_wait();
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
  const int total = p.q.heads + p.k.heads;
  if (in_range) {
    for (int h = static_cast<int>(threadIdx.x) / chunks; h < total; h += heads_per_pass) {
      const Heads& hs = h < p.q.heads ? p.q : p.k;
      const int hh = h < p.q.heads ? h : h - p.q.heads;
      const T* in =
          static_cast<const T*>(hs.in) + token * hs.in_token_stride + hh * hs.in_head_stride;
      T* out = static_cast<T*>(hs.out) + token * hs.out_token_stride + hh * hs.out_head_stride;
      if constexpr (INTERLEAVE && PAIRS == 1) {  // unaligned rows: element by element
        const float a = to_float(in[2 * c]), b = to_float(in[2 * c + 1]);
        out[2 * c] = from_float<T>(a * cs[0] - b * sn[0]);
        out[2 * c + 1] = from_float<T>(b * cs[0] + a * sn[0]);
      } else if constexpr (INTERLEAVE) {
        const Vec<T, 2 * PAIRS> x = reinterpret_cast<const Vec<T, 2 * PAIRS>*>(in)[c];
        Vec<T, 2 * PAIRS> y;
#pragma unroll
        for (int j = 0; j < PAIRS; ++j) {
          const float a = to_float(x.v[2 * j]), b = to_float(x.v[2 * j + 1]);
          y.v[2 * j] = from_float<T>(a * cs[j] - b * sn[j]);
          y.v[2 * j + 1] = from_float<T>(b * cs[j] + a * sn[j]);
        }
        reinterpret_cast<Vec<T, 2 * PAIRS>*>(out)[c] = y;
      } else {
        const Vec<T, PAIRS> x1 = reinterpret_cast<const Vec<T, PAIRS>*>(in)[c];
        const Vec<T, PAIRS> x2 = reinterpret_cast<const Vec<T, PAIRS>*>(in + half)[c];
        Vec<T, PAIRS> y1, y2;
#pragma unroll
        for (int j = 0; j < PAIRS; ++j) {
          const float a = to_float(x1.v[j]), b = to_float(x2.v[j]);
          y1.v[j] = from_float<T>(a * cs[j] - b * sn[j]);
          y2.v[j] = from_float<T>(b * cs[j] + a * sn[j]);
        }
        reinterpret_cast<Vec<T, PAIRS>*>(out)[c] = y1;
        reinterpret_cast<Vec<T, PAIRS>*>(out + half)[c] = y2;
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

#ifndef EMBER_ROPE_GROUPED
#define EMBER_ROPE_GROUPED 1  // NOTE: 0 = rope_kernel for every shape (A/B)
#endif
constexpr int kGroupThreads = 512;
// NOTE: measured on the H200 (docs/perf/notes/act.md): the grouped kernel wins at 1-64 tokens
// (2.05 / 3.08 against 2.12 / 3.20 us), rope_kernel from 512 tokens (5.68 against 7.30 us; at
// 8192 tokens 51.4 against 63.5 us with 4 heads a thread, 74 with 1, 66 with 2, 76 with 8).
constexpr int kGroupMaxTokens = 128;

// Few tokens, on the vector path when the whole head rotates (rotary_dim == head_dim): a thread
// owns one chunk of pair indices of HPT heads of a token (heads g, g + groups, ...), and all its
// data loads are issued *before* the token's position is read (their addresses do not depend on
// it): a token costs two memory round trips, data and position overlapped, then cos/sin, where
// rope_kernel takes three. A block holds as many whole tokens as fit in 256 threads.
template <typename T, int PAIRS, bool INTERLEAVE, int HPT>
__global__ void __launch_bounds__(kGroupThreads)
    rope_group_kernel(Params p, int groups, int tokens_per_block) {
  const int half = p.rotary_dim / 2;
  const int chunks = half / PAIRS;
  const int per_token = groups * chunks;
  const int local = static_cast<int>(threadIdx.x) / per_token;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * tokens_per_block + local;
  const int r = static_cast<int>(threadIdx.x) % per_token;
  const int g = r / chunks, c = r % chunks;
  const int total = p.q.heads + p.k.heads;
  using V = Vec<T, INTERLEAVE ? 2 * PAIRS : PAIRS>;
  pdl_wait();
  if (token < p.tokens) {
    V x1[HPT], x2[HPT];
#pragma unroll
    for (int k = 0; k < HPT; ++k) {
      const int h = g + k * groups;
      if (h < total) {
        const Heads& hs = h < p.q.heads ? p.q : p.k;
        const int hh = h < p.q.heads ? h : h - p.q.heads;
        const T* in =
            static_cast<const T*>(hs.in) + token * hs.in_token_stride + hh * hs.in_head_stride;
        x1[k] = reinterpret_cast<const V*>(in)[c];
        if constexpr (!INTERLEAVE) x2[k] = reinterpret_cast<const V*>(in + half)[c];
      }
    }
    const int64_t pos = p.positions_i64 ? static_cast<const int64_t*>(p.positions)[token]
                                        : static_cast<const int32_t*>(p.positions)[token];
    const bool in_range = pos >= 0 && (!p.has_cache || pos < p.cos_sin_rows);
    if (in_range) {  // out of range: the token is left as it is (in place) / not written
      float cs[PAIRS], sn[PAIRS];
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
#pragma unroll
      for (int k = 0; k < HPT; ++k) {
        const int h = g + k * groups;
        if (h >= total) continue;
        const Heads& hs = h < p.q.heads ? p.q : p.k;
        const int hh = h < p.q.heads ? h : h - p.q.heads;
        T* out = static_cast<T*>(hs.out) + token * hs.out_token_stride + hh * hs.out_head_stride;
        if constexpr (INTERLEAVE) {
          V y;
#pragma unroll
          for (int j = 0; j < PAIRS; ++j) {
            const float a = to_float(x1[k].v[2 * j]), b = to_float(x1[k].v[2 * j + 1]);
            y.v[2 * j] = from_float<T>(a * cs[j] - b * sn[j]);
            y.v[2 * j + 1] = from_float<T>(b * cs[j] + a * sn[j]);
          }
          reinterpret_cast<V*>(out)[c] = y;
        } else {
          V y1, y2;
#pragma unroll
          for (int j = 0; j < PAIRS; ++j) {
            const float a = to_float(x1[k].v[j]), b = to_float(x2[k].v[j]);
            y1.v[j] = from_float<T>(a * cs[j] - b * sn[j]);
            y2.v[j] = from_float<T>(b * cs[j] + a * sn[j]);
          }
          reinterpret_cast<V*>(out)[c] = y1;
          reinterpret_cast<V*>(out + half)[c] = y2;
        }
      }
    }
  }
  pdl_launch_dependents();
}

template <typename T, int PAIRS, bool INTERLEAVE, int HPT>
cudaError_t launch_group(const Params& p, int groups, cudaStream_t stream) {
  const int per_token = groups * (p.rotary_dim / 2 / PAIRS);
  const int tokens_per_block = max(256 / per_token, 1);
  const int64_t blocks = (p.tokens + tokens_per_block - 1) / tokens_per_block;
  return launch_kernel<rope_group_kernel<T, PAIRS, INTERLEAVE, HPT>>(
      dim3(static_cast<unsigned>(blocks)),
      dim3(static_cast<unsigned>(tokens_per_block * per_token)), 0, stream, p.pdl, p.device, p,
      groups, tokens_per_block);
}

template <typename T, int PAIRS, bool INTERLEAVE>
cudaError_t launch_pairs(const Params& p, cudaStream_t stream) {
  const int chunks = p.rotary_dim / 2 / PAIRS;
  const int total = p.q.heads + p.k.heads;
  if constexpr (EMBER_ROPE_GROUPED && PAIRS > 1) {
    if (p.rotary_dim == p.head_dim) {
      // one head a thread: a token's heads spread over as many threads as fit a block
      if (p.tokens <= kGroupMaxTokens && total * chunks <= kGroupThreads) {
        return launch_group<T, PAIRS, INTERLEAVE, 1>(p, total, stream);
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
