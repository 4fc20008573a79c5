// Batch decode binding: validate every tensor, launch on the caller's stream, export (R3.3).
// Compiled by the C++ compiler; the kernels are in decode.cu. The module is one specialization:
// EMBER_DECODE_Q_DL_CODE/BITS and EMBER_DECODE_KV_DL_CODE/BITS name the dtypes,
// EMBER_DECODE_HEAD_DIM and EMBER_DECODE_GROUP the shape.
#include "ember/decode.h"

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "binding.h"
#include "decode_plan_binding.h"
#include "ember/decode_plan.h"
#include "ember/device.h"

#if !defined(EMBER_DECODE_Q_DL_CODE) || !defined(EMBER_DECODE_KV_DL_CODE) || \
    !defined(EMBER_DECODE_HEAD_DIM) || !defined(EMBER_DECODE_GROUP)
#error "compile with the EMBER_DECODE_* dtype and shape macros (ember/ops/decode.py)"
#endif

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;
namespace b = ember::binding;
namespace d = ember::decode;

constexpr DLDataType kQ{EMBER_DECODE_Q_DL_CODE, EMBER_DECODE_Q_DL_BITS, 1};
constexpr DLDataType kKV{EMBER_DECODE_KV_DL_CODE, EMBER_DECODE_KV_DL_BITS, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr int64_t kD = EMBER_DECODE_HEAD_DIM;
constexpr int64_t kG = EMBER_DECODE_GROUP;
constexpr const char* kFn = "ember.batch_decode";

void expect_shape(const char* arg, const TensorView& t, std::initializer_list<int64_t> want) {
  bool ok = t.ndim() == static_cast<int>(want.size());
  int i = 0;
  for (int64_t w : want) {
    if (ok && w >= 0 && t.shape()[i] != w) ok = false;
    ++i;
  }
  if (!ok) {
    std::ostringstream os;
    os << "[";
    i = 0;
    for (int64_t w : want) os << (i++ ? ", " : "") << (w >= 0 ? std::to_string(w) : "*");
    os << "]";
    TVM_FFI_THROW(ValueError) << kFn << ": `" << arg << "` must have shape " << os.str() << ", got "
                              << b::shape_str(t);
  }
}

void expect_unit_last(const char* arg, const TensorView& t) {
  if (t.stride(t.ndim() - 1) != 1) {
    TVM_FFI_THROW(ValueError) << kFn << ": the last dimension of `" << arg
                              << "` must be contiguous (stride 1), got stride "
                              << t.stride(t.ndim() - 1);
  }
}

void run(TensorView q, TensorView k, TensorView v, TensorView kv_indptr, TensorView kv_indices,
         TensorView work, TensorView merge_indptr, TensorView partial_o, TensorView partial_lse,
         TensorView out, Optional<TensorView> lse, int64_t grid, int64_t merge_rows,
         int64_t page_size, bool hnd, double sm_scale, double soft_cap, double k_scale,
         double v_scale) {
  b::expect_dtype(kFn, "q", q, kQ);
  b::expect_dtype(kFn, "out", out, kQ);
  b::expect_dtype(kFn, "k_cache", k, kKV);
  b::expect_dtype(kFn, "v_cache", v, kKV);
  if (q.ndim() != 3 || q.shape()[2] != kD || q.shape()[1] % kG != 0) {
    TVM_FFI_THROW(ValueError) << kFn << ": `q` must be [batch, qo_heads, " << kD
                              << "] with qo_heads a multiple of " << kG << ", got "
                              << b::shape_str(q);
  }
  const int64_t batch = q.shape()[0];
  const int64_t qo_heads = q.shape()[1];
  const int64_t kv_heads = qo_heads / kG;
  b::expect_same_shape(kFn, "out", out, "q", q);
  expect_unit_last("q", q);
  expect_unit_last("out", out);
  if (hnd) {
    expect_shape("k_cache", k, {-1, kv_heads, page_size, kD});
  } else {
    expect_shape("k_cache", k, {-1, page_size, kv_heads, kD});
  }
  b::expect_same_shape(kFn, "v_cache", v, "k_cache", k);
  expect_unit_last("k_cache", k);
  expect_unit_last("v_cache", v);
  for (auto [name, t] : {std::pair<const char*, TensorView>{"kv_indptr", kv_indptr},
                         {"kv_indices", kv_indices},
                         {"merge_indptr", merge_indptr}}) {
    b::expect_dtype(kFn, name, t, kI32);
    b::expect_ndim(kFn, name, t, 1);
    b::expect_contiguous(kFn, name, t);
  }
  b::expect_dtype(kFn, "work", work, kI32);
  b::expect_contiguous(kFn, "work", work);
  expect_shape("work", work, {-1, d::kWorkFields});
  if (grid < 0 || grid > work.shape()[0]) {
    TVM_FFI_THROW(ValueError) << kFn << ": the plan launches " << grid
                              << " work rows but the table has " << work.shape()[0];
  }
  if (kv_indptr.shape()[0] < 1 || merge_rows < 0 || merge_indptr.shape()[0] < merge_rows + 1) {
    TVM_FFI_THROW(ValueError) << kFn << ": `merge_indptr` must have at least " << merge_rows + 1
                              << " entries, got " << merge_indptr.shape()[0];
  }
  if (merge_rows > batch || kv_indptr.shape()[0] - 1 > batch) {
    TVM_FFI_THROW(ValueError) << kFn << ": `q` has " << batch << " rows but the plan is for "
                              << kv_indptr.shape()[0] - 1 << " requests";
  }
  b::expect_dtype(kFn, "partial_o", partial_o, kF32);
  b::expect_dtype(kFn, "partial_lse", partial_lse, kF32);
  b::expect_contiguous(kFn, "partial_o", partial_o);
  b::expect_contiguous(kFn, "partial_lse", partial_lse);
  expect_shape("partial_o", partial_o, {-1, qo_heads, kD});
  expect_shape("partial_lse", partial_lse, {partial_o.shape()[0], qo_heads});
  if (lse.has_value()) {
    b::expect_dtype(kFn, "lse", *lse, kF32);
    b::expect_contiguous(kFn, "lse", *lse);
    expect_shape("lse", *lse, {batch, qo_heads});
  }
  if (!(sm_scale > 0) || !(soft_cap >= 0) || !(k_scale > 0) || !(v_scale > 0)) {
    TVM_FFI_THROW(ValueError) << kFn << ": sm_scale, k_scale and v_scale must be > 0 and "
                              << "logits_soft_cap >= 0, got " << sm_scale << ", " << k_scale << ", "
                              << v_scale << ", " << soft_cap;
  }
  // The kernels move 16-byte chunks of q, K and V (cp.async): base addresses and every stride
  // but the last must keep rows 16-byte aligned.
  for (auto [name, t] :
       {std::pair<const char*, TensorView>{"q", q}, {"out", out}, {"k_cache", k}, {"v_cache", v}}) {
    const int64_t elem = (t.dtype().bits + 7) / 8;
    bool aligned = reinterpret_cast<uintptr_t>(b::data(t)) % 16 == 0;
    for (int i = 0; i + 1 < t.ndim(); ++i) aligned = aligned && (t.stride(i) * elem) % 16 == 0;
    if (!aligned) {
      TVM_FFI_THROW(ValueError) << kFn << ": `" << name
                                << "` must start 16-byte aligned with every stride but the last "
                                << "a multiple of 16 bytes (rows of whole 16-byte chunks)";
    }
  }
  // K/V strides below 2^31 elements (a page under 2 G elements): the lean tensor-core loop
  // (`9ee245d`, not yet the default) forms a row's address from 32-bit strides, widening only
  // page * page_stride, so a larger stride is refused here rather than wrapped there.
  for (auto [name, t] : {std::pair<const char*, TensorView>{"k_cache", k}, {"v_cache", v}}) {
    for (int i = 0; i < t.ndim(); ++i) {
      if (t.stride(i) < 0 || t.stride(i) >= (int64_t{1} << 31)) {
        TVM_FFI_THROW(ValueError) << kFn << ": `" << name << "` strides must be in [0, 2^31) "
                                  << "elements, got stride(" << i << ") = " << t.stride(i);
      }
    }
  }
  // NOTE: devices last, so every other check can be exercised with CPU tensors in CI.
  b::expect_device(kFn, "q", q, kDLCUDA, "a CUDA device");
  for (auto [name, t] : {std::pair<const char*, TensorView>{"out", out},
                         {"k_cache", k},
                         {"v_cache", v},
                         {"kv_indptr", kv_indptr},
                         {"kv_indices", kv_indices},
                         {"work", work},
                         {"merge_indptr", merge_indptr},
                         {"partial_o", partial_o},
                         {"partial_lse", partial_lse}}) {
    b::expect_same_device(kFn, name, t, "q", q);
  }
  if (lse.has_value()) b::expect_same_device(kFn, "lse", *lse, "q", q);
  if (batch == 0) return;

  d::Params p{};
  p.q = b::data(q);
  p.q_stride_b = q.stride(0);
  p.q_stride_h = q.stride(1);
  p.out = b::data(out);
  p.o_stride_b = out.stride(0);
  p.o_stride_h = out.stride(1);
  p.lse = lse.has_value() ? static_cast<float*>(b::data(*lse)) : nullptr;
  const int slot_dim = hnd ? 2 : 1;
  const int head_dim = hnd ? 1 : 2;
  p.k = {b::data(k), k.stride(0), k.stride(slot_dim), k.stride(head_dim)};
  p.v = {b::data(v), v.stride(0), v.stride(slot_dim), v.stride(head_dim)};
  p.indptr = static_cast<const int32_t*>(b::data(kv_indptr));
  p.indices = static_cast<const int32_t*>(b::data(kv_indices));
  p.work = static_cast<const int32_t*>(b::data(work));
  p.merge_indptr = static_cast<const int32_t*>(b::data(merge_indptr));
  p.partial_o = static_cast<float*>(b::data(partial_o));
  p.partial_lse = static_cast<float*>(b::data(partial_lse));
  p.grid = static_cast<int>(grid);
  p.merge_rows = static_cast<int>(merge_rows);
  p.page_size = static_cast<int>(page_size);
  p.page_shift = (page_size & (page_size - 1)) == 0 ? __builtin_ctzll(page_size) : -1;
  p.qo_heads = static_cast<int>(qo_heads);
  p.kv_heads = static_cast<int>(kv_heads);
  p.sm_scale = static_cast<float>(sm_scale);
  p.soft_cap = static_cast<float>(soft_cap);
  p.k_scale = static_cast<float>(k_scale);
  p.v_scale = static_cast<float>(v_scale);
  p.device = q.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(q.device().device_type, p.device));
  const cudaError_t err = d::run(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << kFn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

// Resident decode CTAs per SM on CUDA device `device` (the planner fills SMs x this per wave).
int64_t ctas_per_sm(int64_t device) {
  ember::DeviceScope scope(static_cast<int>(device));
  const int n = d::ctas_per_sm(static_cast<int>(device));
  if (n < 1) {
    TVM_FFI_THROW(RuntimeError) << kFn << ": could not query the decode kernel's occupancy on "
                                << "device " << device;
  }
  return n;
}

// A CUDA event (as an integer handle) that orders a workspace's table uploads: the next plan
// waits on it before rewriting the pinned host tables the previous copy reads.
int64_t create_event(int64_t device) {
  ember::DeviceScope scope(static_cast<int>(device));
  cudaEvent_t ev = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << "DecodeWorkspace: cudaEventCreate failed: "
                                << cudaGetErrorString(err);
  }
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(ev));
}

void destroy_event(int64_t event) {
  cudaEventDestroy(reinterpret_cast<cudaEvent_t>(static_cast<intptr_t>(event)));
}

// plan_batch_decode on a GPU, in one call: wait until the previous upload of `host_tables` has
// been read, plan into them (work rows [max_work, 4], then merge_indptr to the end), copy them to
// `dev_tables` on the current stream and record `event` after.
int64_t plan_upload(TensorView indptr, TensorView last_page_len, TensorView host_tables,
                    TensorView dev_tables, int64_t max_work, int64_t page_size, int64_t kv_heads,
                    int64_t window_left, int64_t target_ctas, int64_t min_chunk,
                    int64_t num_indices, int64_t event) {
  constexpr const char* fn = "plan_batch_decode";
  b::expect_device(fn, "host_tables", host_tables, kDLCPU, "cpu");
  b::expect_dtype(fn, "dev_tables", dev_tables, kI32);
  b::expect_dtype(fn, "host_tables", host_tables, kI32);
  b::expect_contiguous(fn, "host_tables", host_tables);
  b::expect_contiguous(fn, "dev_tables", dev_tables);
  b::expect_device(fn, "dev_tables", dev_tables, kDLCUDA, "a CUDA device");
  const int64_t n = host_tables.numel();
  if (dev_tables.numel() != n || max_work < 1 || max_work * d::kWorkFields >= n) {
    TVM_FFI_THROW(ValueError) << fn << ": the workspace's tables do not match (" << n
                              << " host ints, " << dev_tables.numel() << " device ints, "
                              << max_work << " work rows)";
  }
  auto ev = reinterpret_cast<cudaEvent_t>(static_cast<intptr_t>(event));
  if (const cudaError_t err = cudaEventSynchronize(ev); err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": waiting for the previous plan's upload failed: "
                                << cudaGetErrorString(err);
  }
  auto* tables = static_cast<int32_t*>(b::data(host_tables));
  const int64_t work_ints = max_work * d::kWorkFields;
  const int64_t r = ember::decode_binding::plan_into(
      indptr, last_page_len, tables, max_work, tables + work_ints, n - work_ints, page_size,
      kv_heads, window_left, target_ctas, min_chunk, max_work, num_indices);
  const int device = dev_tables.device().device_id;
  ember::DeviceScope scope(device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  cudaError_t err = cudaMemcpyAsync(b::data(dev_tables), tables, static_cast<size_t>(n) * 4,
                                    cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) err = cudaEventRecord(ev, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": uploading the plan failed: " << cudaGetErrorString(err);
  }
  return r;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_upload, plan_upload);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(create_event, create_event);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(destroy_event, destroy_event);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctas_per_sm, ctas_per_sm);
