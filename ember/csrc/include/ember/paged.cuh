// Writing new tokens into a paged KV cache. Framework-free (R3.1, R3.2).
//
// Token i of the append batch belongs to request batch_indices[i] at sequence position
// positions[i]; its page is indices[indptr[b] + pos / page_size] and its slot pos % page_size.
// One CTA per token copies its K and V rows (all kv heads) with 16-byte vectors where rows,
// bases and strides allow (else bytes). A position past
// the request's pages is not written (the cache outside the request is never touched, R4.7).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/dtype.cuh"
#include "ember/launch.cuh"
#include "ember/paged.h"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace paged {

// Element offset (in bytes) of 16-byte chunk `c` of the token's new K (which = 0) or V rows:
// chunk c covers head c / chunks_per_row, bytes (c % chunks_per_row) * 16 of its row.
__device__ __forceinline__ int64_t src_offset(const AppendParams& p, int64_t t, int which, int h,
                                              int byte) {
  const int64_t st = which ? p.v_new_stride_t : p.k_new_stride_t;
  const int64_t sh = which ? p.v_new_stride_h : p.k_new_stride_h;
  return (t * st + h * sh) * p.elem_bytes + byte;
}

__device__ __forceinline__ int64_t dst_offset(const AppendParams& p, int64_t page, int slot,
                                              int which, int h, int byte) {
  const decode::CacheView& c = which ? p.v : p.k;
  return (page * c.page_stride + slot * c.slot_stride + h * c.head_stride) * p.elem_bytes + byte;
}

// NOTE: the token's new rows are loaded into registers before the page-table chain (batch index
// -> indptr -> page) resolves, and every load is issued before any store, so one CTA waits for
// about one memory round trip instead of one per row.
constexpr int kAppendThreads = 128;
constexpr int kAppendUnroll = 4;  // 16-byte chunks per thread in flight

__global__ void __launch_bounds__(kAppendThreads) append_kernel(AppendParams p) {
  const int64_t t = blockIdx.x;
  const int row = p.head_dim * p.elem_bytes;
  if (p.vec16) {
    const int per_row = row / 16;
    const int total = 2 * p.kv_heads * per_row;  // K then V chunks
    const char* k_new = static_cast<const char*>(p.k_new);
    const char* v_new = static_cast<const char*>(p.v_new);
    for (int base = threadIdx.x; base < total; base += kAppendThreads * kAppendUnroll) {
      uint4 r[kAppendUnroll];
#pragma unroll
      for (int u = 0; u < kAppendUnroll; ++u) {
        const int c = base + u * kAppendThreads;
        if (c < total) {
          const int which = c >= total / 2;
          const int cc = c - which * (total / 2);
          const int64_t off = src_offset(p, t, which, cc / per_row, (cc % per_row) * 16);
          r[u] = *reinterpret_cast<const uint4*>((which ? v_new : k_new) + off);
        }
      }
      const int b = p.batch_indices[t];
      const int pos = p.positions[t];
      if (b < 0 || b >= p.batch || pos < 0) return;
      const int page_idx = pos / p.page_size;
      const int first = p.indptr[b];
      if (page_idx >= p.indptr[b + 1] - first) return;
      const int64_t page = p.indices[first + page_idx];
      const int slot = pos % p.page_size;
#pragma unroll
      for (int u = 0; u < kAppendUnroll; ++u) {
        const int c = base + u * kAppendThreads;
        if (c < total) {
          const int which = c >= total / 2;
          const int cc = c - which * (total / 2);
          char* dst = static_cast<char*>(const_cast<void*>(which ? p.v.base : p.k.base));
          const int64_t off = dst_offset(p, page, slot, which, cc / per_row, (cc % per_row) * 16);
          *reinterpret_cast<uint4*>(dst + off) = r[u];
        }
      }
    }
    return;
  }
  // Rows that are not whole 16-byte chunks, or unaligned: bytes.
  const int b = p.batch_indices[t];
  const int pos = p.positions[t];
  if (b < 0 || b >= p.batch || pos < 0) return;
  const int page_idx = pos / p.page_size;
  if (page_idx >= p.indptr[b + 1] - p.indptr[b]) return;
  const int64_t page = p.indices[p.indptr[b] + page_idx];
  const int slot = pos % p.page_size;
  for (int i = threadIdx.x; i < 2 * p.kv_heads * row; i += kAppendThreads) {
    const int which = i >= p.kv_heads * row;
    const int ii = i - which * p.kv_heads * row;
    const char* src = static_cast<const char*>(which ? p.v_new : p.k_new) +
                      src_offset(p, t, which, ii / row, ii % row);
    char* dst = static_cast<char*>(const_cast<void*>(which ? p.v.base : p.k.base)) +
                dst_offset(p, page, slot, which, ii / row, ii % row);
    *dst = *src;
  }
}

// Merge attention states: for each (row, head), out = sum_i w_i v_i and lse = log sum_i e^{s_i}
// with w_i = e^{s_i - lse} (natural-log LSEs; an all -inf row gives 0 and -inf).
// One warp per (row, head): the lanes reduce the states' max and sum, then each lane owns the
// elements lane, lane + 32, ... of the row (coalesced). For dim <= 256 a lane's elements of a
// state are all loaded before they are used (up to 8 independent loads in flight per state).
constexpr int kMergeWarps = 4;
constexpr int kMergePerLane = 8;  // dim <= 256 in registers

template <typename T>
__global__ void __launch_bounds__(kMergeWarps * 32) merge_states_kernel(MergeParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kMergeWarps + threadIdx.x / 32;
  if (pair >= p.rows * p.heads) return;
  const int64_t row = pair / p.heads;
  const int h = static_cast<int>(pair % p.heads);
  const float* __restrict__ s = p.s + row * p.s_stride_row + h;
  float mx = -INFINITY;
  for (int i = lane; i < p.states; i += 32) mx = fmaxf(mx, s[i * p.s_stride_state]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int i = lane; i < p.states; i += 32) sum += __expf(s[i * p.s_stride_state] - mx);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const T* __restrict__ v = static_cast<const T*>(p.v) + row * p.v_stride_row + h * p.v_stride_head;
  T* __restrict__ out = static_cast<T*>(p.v_out) + row * p.o_stride_row + h * p.o_stride_head;
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  if (p.dim <= 32 * kMergePerLane) {
    float acc[kMergePerLane];
#pragma unroll
    for (int k = 0; k < kMergePerLane; ++k) acc[k] = 0.f;
    if (mx != -INFINITY) {
      for (int i = 0; i < p.states; ++i) {
        const float w = __expf(s[i * p.s_stride_state] - mx);
        const T* vi = v + i * p.v_stride_state;
        float x[kMergePerLane];
#pragma unroll
        for (int k = 0; k < kMergePerLane; ++k) {
          const int d = lane + 32 * k;
          x[k] = d < p.dim ? to_float(vi[d]) : 0.f;
        }
#pragma unroll
        for (int k = 0; k < kMergePerLane; ++k) acc[k] += w * x[k];
      }
    }
#pragma unroll
    for (int k = 0; k < kMergePerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < p.dim) out[d] = from_float<T>(acc[k] * inv);
    }
  } else {
    for (int d = lane; d < p.dim; d += 32) {
      float acc = 0.f;
      if (mx != -INFINITY) {
        for (int i = 0; i < p.states; ++i) {
          acc += __expf(s[i * p.s_stride_state] - mx) * to_float(v[i * p.v_stride_state + d]);
        }
      }
      out[d] = from_float<T>(acc * inv);
    }
  }
  if (lane == 0) p.s_out[row * p.heads + h] = sum > 0.f ? mx + logf(sum) : -INFINITY;
}

// merge_states_kernel for aligned rows of at most 32 16-byte packs (p.vec): a group of 2^shift
// threads a (row, head), one pack a thread, so a warp covers 32 / 2^shift pairs and none of its
// lanes idles on a short row (dim 128 bf16: 16 threads a pair). Each thread folds the states in
// by itself (online max and sum over the LSEs, which its group loads as one broadcast), with no
// shuffles: BATCH states' LSEs and packs are in flight before any is used. Index math in 32 bits
// (the launcher keeps the thread count below 2^31).
// NOTE: BATCH sets the registers, so the threads an SM: 4 takes 64 (4 CTAs an SM; ncu: issue
// slots 75 % busy, DRAM 52 %), 2 takes 40 (6 CTAs; 8 would need 32 and spill). One build each:
// 4096 x 2 x 32 x 128 bf16 37.02 us with 4, 29.63 with 2 (FlashInfer 28.99); 64 x 16 states
// 6.59 with 4, 7.65 with 2. With the state count picking (dd957f0): 28.90 (FlashInfer 28.90) and
// 6.50 (9.06); merge_states_kernel, a warp a pair, 83.42 / 16.26 in that run. Two pairs a thread
// lost: 35.33 / 10.56 with 4, 31.04 / 13.02 with 2 (session 10, notes/decode.md).
constexpr int kMergeVecThreads = 256;

template <typename T, int BATCH>
__global__ void __launch_bounds__(kMergeVecThreads, BATCH == 2 ? 6 : 4)
    merge_states_vec_kernel(MergeParams p, int shift) {
  constexpr int kE = 16 / static_cast<int>(sizeof(T));
  using Pack = Vec<T, kE>;
  const unsigned tid = blockIdx.x * kMergeVecThreads + threadIdx.x;
  const unsigned pair = tid >> shift;
  const int j = static_cast<int>(tid & ((1u << shift) - 1));
  if (pair >= static_cast<unsigned>(p.rows) * static_cast<unsigned>(p.heads)) return;
  const unsigned row = pair / static_cast<unsigned>(p.heads);
  const unsigned h = pair - row * static_cast<unsigned>(p.heads);
  const bool mine = j * kE < p.dim;
  const float* __restrict__ s = p.s + row * p.s_stride_row + h;
  const T* __restrict__ v =
      static_cast<const T*>(p.v) + row * p.v_stride_row + h * p.v_stride_head + j * kE;
  float m = -INFINITY, sum = 0.f, acc[kE];
#pragma unroll
  for (int k = 0; k < kE; ++k) acc[k] = 0.f;
  for (int first = 0; first < p.states; first += BATCH) {
    float lse[BATCH];
    Pack x[BATCH];
#pragma unroll
    for (int u = 0; u < BATCH; ++u) {
      const int i = first + u;
      lse[u] = i < p.states ? s[i * p.s_stride_state] : -INFINITY;
      if (i < p.states && mine) x[u] = *reinterpret_cast<const Pack*>(v + i * p.v_stride_state);
    }
#pragma unroll
    for (int u = 0; u < BATCH; ++u) {
      if (lse[u] == -INFINITY) continue;  // an empty state, or past the last
      if (lse[u] > m) {
        const float c = __expf(m - lse[u]);  // 0 while m is -inf
        sum *= c;
#pragma unroll
        for (int k = 0; k < kE; ++k) acc[k] *= c;
        m = lse[u];
      }
      const float w = __expf(lse[u] - m);
      sum += w;
      if (mine) {
#pragma unroll
        for (int k = 0; k < kE; ++k) acc[k] += w * to_float(x[u].v[k]);
      }
    }
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  if (mine) {
    Pack y;
#pragma unroll
    for (int k = 0; k < kE; ++k) y.v[k] = from_float<T>(acc[k] * inv);
    T* out = static_cast<T*>(p.v_out) + row * p.o_stride_row + h * p.o_stride_head + j * kE;
    *reinterpret_cast<Pack*>(out) = y;
  }
  if (j == 0) p.s_out[pair] = sum > 0.f ? m + logf(sum) : -INFINITY;
}

#ifndef EMBER_MERGE_VEC
#define EMBER_MERGE_VEC 1  // NOTE: 0 = merge_states_kernel (a warp a pair) on every shape (A/B)
#endif

template <typename T>
cudaError_t merge_states(const MergeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  constexpr int kE = 16 / static_cast<int>(sizeof(T));
  if (EMBER_MERGE_VEC && p.vec && p.dim % kE == 0 && p.dim <= 32 * kE) {
    int shift = 0;
    while ((1 << shift) * kE < p.dim) ++shift;
    const int64_t threads = (p.rows * p.heads) << shift;
    const int64_t blocks = (threads + kMergeVecThreads - 1) / kMergeVecThreads;
    if (blocks * kMergeVecThreads < (int64_t{1} << 31)) {
      const dim3 grid(static_cast<unsigned>(blocks));
      if (p.states <= 2) {  // the common split: two states in flight, fewer registers
        return launch_kernel<merge_states_vec_kernel<T, 2>>(grid, dim3(kMergeVecThreads), 0, stream,
                                                            false, p.device, p, shift);
      }
      return launch_kernel<merge_states_vec_kernel<T, 4>>(grid, dim3(kMergeVecThreads), 0, stream,
                                                          false, p.device, p, shift);
    }
  }
  const int64_t blocks = (p.rows * p.heads + kMergeWarps - 1) / kMergeWarps;
  return launch_kernel<merge_states_kernel<T>>(
      dim3(static_cast<unsigned>(blocks)), dim3(kMergeWarps * 32), 0, stream, false, p.device, p);
}

inline cudaError_t append(const AppendParams& p, cudaStream_t stream) {
  if (p.nnz == 0) return cudaSuccess;
  return launch_kernel<append_kernel>(dim3(static_cast<unsigned>(p.nnz)), dim3(kAppendThreads), 0,
                                      stream, false, p.device, p);
}

}  // namespace paged
}  // namespace ember

#pragma nv_diagnostic pop
