// Attention utilities binding: the paged KV-cache append and the merge of attention states;
// validate, launch on the caller's stream, export (R3.3). One module for every dtype.
#include "ember/paged.h"

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <string>

#include "binding.h"
#include "ember/device.h"

namespace {

using tvm::ffi::TensorView;
namespace b = ember::binding;
constexpr const char* kFn = "ember.append_paged_kv_cache";

void append(TensorView k_new, TensorView v_new, TensorView batch_indices, TensorView positions,
            TensorView k_cache, TensorView v_cache, TensorView kv_indices, TensorView kv_indptr,
            bool hnd) {
  b::expect_ndim(kFn, "append_key", k_new, 3);
  b::expect_same_shape(kFn, "append_value", v_new, "append_key", k_new);
  b::expect_ndim(kFn, "k_cache", k_cache, 4);
  b::expect_same_shape(kFn, "v_cache", v_cache, "k_cache", k_cache);
  const DLDataType dt = k_cache.dtype();
  b::expect_dtype(kFn, "v_cache", v_cache, dt);
  b::expect_dtype(kFn, "append_key", k_new, dt);
  b::expect_dtype(kFn, "append_value", v_new, dt);
  const int64_t nnz = k_new.shape()[0];
  const int64_t kv_heads = k_new.shape()[1];
  const int64_t dim = k_new.shape()[2];
  const int head_axis = hnd ? 1 : 2;
  const int slot_axis = hnd ? 2 : 1;
  if (k_cache.shape()[head_axis] != kv_heads || k_cache.shape()[3] != dim) {
    TVM_FFI_THROW(ValueError) << kFn << ": `append_key` is " << b::shape_str(k_new)
                              << " but the cache holds " << k_cache.shape()[head_axis]
                              << " kv heads of " << k_cache.shape()[3] << " ("
                              << (hnd ? "HND" : "NHD") << " cache " << b::shape_str(k_cache) << ")";
  }
  for (auto [name, t] : {std::pair<const char*, TensorView>{"append_key", k_new},
                         {"append_value", v_new},
                         {"k_cache", k_cache},
                         {"v_cache", v_cache}}) {
    if (t.stride(t.ndim() - 1) != 1) {
      TVM_FFI_THROW(ValueError) << kFn << ": the last dimension of `" << name
                                << "` must be contiguous (stride 1), got stride "
                                << t.stride(t.ndim() - 1);
    }
  }
  const DLDataType i32{kDLInt, 32, 1};
  for (auto [name, t] : {std::pair<const char*, TensorView>{"batch_indices", batch_indices},
                         {"positions", positions},
                         {"kv_indices", kv_indices},
                         {"kv_indptr", kv_indptr}}) {
    b::expect_dtype(kFn, name, t, i32);
    b::expect_ndim(kFn, name, t, 1);
    b::expect_contiguous(kFn, name, t);
  }
  if (batch_indices.shape()[0] != nnz || positions.shape()[0] != nnz) {
    TVM_FFI_THROW(ValueError) << kFn << ": `batch_indices` and `positions` must have " << nnz
                              << " entries (one per appended token), got "
                              << batch_indices.shape()[0] << " and " << positions.shape()[0];
  }
  if (kv_indptr.shape()[0] < 1) {
    TVM_FFI_THROW(ValueError) << kFn << ": `kv_indptr` must have batch + 1 >= 1 entries";
  }
  b::expect_device(kFn, "k_cache", k_cache, kDLCUDA, "a CUDA device");
  for (auto [name, t] : {std::pair<const char*, TensorView>{"v_cache", v_cache},
                         {"append_key", k_new},
                         {"append_value", v_new},
                         {"batch_indices", batch_indices},
                         {"positions", positions},
                         {"kv_indices", kv_indices},
                         {"kv_indptr", kv_indptr}}) {
    b::expect_same_device(kFn, name, t, "k_cache", k_cache);
  }
  ember::paged::AppendParams p{};
  p.k_new = b::data(k_new);
  p.v_new = b::data(v_new);
  p.k_new_stride_t = k_new.stride(0);
  p.k_new_stride_h = k_new.stride(1);
  p.v_new_stride_t = v_new.stride(0);
  p.v_new_stride_h = v_new.stride(1);
  p.k = {b::data(k_cache), k_cache.stride(0), k_cache.stride(slot_axis), k_cache.stride(head_axis)};
  p.v = {b::data(v_cache), v_cache.stride(0), v_cache.stride(slot_axis), v_cache.stride(head_axis)};
  p.batch_indices = static_cast<const int32_t*>(b::data(batch_indices));
  p.positions = static_cast<const int32_t*>(b::data(positions));
  p.indptr = static_cast<const int32_t*>(b::data(kv_indptr));
  p.indices = static_cast<const int32_t*>(b::data(kv_indices));
  p.nnz = nnz;
  p.batch = static_cast<int>(kv_indptr.shape()[0] - 1);
  p.kv_heads = static_cast<int>(kv_heads);
  p.head_dim = static_cast<int>(dim);
  p.page_size = static_cast<int>(k_cache.shape()[slot_axis]);
  p.elem_bytes = (dt.bits * dt.lanes + 7) / 8;
  p.vec16 = (dim * p.elem_bytes) % 16 == 0;
  for (const TensorView* t : {&k_new, &v_new, &k_cache, &v_cache}) {
    p.vec16 = p.vec16 && reinterpret_cast<uintptr_t>(b::data(*t)) % 16 == 0;
    for (int i = 0; i + 1 < t->ndim(); ++i)
      p.vec16 = p.vec16 && (t->stride(i) * p.elem_bytes) % 16 == 0;
  }
  p.device = k_cache.device().device_id;
  ember::DeviceScope scope(p.device);
  auto stream =
      static_cast<cudaStream_t>(TVMFFIEnvGetStream(k_cache.device().device_type, p.device));
  const cudaError_t err = ember::paged::run_append(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << kFn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

void merge_states(TensorView v, TensorView s, TensorView v_out, TensorView s_out) {
  constexpr const char* fn = "ember.merge_states";
  b::expect_ndim(fn, "v", v, 4);
  b::expect_ndim(fn, "s", s, 3);
  const DLDataType dt = v.dtype();
  int code = -1;
  if (dt.code == kDLFloat && dt.bits == 32) code = 0;
  if (dt.code == kDLFloat && dt.bits == 16) code = 1;
  if (dt.code == kDLBfloat && dt.bits == 16) code = 2;
  if (code < 0 || dt.lanes != 1) {
    TVM_FFI_THROW(TypeError) << fn << ": `v` must be float32, float16 or bfloat16, got "
                             << b::dtype_str(dt);
  }
  const DLDataType f32{kDLFloat, 32, 1};
  b::expect_dtype(fn, "s", s, f32);
  b::expect_dtype(fn, "v_out", v_out, dt);
  b::expect_dtype(fn, "s_out", s_out, f32);
  const int64_t rows = v.shape()[0], states = v.shape()[1], heads = v.shape()[2];
  const int64_t dim = v.shape()[3];
  if (s.shape()[0] != rows || s.shape()[1] != states || s.shape()[2] != heads) {
    TVM_FFI_THROW(ValueError) << fn << ": `s` must be [" << rows << ", " << states << ", " << heads
                              << "] (from `v` " << b::shape_str(v) << "), got " << b::shape_str(s);
  }
  if (v_out.ndim() != 3 || v_out.shape()[0] != rows || v_out.shape()[1] != heads ||
      v_out.shape()[2] != dim) {
    TVM_FFI_THROW(ValueError) << fn << ": `v_out` must be [" << rows << ", " << heads << ", " << dim
                              << "], got " << b::shape_str(v_out);
  }
  if (s_out.ndim() != 2 || s_out.shape()[0] != rows || s_out.shape()[1] != heads) {
    TVM_FFI_THROW(ValueError) << fn << ": `s_out` must be [" << rows << ", " << heads << "], got "
                              << b::shape_str(s_out);
  }
  b::expect_contiguous(fn, "s_out", s_out);
  if (states < 1) TVM_FFI_THROW(ValueError) << fn << ": `v` must hold at least one state";
  if (v.stride(3) != 1 || v_out.stride(2) != 1 || s.stride(2) != 1) {
    TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `v`, `v_out` and `s` must be "
                              << "contiguous (stride 1)";
  }
  b::expect_device(fn, "v", v, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "s", s, "v", v);
  b::expect_same_device(fn, "v_out", v_out, "v", v);
  b::expect_same_device(fn, "s_out", s_out, "v", v);
  ember::paged::MergeParams p{};
  p.v = b::data(v);
  p.s = static_cast<const float*>(b::data(s));
  p.v_out = b::data(v_out);
  p.s_out = static_cast<float*>(b::data(s_out));
  p.v_stride_row = v.stride(0);
  p.v_stride_state = v.stride(1);
  p.v_stride_head = v.stride(2);
  p.s_stride_row = s.stride(0);
  p.s_stride_state = s.stride(1);
  p.o_stride_row = v_out.stride(0);
  p.o_stride_head = v_out.stride(1);
  p.rows = rows;
  p.states = static_cast<int>(states);
  p.heads = static_cast<int>(heads);
  p.dim = static_cast<int>(dim);
  {
    const int64_t e = 16 / (dt.bits / 8);  // elements a 16-byte pack
    p.vec = reinterpret_cast<uintptr_t>(p.v) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(p.v_out) % 16 == 0 && p.v_stride_row % e == 0 &&
            p.v_stride_state % e == 0 && p.v_stride_head % e == 0 && p.o_stride_row % e == 0 &&
            p.o_stride_head % e == 0;
  }
  p.device = v.device().device_id;
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(v.device().device_type, p.device));
  const cudaError_t err = ember::paged::run_merge_states(p, code, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(append, append);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(merge_states, merge_states);
