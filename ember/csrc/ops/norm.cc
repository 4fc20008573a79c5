// RMSNorm binding: validate every tensor, plan, launch on the caller's stream, export (R3.3, R3.4).
// Compiled by the C++ compiler (not nvcc); the kernels live in norm_rmsnorm.cu / norm_fused.cu.
// The module is built for one dtype: EMBER_NORM_DL_CODE / EMBER_NORM_DL_BITS name it.
#include "ember/norm.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "binding.h"
#include "ember/device.h"

// NOTE: a measurement switch for tools/norm_probe.py (host-cost breakdown); normal builds leave it
// undefined. 0: return on entry; 1: after validation (and allocation); 2: after the device guard
// and stream query, before the launch; 3: full call without the device guard.
#ifndef EMBER_NORM_PROBE
#define EMBER_NORM_PROBE 99
#endif

#ifndef EMBER_NORM_DL_CODE
#error "compile with -DEMBER_NORM_DL_CODE=<kDLFloat|kDLBfloat> -DEMBER_NORM_DL_BITS=<16|32>"
#endif

namespace {

using tvm::ffi::Tensor;
using tvm::ffi::TensorView;
namespace b = ember::binding;
namespace n = ember::norm;

constexpr DLDataType kDType{EMBER_NORM_DL_CODE, EMBER_NORM_DL_BITS, 1};
constexpr int kElemBytes = EMBER_NORM_DL_BITS / 8;
constexpr int kWide = 16 / kElemBytes;

int64_t stride_of(const TensorView& t, int i) { return t.stride(i); }

// The row layout of a 2-D [rows, hidden] or 3-D [outer, inner, hidden] tensor.
n::RowLayout layout_of(const TensorView& t) {
  if (t.ndim() == 2) return {stride_of(t, 0), 0};
  return {stride_of(t, 0), stride_of(t, 1)};
}

void expect_rows(const char* fn, const char* arg, const TensorView& t) {
  if (t.ndim() != 2 && t.ndim() != 3) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg
                              << "` must be 2-D [tokens, hidden] or 3-D [tokens, heads, head_dim], "
                              << "got shape " << b::shape_str(t);
  }
  const int last = t.ndim() - 1;
  if (t.shape()[last] > 1 && stride_of(t, last) != 1) {
    TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `" << arg
                              << "` must be contiguous (stride 1), got stride "
                              << stride_of(t, last);
  }
}

bool aligned16(const TensorView& t) {
  const auto addr = reinterpret_cast<uintptr_t>(b::data(t));
  return addr % 16 == 0;
}

bool rows_vectorizable(const TensorView& t) {
  if (!aligned16(t)) return false;
  for (int i = 0; i + 1 < t.ndim(); ++i) {
    if (t.shape()[i] > 1 && stride_of(t, i) % kWide != 0) return false;
  }
  return true;
}

#ifndef EMBER_NORM_PDL
#define EMBER_NORM_PDL 1  // NOTE: a switch for the variant sweep (tools/norm_probe.py)
#endif

// Checks shared by both ops; returns the problem and plan, or throws before anything is written.
n::LaunchPlan validate(const char* fn, const TensorView& x, const TensorView& weight,
                       const TensorView& other, const char* other_name, double eps, n::Problem* p) {
  expect_rows(fn, "x", x);
  expect_rows(fn, other_name, other);
  b::expect_dtype(fn, "x", x, kDType);
  b::expect_dtype(fn, "weight", weight, kDType);
  b::expect_dtype(fn, other_name, other, kDType);
  b::expect_same_shape(fn, other_name, other, "x", x);
  const int64_t hidden = x.shape()[x.ndim() - 1];
  if (weight.ndim() != 1 || weight.shape()[0] != hidden) {
    TVM_FFI_THROW(ValueError) << fn << ": `weight` must have shape [" << hidden
                              << "] (the last dimension of `x`), got " << b::shape_str(weight);
  }
  b::expect_contiguous(fn, "weight", weight);
  if (!(eps >= 0.0)) TVM_FFI_THROW(ValueError) << fn << ": `eps` must be >= 0, got " << eps;
  const bool wide =
      hidden % kWide == 0 && rows_vectorizable(x) && rows_vectorizable(other) && aligned16(weight);
  const int64_t rows = hidden > 0 ? x.numel() / hidden : 0;
  n::LaunchPlan lp{};
  if (!n::plan(hidden, rows, wide ? kWide : 1, kElemBytes, &lp)) {
    TVM_FFI_THROW(ValueError) << fn << ": hidden size " << hidden << " is not supported: at most "
                              << n::kMaxVectorsPerThread * n::kMaxThreadsPerRow * kWide
                              << " when rows are 16-byte aligned and a multiple of " << kWide
                              << " elements, else at most "
                              << n::kMaxVectorsPerThread * n::kMaxThreadsPerRow;
  }
  // NOTE: devices last, so every other check can be exercised with CPU tensors in CI.
  b::expect_device(fn, "x", x, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "weight", weight, "x", x);
  b::expect_same_device(fn, other_name, other, "x", x);
  const int64_t inner = x.ndim() == 3 ? x.shape()[1] : 1;
  *p = n::Problem{rows, inner > 0 ? inner : 1, hidden, static_cast<float>(eps),
                  hidden > 0 ? static_cast<float>(1.0 / static_cast<double>(hidden)) : 0.f};
  lp.pdl = EMBER_NORM_PDL && ember::supports_pdl(x.device().device_id);
  lp.device = x.device().device_id;
  return lp;
}

cudaStream_t stream_of(const TensorView& x) {
  return static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
}

void check_launch(const char* fn, cudaError_t err) {
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

void launch_rmsnorm(const TensorView& x, const TensorView& weight, const TensorView& out,
                    const n::Problem& p, const n::LaunchPlan& lp) {
  if constexpr (EMBER_NORM_PROBE == 3) {
    check_launch("ember.rmsnorm", n::rmsnorm(b::data(x), layout_of(x), b::data(weight),
                                             b::data(out), layout_of(out), p, lp, stream_of(x)));
    return;
  }
  ember::DeviceScope scope(x.device().device_id);
  cudaStream_t stream = stream_of(x);
  if constexpr (EMBER_NORM_PROBE == 2) {
    if (stream == reinterpret_cast<cudaStream_t>(1)) TVM_FFI_THROW(RuntimeError) << "unreachable";
    return;
  }
  check_launch("ember.rmsnorm", n::rmsnorm(b::data(x), layout_of(x), b::data(weight), b::data(out),
                                           layout_of(out), p, lp, stream));
}

void rmsnorm(TensorView x, TensorView weight, TensorView out, double eps) {
  if constexpr (EMBER_NORM_PROBE == 0) return;
  n::Problem p{};
  const n::LaunchPlan lp = validate("ember.rmsnorm", x, weight, out, "out", eps, &p);
  if constexpr (EMBER_NORM_PROBE == 1) return;
  launch_rmsnorm(x, weight, out, p, lp);
}

// Allocates the output through the caller's framework (torch's caching allocator when called with
// torch tensors): cheaper than torch.empty_like from Python on the eager path. The output is
// compact, so the plan chosen for `x` holds for it.
Tensor rmsnorm_alloc(TensorView x, TensorView weight, double eps) {
  n::Problem p{};
  const n::LaunchPlan lp = validate("ember.rmsnorm", x, weight, x, "x", eps, &p);
  Tensor out = Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, x.shape(), x.dtype(), x.device());
  if constexpr (EMBER_NORM_PROBE <= 1) return out;
  launch_rmsnorm(x, weight, out, p, lp);
  return out;
}

void fused_add_rmsnorm(TensorView x, TensorView residual, TensorView weight, double eps) {
  constexpr const char* fn = "ember.fused_add_rmsnorm_";
  n::Problem p{};
  const n::LaunchPlan lp = validate(fn, x, weight, residual, "residual", eps, &p);
  ember::DeviceScope scope(x.device().device_id);
  check_launch(fn, n::fused_add_rmsnorm(b::data(x), layout_of(x), b::data(residual),
                                        layout_of(residual), b::data(weight), p, lp, stream_of(x)));
}

// The plan chosen for `rows` rows of a hidden size, for tests and the bench harness: (vec, vectors
// per thread, threads per row, rows per block, early weight), or an empty result when unsupported.
tvm::ffi::Array<int64_t> plan_for(int64_t hidden, int64_t rows, bool aligned) {
  n::LaunchPlan lp{};
  const bool wide = aligned && hidden % kWide == 0;
  if (!n::plan(hidden, rows, wide ? kWide : 1, kElemBytes, &lp)) return {};
  return {lp.vec, lp.vectors_per_thread, lp.threads_per_row, lp.rows_per_block,
          lp.early_weight ? 1 : 0};
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_alloc, rmsnorm_alloc);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(fused_add_rmsnorm, fused_add_rmsnorm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_for, plan_for);
