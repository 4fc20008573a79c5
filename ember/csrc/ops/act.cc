// Gated-activation binding: validate, choose the access width, launch on the caller's stream,
// export (R3.3, R3.4). Compiled by the C++ compiler; the kernels are in act.cu. The module is
// built for one dtype: EMBER_ACT_DL_CODE / EMBER_ACT_DL_BITS name it.
#include "ember/act.h"

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "binding.h"
#include "ember/device.h"

#ifndef EMBER_ACT_DL_CODE
#error "compile with -DEMBER_ACT_DL_CODE=<kDLFloat|kDLBfloat> -DEMBER_ACT_DL_BITS=<16|32>"
#endif

namespace {

using tvm::ffi::TensorView;
namespace a = ember::act;
namespace b = ember::binding;

constexpr DLDataType kDType{EMBER_ACT_DL_CODE, EMBER_ACT_DL_BITS, 1};
constexpr int64_t kElemBytes = EMBER_ACT_DL_BITS / 8;
// NOTE: below this many 16-byte accesses per call each thread makes one (more CTAs, more loads
// in flight for a small problem); above it four (fewer CTAs to schedule).
constexpr int64_t kSmallProblem = int64_t{1} << 20;

// Rows of a tensor whose leading dimensions flatten to one strided row index: the row stride,
// or -1 when they do not (a dimension that is neither dense over the next one of extent > 1 nor
// of extent 1; extent-1 dimensions have no stride that matters).
int64_t row_stride(const TensorView& t) {
  const int nd = t.ndim();
  int64_t stride = 0, span = 1;
  bool found = false;
  for (int i = nd - 2; i >= 0; --i) {
    if (t.shape()[i] == 1) continue;
    if (!found) {
      stride = t.stride(i);
      found = true;
    } else if (t.stride(i) != stride * span) {
      return -1;
    }
    span *= t.shape()[i];
  }
  return stride;
}

void run(const char* fn, int op, TensorView x, TensorView out) {
  b::expect_dtype(fn, "x", x, kDType);
  b::expect_dtype(fn, "out", out, kDType);
  const int nd = x.ndim();
  if (nd < 1 || x.shape()[nd - 1] % 2 != 0) {
    TVM_FFI_THROW(ValueError) << fn << ": `x` must be [..., 2 * d] (an even last dimension), got "
                              << b::shape_str(x);
  }
  const int64_t d = nd >= 1 ? x.shape()[nd - 1] / 2 : 0;
  bool same_lead = out.ndim() == nd && out.shape()[nd - 1] == d;
  for (int i = 0; same_lead && i + 1 < nd; ++i) same_lead = out.shape()[i] == x.shape()[i];
  if (!same_lead) {
    TVM_FFI_THROW(ValueError) << fn << ": `out` must be `x`'s shape with the last dimension "
                              << "halved (" << d << "), got " << b::shape_str(out);
  }
  for (auto [name, t] : {std::pair<const char*, TensorView>{"x", x}, {"out", out}}) {
    if (t.stride(t.ndim() - 1) != 1 && t.shape()[t.ndim() - 1] > 1) {
      TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `" << name
                                << "` must be contiguous (stride 1), got stride "
                                << t.stride(t.ndim() - 1);
    }
    if (row_stride(t) < 0) {
      TVM_FFI_THROW(ValueError) << fn << ": the leading dimensions of `" << name
                                << "` must flatten to rows (each dense over the next), got shape "
                                << b::shape_str(t);
    }
  }
  int64_t rows = 1;
  for (int i = 0; i + 1 < nd; ++i) rows *= x.shape()[i];
  if (d > (int64_t{1} << 24) || rows > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << fn << ": at most 2^31 - 1 rows of d <= 2^24, got " << rows
                              << " rows of d = " << d;
  }
  b::expect_device(fn, "x", x, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", out, "x", x);
  if (rows == 0 || d == 0) return;

  a::Params p{};
  p.x = b::data(x);
  p.x_row_stride = row_stride(x);
  p.out = b::data(out);
  p.out_row_stride = row_stride(out);
  p.rows = rows;
  p.d = d;
  const int64_t wide = 16 / kElemBytes;
  const bool aligned = reinterpret_cast<uintptr_t>(b::data(x)) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(b::data(out)) % 16 == 0 && d % wide == 0 &&
                       (p.x_row_stride * kElemBytes) % 16 == 0 &&
                       (p.out_row_stride * kElemBytes) % 16 == 0;
  p.vec = aligned ? static_cast<int>(wide) : 1;
  p.vecs_per_thread = rows * (d / p.vec) >= kSmallProblem ? 4 : 1;
  p.device = x.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, p.device));
  const cudaError_t err = a::run(p, op, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

void silu_and_mul(TensorView x, TensorView out) { run("ember.silu_and_mul", a::kSilu, x, out); }
void gelu_and_mul(TensorView x, TensorView out) { run("ember.gelu_and_mul", a::kGelu, x, out); }
void gelu_tanh_and_mul(TensorView x, TensorView out) {
  run("ember.gelu_tanh_and_mul", a::kGeluTanh, x, out);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(silu_and_mul, silu_and_mul);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gelu_and_mul, gelu_and_mul);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gelu_tanh_and_mul, gelu_tanh_and_mul);
