// Sampling-family binding: validate, launch on the caller's stream, export (R3.3, R3.4).
// Compiled by the C++ compiler; the kernels are in sampling.cu. The module is built for one
// logits dtype: EMBER_SAMPLING_DL_CODE / EMBER_SAMPLING_DL_BITS name it.
#include "ember/sampling.h"

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "binding.h"
#include "ember/device.h"

#ifndef EMBER_SAMPLING_DL_CODE
#error "compile with -DEMBER_SAMPLING_DL_CODE=<kDLFloat|kDLBfloat> -DEMBER_SAMPLING_DL_BITS=<16|32>"
#endif

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;
namespace b = ember::binding;
namespace s = ember::sampling;

constexpr DLDataType kDType{EMBER_SAMPLING_DL_CODE, EMBER_SAMPLING_DL_BITS, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr int64_t kElemBytes = EMBER_SAMPLING_DL_BITS / 8;
// Shared memory a CTA may hold (227 KB opt-in on sm_90), less the exchange slots.
constexpr int64_t kMaxChunk = 227 * 1024 / 4 - 64;

// The zeroed int32 workspace `softmax` takes for these rows (ember/ops/sampling.py allocates
// it; 0: none).
int64_t softmax_workspace_words(int64_t rows, int64_t vocab) {
  return rows <= 0 || vocab <= 0 ? 0 : s::softmax_workspace_words(rows, vocab);
}

void softmax(TensorView logits, TensorView probs, Optional<TensorView> temperature,
             double scalar_temperature, Optional<TensorView> workspace) {
  constexpr const char* fn = "ember.softmax";
  b::expect_dtype(fn, "logits", logits, kDType);
  b::expect_dtype(fn, "out", probs, kF32);
  b::expect_ndim(fn, "logits", logits, 2);
  b::expect_same_shape(fn, "out", probs, "logits", logits);
  for (auto [name, t] : {std::pair<const char*, TensorView>{"logits", logits}, {"out", probs}}) {
    if (t.stride(1) != 1 && t.shape()[1] > 1) {
      TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `" << name
                                << "` must be contiguous (stride 1), got stride " << t.stride(1);
    }
  }
  const int64_t rows = logits.shape()[0];
  const int64_t vocab = logits.shape()[1];
  const int64_t chunk = ((vocab + s::kSoftmaxCluster - 1) / s::kSoftmaxCluster + 7) / 8 * 8;
  if (chunk > kMaxChunk) {
    TVM_FFI_THROW(ValueError) << fn << ": the vocabulary must be at most "
                              << kMaxChunk * s::kSoftmaxCluster << " (a row lives in the shared "
                              << "memory of " << s::kSoftmaxCluster << " CTAs), got " << vocab;
  }
  if (rows * s::kSoftmaxCluster > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << fn << ": at most " << INT32_MAX / s::kSoftmaxCluster
                              << " rows, got " << rows;
  }
  if (temperature.has_value()) {
    const TensorView& t = *temperature;
    b::expect_dtype(fn, "temperature", t, kF32);
    if (t.ndim() != 1 || t.shape()[0] != rows) {
      TVM_FFI_THROW(ValueError) << fn << ": `temperature` must be a scalar or [rows=" << rows
                                << "], got " << b::shape_str(t);
    }
    b::expect_contiguous(fn, "temperature", t);
  } else if (!(static_cast<float>(scalar_temperature) >= FLT_MIN) ||
             !std::isfinite(static_cast<float>(scalar_temperature))) {
    TVM_FFI_THROW(ValueError) << fn
                              << ": `temperature` must be a finite float32 > 0 (>= " << FLT_MIN
                              << "), got " << scalar_temperature;
  }
  const int64_t ws_words = rows == 0 || vocab == 0 ? 0 : s::softmax_workspace_words(rows, vocab);
  if (workspace.has_value()) {
    const TensorView& w = *workspace;
    b::expect_dtype(fn, "workspace", w, DLDataType{kDLInt, 32, 1});
    b::expect_contiguous(fn, "workspace", w);
    if (w.ndim() != 1 || w.shape()[0] < ws_words) {
      TVM_FFI_THROW(ValueError) << fn << ": `workspace` must be int32 [>= " << ws_words
                                << "] (softmax_workspace_words), got " << b::shape_str(w);
    }
  }
  b::expect_device(fn, "logits", logits, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", probs, "logits", logits);
  if (temperature.has_value())
    b::expect_same_device(fn, "temperature", *temperature, "logits", logits);
  if (workspace.has_value()) b::expect_same_device(fn, "workspace", *workspace, "logits", logits);
  if (rows == 0 || vocab == 0) return;

  s::SoftmaxParams p{};
  p.logits = b::data(logits);
  p.logits_row_stride = logits.stride(0);
  p.probs = static_cast<float*>(b::data(probs));
  p.probs_row_stride = probs.stride(0);
  p.temperature =
      temperature.has_value() ? static_cast<const float*>(b::data(*temperature)) : nullptr;
  p.scalar_temperature = static_cast<float>(scalar_temperature);
  p.rows = rows;
  p.vocab = vocab;
  p.chunk = static_cast<int>(chunk);
  p.grid_ws =
      workspace.has_value() && ws_words > 0 ? static_cast<uint32_t*>(b::data(*workspace)) : nullptr;
  p.vec = reinterpret_cast<uintptr_t>(b::data(logits)) % 16 == 0 &&
          (logits.stride(0) * kElemBytes) % 16 == 0 && (vocab * kElemBytes) % 16 == 0;
  p.device = logits.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, p.device));
  const cudaError_t err = s::softmax(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

// --- filters: sampling, renormalisation, masking ---------------------------------------------

// A row tensor's shared checks: 2-D, last dimension contiguous, a vocabulary whose row fits one
// cluster's shared memory. (The device is checked after the other arguments.)
int64_t checked_chunk(const char* fn, const char* arg, const TensorView& x) {
  b::expect_ndim(fn, arg, x, 2);
  const int64_t rows = x.shape()[0], vocab = x.shape()[1];
  if (x.stride(1) != 1 && vocab > 1) {
    TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `" << arg
                              << "` must be contiguous (stride 1), got stride " << x.stride(1);
  }
  const int64_t chunk = ((vocab + s::kSoftmaxCluster - 1) / s::kSoftmaxCluster + 7) / 8 * 8;
  if (vocab < 1 || chunk > kMaxChunk) {
    TVM_FFI_THROW(ValueError) << fn << ": the vocabulary must be 1 to "
                              << kMaxChunk * s::kSoftmaxCluster << ", got " << vocab;
  }
  if (rows * s::kSoftmaxCluster > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << fn << ": at most " << INT32_MAX / s::kSoftmaxCluster
                              << " rows, got " << rows;
  }
  return chunk;
}

// A per-row parameter: `[rows]` of `dtype`, contiguous, on the input's device; null if absent.
template <typename P>
const P* row_param(const char* fn, const char* arg, const Optional<TensorView>& t, DLDataType dtype,
                   int64_t rows, const char* in_arg, const TensorView& in) {
  if (!t.has_value()) return nullptr;
  const TensorView& v = *t;
  b::expect_dtype(fn, arg, v, dtype);
  if (v.ndim() != 1 || v.shape()[0] != rows) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must be a scalar or [rows=" << rows
                              << "], got " << b::shape_str(v);
  }
  b::expect_contiguous(fn, arg, v);
  b::expect_same_device(fn, arg, v, in_arg, in);
  return static_cast<const P*>(b::data(v));
}

s::FilterParams filter_params(const TensorView& in, int64_t chunk, int64_t elem_bytes) {
  s::FilterParams p{};
  p.in = b::data(in);
  p.in_row_stride = in.stride(0);
  p.rows = in.shape()[0];
  p.vocab = in.shape()[1];
  p.chunk = static_cast<int>(chunk);
  p.vec = reinterpret_cast<uintptr_t>(p.in) % 16 == 0 && (in.stride(0) * elem_bytes) % 16 == 0 &&
          (p.vocab * elem_bytes) % 16 == 0;
  p.device = in.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  p.scalar_temperature = 1.f;
  p.scalar_top_p = 1.f;
  return p;
}

void run_filter(const char* fn, const s::FilterParams& p, s::FilterMode mode) {
  if (p.rows == 0) return;
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, p.device));
  const cudaError_t err = s::filter(p, mode, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

// One token per row from fp32 probabilities (from_logits = false; the fp32 module only) or from
// logits of the module's dtype over a temperature, under optional top-k / top-p / min-p filters.
// The Python layer checks the scalars; tensor parameters are read on the device.
void sample(TensorView in, TensorView samples, bool from_logits, Optional<TensorView> temperature,
            double scalar_temperature, Optional<TensorView> top_k, int64_t scalar_top_k,
            Optional<TensorView> top_p, double scalar_top_p, Optional<TensorView> min_p,
            double scalar_min_p, int64_t seed, int64_t offset, std::string fn_name) {
  const char* fn = fn_name.c_str();
  const char* arg = from_logits ? "logits" : "probs";
  b::expect_dtype(fn, arg, in, from_logits ? kDType : kF32);
  const int64_t chunk = checked_chunk(fn, arg, in);
  const int64_t rows = in.shape()[0];
  b::expect_dtype(fn, "out", samples, DLDataType{kDLInt, 32, 1});
  if (samples.ndim() != 1 || samples.shape()[0] != rows) {
    TVM_FFI_THROW(ValueError) << fn << ": `out` must be [rows=" << rows << "], got "
                              << b::shape_str(samples);
  }
  b::expect_contiguous(fn, "out", samples);
  const float* t = row_param<float>(fn, "temperature", temperature, kF32, rows, arg, in);
  const int32_t* k =
      row_param<int32_t>(fn, "top_k", top_k, DLDataType{kDLInt, 32, 1}, rows, arg, in);
  const float* tp = row_param<float>(fn, "top_p", top_p, kF32, rows, arg, in);
  const float* mp = row_param<float>(fn, "min_p", min_p, kF32, rows, arg, in);
  b::expect_device(fn, arg, in, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", samples, arg, in);
  s::FilterParams p = filter_params(in, chunk, from_logits ? kElemBytes : 4);
  p.samples = static_cast<int32_t*>(b::data(samples));
  p.temperature = t;
  p.scalar_temperature = static_cast<float>(scalar_temperature);
  p.top_k = k;
  p.scalar_top_k = static_cast<int32_t>(scalar_top_k);
  p.top_p = tp;
  p.scalar_top_p = static_cast<float>(scalar_top_p);
  p.min_p = mp;
  p.scalar_min_p = static_cast<float>(scalar_min_p);
  p.seed = static_cast<uint64_t>(seed);
  p.offset = static_cast<uint64_t>(offset);
  run_filter(fn, p, from_logits ? s::kSampleLogits : s::kSampleProbs);
}

// The kept probabilities renormalised (fp32 module only), or the kept logits with the rest -inf.
void filter_rows(TensorView in, TensorView out, bool renorm, Optional<TensorView> top_k,
                 int64_t scalar_top_k, Optional<TensorView> top_p, double scalar_top_p,
                 std::string fn_name) {
  const char* fn = fn_name.c_str();
  const char* arg = renorm ? "probs" : "logits";
  b::expect_dtype(fn, arg, in, renorm ? kF32 : kDType);
  const int64_t chunk = checked_chunk(fn, arg, in);
  const int64_t rows = in.shape()[0];
  b::expect_dtype(fn, "out", out, renorm ? kF32 : kDType);
  b::expect_same_shape(fn, "out", out, arg, in);
  if (out.stride(1) != 1 && out.shape()[1] > 1) {
    TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `out` must be contiguous "
                              << "(stride 1), got stride " << out.stride(1);
  }
  const int32_t* k =
      row_param<int32_t>(fn, "top_k", top_k, DLDataType{kDLInt, 32, 1}, rows, arg, in);
  const float* tp = row_param<float>(fn, "top_p", top_p, kF32, rows, arg, in);
  b::expect_device(fn, arg, in, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", out, arg, in);
  s::FilterParams p = filter_params(in, chunk, renorm ? 4 : kElemBytes);
  p.out = b::data(out);
  p.out_row_stride = out.stride(0);
  p.top_k = k;
  p.scalar_top_k = static_cast<int32_t>(scalar_top_k);
  p.top_p = tp;
  p.scalar_top_p = static_cast<float>(scalar_top_p);
  run_filter(fn, p, renorm ? s::kRenormProbs : s::kMaskLogits);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(softmax, softmax);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(softmax_workspace_words, softmax_workspace_words);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(sample, sample);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_rows, filter_rows);
