// Batch decode over a paged KV cache: what the binding (decode.cc) and the kernel unit
// (decode.cu) share. Framework-free (R3.1): raw pointers, strides in elements, cudaStream_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember {
namespace decode {

// One of K or V: element (page, slot, head, d) is at
// base[page * page_stride + slot * slot_stride + head * head_stride + d] (d contiguous).
struct CacheView {
  const void* base;
  int64_t page_stride;
  int64_t slot_stride;
  int64_t head_stride;
};

struct Params {
  const void* q;  // [batch, qo_heads, head_dim]
  int64_t q_stride_b, q_stride_h;
  void* out;  // like q
  int64_t o_stride_b, o_stride_h;
  float* lse;  // [batch, qo_heads] (natural log), or null
  CacheView k, v;
  const int32_t* indptr;        // [batch + 1]
  const int32_t* indices;       // pages
  const int32_t* work;          // [grid, 4]: request, kv_start, kv_end, slot (decode_plan.h)
  const int32_t* merge_indptr;  // [merge_rows + 1]
  float* partial_o;             // [slots, qo_heads, head_dim]
  float* partial_lse;           // [slots, qo_heads]
  int grid;                     // work rows launched
  int merge_rows;               // requests the merge kernel visits
  int page_size;
  int page_shift;  // log2(page_size) when a power of two, else -1
  int qo_heads;
  int kv_heads;
  float sm_scale;
  float soft_cap;  // 0: off
  float k_scale, v_scale;
  bool pdl;
  int device;
};

// Launches the decode kernel (one CTA per work row and kv head), then the merge of split
// requests. Returns the first launch error.
cudaError_t run(const Params& p, cudaStream_t stream);

// Resident decode CTAs per SM on `device` for the kernel `run` launches there (0 on error).
int ctas_per_sm(int device);

}  // namespace decode
}  // namespace ember
