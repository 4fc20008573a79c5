// Toy CUDA module: validate -> device guard + stream -> launch -> export.
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/device_guard.h>
#include <tvm/ffi/function.h>

#include "binding.h"
#include "ember/toy.cuh"

namespace {

using tvm::ffi::TensorView;
namespace b = ember::binding;

void axpy(TensorView a, TensorView x, double alpha, TensorView out) {
  constexpr const char* fn = "toy.axpy";
  const DLDataType f32{kDLFloat, 32, 1};
  for (auto [name, t] : {std::pair<const char*, TensorView>{"a", a}, {"b", x}, {"out", out}}) {
    b::expect_device(fn, name, t, kDLCUDA, "cuda");
    b::expect_dtype(fn, name, t, f32);
    b::expect_ndim(fn, name, t, 1);
    b::expect_contiguous(fn, name, t);
  }
  b::expect_same_shape(fn, "b", x, "a", a);
  b::expect_same_shape(fn, "out", out, "a", a);
  b::expect_same_device(fn, "b", x, "a", a);
  b::expect_same_device(fn, "out", out, "a", a);
  tvm::ffi::CUDADeviceGuard guard(a.device().device_id);
  auto stream =
      static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  cudaError_t err = ember::toy::axpy(
      static_cast<const float*>(a.data_ptr()), static_cast<const float*>(x.data_ptr()),
      static_cast<float>(alpha), static_cast<float*>(out.data_ptr()), a.numel(), stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": CUDA launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(axpy, axpy);
