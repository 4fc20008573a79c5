// Writing new tokens into a paged KV cache. Framework-free (R3.1, R3.2).
//
// Token i of the append batch belongs to request batch_indices[i] at sequence position
// positions[i]; its page is indices[indptr[b] + pos / page_size] and its slot pos % page_size.
// One CTA per token copies its K and V rows (all kv heads) with 16-byte vectors. A position past
// the request's pages is not written (the cache outside the request is never touched, R4.7).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/dtype.cuh"
#include "ember/launch.cuh"
#include "ember/paged.h"

namespace ember {
namespace paged {

__device__ __forceinline__ void copy_row(const char* src, char* dst, int bytes, int lane,
                                         int width) {
  if (bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    for (int o = lane * 16; o < bytes; o += width * 16) {
      *reinterpret_cast<uint4*>(dst + o) = *reinterpret_cast<const uint4*>(src + o);
    }
  } else {
    for (int o = lane; o < bytes; o += width) dst[o] = src[o];
  }
}

__global__ void __launch_bounds__(128) append_kernel(AppendParams p) {
  const int64_t t = blockIdx.x;
  const int b = p.batch_indices[t];
  const int pos = p.positions[t];
  if (b < 0 || b >= p.batch || pos < 0) return;
  const int page_idx = pos / p.page_size;
  if (page_idx >= p.indptr[b + 1] - p.indptr[b]) return;
  const int64_t page = p.indices[p.indptr[b] + page_idx];
  const int slot = pos % p.page_size;
  const int row = p.head_dim * p.elem_bytes;
  // NOTE: one warp per head row, the CTA's 4 warps stride over the kv heads.
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  for (int h = warp; h < p.kv_heads; h += 4) {
    const char* ks = static_cast<const char*>(p.k_new) +
                     (t * p.k_new_stride_t + h * p.k_new_stride_h) * p.elem_bytes;
    const char* vs = static_cast<const char*>(p.v_new) +
                     (t * p.v_new_stride_t + h * p.v_new_stride_h) * p.elem_bytes;
    char* kd =
        static_cast<char*>(const_cast<void*>(p.k.base)) +
        (page * p.k.page_stride + slot * p.k.slot_stride + h * p.k.head_stride) * p.elem_bytes;
    char* vd =
        static_cast<char*>(const_cast<void*>(p.v.base)) +
        (page * p.v.page_stride + slot * p.v.slot_stride + h * p.v.head_stride) * p.elem_bytes;
    copy_row(ks, kd, row, lane, 32);
    copy_row(vs, vd, row, lane, 32);
  }
}

// Merge attention states: for each (row, head), out = sum_i w_i v_i and lse = log sum_i e^{s_i}
// with w_i = e^{s_i - lse} (natural-log LSEs; an all -inf row gives 0 and -inf).
template <typename T>
__global__ void __launch_bounds__(128) merge_states_kernel(MergeParams p) {
  const int64_t row = blockIdx.x;
  const int h = blockIdx.y;
  const float* s = p.s + row * p.s_stride_row + h;
  float mx = -INFINITY;
  for (int i = 0; i < p.states; ++i) mx = fmaxf(mx, s[i * p.s_stride_state]);
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int i = 0; i < p.states; ++i) sum += __expf(s[i * p.s_stride_state] - mx);
  }
  const T* v = static_cast<const T*>(p.v) + row * p.v_stride_row + h * p.v_stride_head;
  T* out = static_cast<T*>(p.v_out) + row * p.o_stride_row + h * p.o_stride_head;
  for (int d = threadIdx.x; d < p.dim; d += blockDim.x) {
    float acc = 0.f;
    if (mx != -INFINITY) {
      for (int i = 0; i < p.states; ++i) {
        acc += __expf(s[i * p.s_stride_state] - mx) * to_float(v[i * p.v_stride_state + d]);
      }
    }
    out[d] = from_float<T>(sum > 0.f ? acc / sum : 0.f);
  }
  if (threadIdx.x == 0) {
    p.s_out[row * p.heads + h] = sum > 0.f ? mx + logf(sum) : -INFINITY;
  }
}

template <typename T>
cudaError_t merge_states(const MergeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  return launch_kernel<merge_states_kernel<T>>(
      dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.heads)), dim3(128), 0, stream,
      false, p.device, p);
}

inline cudaError_t append(const AppendParams& p, cudaStream_t stream) {
  if (p.nnz == 0) return cudaSuccess;
  return launch_kernel<append_kernel>(dim3(static_cast<unsigned>(p.nnz)), dim3(128), 0, stream,
                                      false, p.device, p);
}

}  // namespace paged
}  // namespace ember
