// Appending tokens to a paged KV cache: what the binding (paged.cc) and the kernel unit
// (paged.cu) share. Framework-free (R3.1).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/decode.h"

namespace ember {
namespace paged {

struct AppendParams {
  const void* k_new;  // [nnz, kv_heads, head_dim]
  const void* v_new;
  int64_t k_new_stride_t, k_new_stride_h;
  int64_t v_new_stride_t, v_new_stride_h;
  decode::CacheView k, v;
  const int32_t* batch_indices;  // [nnz]
  const int32_t* positions;      // [nnz]
  const int32_t* indptr;         // [batch + 1]
  const int32_t* indices;
  int64_t nnz;
  int batch;
  int kv_heads;
  int head_dim;
  int page_size;
  int elem_bytes;
  bool vec16;  // rows, bases and strides are whole 16-byte chunks: copy 16 bytes at a time
  int device;
};

struct MergeParams {
  const void* v;   // [rows, states, heads, dim] (dim contiguous)
  const float* s;  // [rows, states, heads]
  void* v_out;     // [rows, heads, dim]
  float* s_out;    // [rows, heads], contiguous
  int64_t v_stride_row, v_stride_state, v_stride_head;
  int64_t s_stride_row, s_stride_state;
  int64_t o_stride_row, o_stride_head;
  int64_t rows;
  int states;
  int heads;
  int dim;
  bool vec;  // v and v_out 16-byte aligned, their strides whole 16-byte packs
  int device;
};

// Combines attention states by their log-sum-exp (ember/paged.cuh); dtype: 0 fp32, 1 fp16,
// 2 bf16.
cudaError_t run_merge_states(const MergeParams& p, int dtype, cudaStream_t stream);

// Copies each new token's K and V rows into its page slot (ember/paged.cuh).
cudaError_t run_append(const AppendParams& p, cudaStream_t stream);

}  // namespace paged
}  // namespace ember
