// The planner's binding, shared by the host module (decode_plan.cc) and the decode module
// (decode.cc, which also uploads the tables): validate, plan into CPU int32 tables, map errors
// to exceptions naming the argument (R3.3). Only csrc/ops includes this.
#pragma once

#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <utility>

#include "binding.h"
#include "ember/decode_plan.h"

namespace ember {
namespace decode_binding {

using tvm::ffi::TensorView;
namespace b = ember::binding;
namespace d = ember::decode;

// Plans into raw int32 tables: work [capacity, kWorkFields], merge_indptr [merge_len >= batch + 1]
// (entries past the batch repeat the last one: requests past the batch merge nothing, which a
// graph workspace's fixed-size merge launch relies on). Returns n_work | n_partials << 16 |
// chunk << 32 (one integer: a tuple costs microseconds to unpack in Python; n_work and
// n_partials are < 65536 by the workspace's limit).
inline int64_t plan_into(TensorView indptr, TensorView last_page_len, int32_t* work,
                         int64_t capacity, int32_t* merge_indptr, int64_t merge_len,
                         int64_t page_size, int64_t kv_heads, int64_t window_left,
                         int64_t target_ctas, int64_t min_chunk, int64_t max_partials,
                         int64_t num_indices) {
  constexpr const char* fn = "plan_batch_decode";
  const DLDataType i32{kDLInt, 32, 1};
  for (auto [name, t] : {std::pair<const char*, TensorView>{"kv_indptr", indptr},
                         {"kv_last_page_len", last_page_len}}) {
    b::expect_device(fn, name, t, kDLCPU, "cpu");
    b::expect_dtype(fn, name, t, i32);
    b::expect_contiguous(fn, name, t);
    b::expect_ndim(fn, name, t, 1);
  }
  const int64_t batch = last_page_len.shape()[0];
  if (indptr.shape()[0] != batch + 1) {
    TVM_FFI_THROW(ValueError) << fn << ": `kv_indptr` must have batch + 1 = " << batch + 1
                              << " entries (batch from `kv_last_page_len`), got "
                              << indptr.shape()[0];
  }
  if (merge_len < batch + 1) {
    TVM_FFI_THROW(ValueError) << fn << ": `merge_indptr` must have at least " << batch + 1
                              << " entries, got " << merge_len;
  }
  if (page_size < 1)
    TVM_FFI_THROW(ValueError) << fn << ": `page_size` must be >= 1, got " << page_size;
  if (kv_heads < 1)
    TVM_FFI_THROW(ValueError) << fn << ": `num_kv_heads` must be >= 1, got " << kv_heads;
  if (window_left < -1) {
    TVM_FFI_THROW(ValueError) << fn << ": `window_left` must be -1 (no window) or >= 0, got "
                              << window_left;
  }
  d::PlanArgs a{};
  a.indptr = static_cast<const int32_t*>(b::data(indptr));
  a.last_page_len = static_cast<const int32_t*>(b::data(last_page_len));
  a.batch = static_cast<int>(batch);
  a.page_size = static_cast<int>(page_size);
  a.kv_heads = static_cast<int>(kv_heads);
  a.window_left = static_cast<int>(window_left);
  a.target_ctas = static_cast<int>(target_ctas);
  a.min_chunk = static_cast<int>(min_chunk);
  a.capacity = static_cast<int>(capacity);
  a.max_partials = static_cast<int>(max_partials);
  const d::PlanResult r = d::plan(a, work, merge_indptr);
  switch (r.error) {
    case d::kPlanOk:
      break;
    case d::kIndptrStart:
      TVM_FFI_THROW(ValueError) << fn << ": `kv_indptr[0]` must be 0, got " << a.indptr[0];
    case d::kIndptrDecreasing:
      TVM_FFI_THROW(ValueError) << fn << ": `kv_indptr` must be non-decreasing, got kv_indptr["
                                << r.bad_index + 1 << "] = " << a.indptr[r.bad_index + 1]
                                << " < kv_indptr[" << r.bad_index
                                << "] = " << a.indptr[r.bad_index];
    case d::kLastPageLen:
      TVM_FFI_THROW(ValueError) << fn << ": `kv_last_page_len[" << r.bad_index
                                << "]` must be in [1, page_size=" << page_size
                                << "] for a request with pages, got "
                                << a.last_page_len[r.bad_index];
    case d::kCapacity:
      TVM_FFI_THROW(ValueError) << fn << ": the plan needs " << r.bad_index
                                << " work units but the workspace holds " << a.capacity
                                << "; create the workspace with a larger `max_work`";
    default:
      TVM_FFI_THROW(ValueError) << fn << ": the plan needs " << r.bad_index
                                << " partial-result slots but the workspace holds " << max_partials
                                << "; create the workspace with a larger `max_work`";
  }
  if (a.batch > 0 && a.indptr[a.batch] > num_indices) {
    TVM_FFI_THROW(ValueError) << fn << ": `kv_indptr[-1]` = " << a.indptr[a.batch]
                              << " pages but `kv_indices` has " << num_indices;
  }
  for (int64_t i = batch + 1; i < merge_len; ++i) merge_indptr[i] = merge_indptr[batch];
  return static_cast<int64_t>(r.n_work) | static_cast<int64_t>(r.n_partials) << 16 |
         static_cast<int64_t>(r.chunk) << 32;
}

// The host module's entry: the tables as CPU int32 tensors.
inline int64_t plan_tables(TensorView indptr, TensorView last_page_len, TensorView work,
                           TensorView merge_indptr, int64_t page_size, int64_t kv_heads,
                           int64_t window_left, int64_t target_ctas, int64_t min_chunk,
                           int64_t max_partials, int64_t num_indices) {
  constexpr const char* fn = "plan_batch_decode";
  const DLDataType i32{kDLInt, 32, 1};
  for (auto [name, t] :
       {std::pair<const char*, TensorView>{"work", work}, {"merge_indptr", merge_indptr}}) {
    b::expect_device(fn, name, t, kDLCPU, "cpu");
    b::expect_dtype(fn, name, t, i32);
    b::expect_contiguous(fn, name, t);
  }
  b::expect_ndim(fn, "work", work, 2);
  b::expect_ndim(fn, "merge_indptr", merge_indptr, 1);
  if (work.shape()[1] != d::kWorkFields) {
    TVM_FFI_THROW(ValueError) << fn << ": `work` must have " << d::kWorkFields
                              << " columns, got shape " << b::shape_str(work);
  }
  return plan_into(indptr, last_page_len, static_cast<int32_t*>(b::data(work)), work.shape()[0],
                   static_cast<int32_t*>(b::data(merge_indptr)), merge_indptr.shape()[0], page_size,
                   kv_heads, window_left, target_ctas, min_chunk, max_partials, num_indices);
}

}  // namespace decode_binding
}  // namespace ember
