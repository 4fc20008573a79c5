// Paged KV-cache append binding: validate, launch on the caller's stream, export (R3.3).
// One module for every dtype (rows are copied as bytes); the dtype only has to match the cache.
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
  p.k_new = k_new.data_ptr();
  p.v_new = v_new.data_ptr();
  p.k_new_stride_t = k_new.stride(0);
  p.k_new_stride_h = k_new.stride(1);
  p.v_new_stride_t = v_new.stride(0);
  p.v_new_stride_h = v_new.stride(1);
  p.k = {k_cache.data_ptr(), k_cache.stride(0), k_cache.stride(slot_axis),
         k_cache.stride(head_axis)};
  p.v = {v_cache.data_ptr(), v_cache.stride(0), v_cache.stride(slot_axis),
         v_cache.stride(head_axis)};
  p.batch_indices = static_cast<const int32_t*>(batch_indices.data_ptr());
  p.positions = static_cast<const int32_t*>(positions.data_ptr());
  p.indptr = static_cast<const int32_t*>(kv_indptr.data_ptr());
  p.indices = static_cast<const int32_t*>(kv_indices.data_ptr());
  p.nnz = nnz;
  p.batch = static_cast<int>(kv_indptr.shape()[0] - 1);
  p.kv_heads = static_cast<int>(kv_heads);
  p.head_dim = static_cast<int>(dim);
  p.page_size = static_cast<int>(k_cache.shape()[slot_axis]);
  p.elem_bytes = (dt.bits * dt.lanes + 7) / 8;
  p.device = k_cache.device().device_id;
  ember::DeviceScope scope(p.device);
  auto stream =
      static_cast<cudaStream_t>(TVMFFIEnvGetStream(k_cache.device().device_type, p.device));
  const cudaError_t err = ember::paged::run_append(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << kFn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(append, append);
