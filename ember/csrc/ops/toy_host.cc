// Toy host module: validates tvm-ffi tensors and calls the framework-free host code.
#include <tvm/ffi/function.h>

#include "binding.h"
#include "ember/toy.h"

namespace {

using tvm::ffi::TensorView;
namespace b = ember::binding;

void axpy(TensorView a, TensorView x, double alpha, TensorView out) {
  constexpr const char* fn = "toy.axpy";
  const DLDataType f32{kDLFloat, 32, 1};
  for (auto [name, t] : {std::pair<const char*, TensorView>{"a", a}, {"b", x}, {"out", out}}) {
    b::expect_device(fn, name, t, kDLCPU, "cpu");
    b::expect_dtype(fn, name, t, f32);
    b::expect_ndim(fn, name, t, 1);
    b::expect_contiguous(fn, name, t);
  }
  b::expect_same_shape(fn, "b", x, "a", a);
  b::expect_same_shape(fn, "out", out, "a", a);
  ember::toy::axpy_host(static_cast<const float*>(a.data_ptr()),
                        static_cast<const float*>(x.data_ptr()), static_cast<float>(alpha),
                        static_cast<float*>(out.data_ptr()), a.numel());
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(axpy, axpy);
