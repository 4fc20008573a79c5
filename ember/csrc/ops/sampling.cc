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

void softmax(TensorView logits, TensorView probs, Optional<TensorView> temperature,
             double scalar_temperature) {
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
  b::expect_device(fn, "logits", logits, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", probs, "logits", logits);
  if (temperature.has_value())
    b::expect_same_device(fn, "temperature", *temperature, "logits", logits);
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

// One token per row from fp32 probabilities (compiled into every dtype's module; probabilities
// are fp32 whatever the logits were).
void sampling_from_probs(TensorView probs, TensorView samples, int64_t seed, int64_t offset) {
  constexpr const char* fn = "ember.sampling_from_probs";
  b::expect_dtype(fn, "probs", probs, kF32);
  b::expect_ndim(fn, "probs", probs, 2);
  b::expect_dtype(fn, "out", samples, DLDataType{kDLInt, 32, 1});
  const int64_t rows = probs.shape()[0];
  const int64_t vocab = probs.shape()[1];
  if (samples.ndim() != 1 || samples.shape()[0] != rows) {
    TVM_FFI_THROW(ValueError) << fn << ": `out` must be [rows=" << rows << "], got "
                              << b::shape_str(samples);
  }
  b::expect_contiguous(fn, "out", samples);
  if (probs.stride(1) != 1 && vocab > 1) {
    TVM_FFI_THROW(ValueError) << fn << ": the last dimension of `probs` must be contiguous "
                              << "(stride 1), got stride " << probs.stride(1);
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
  b::expect_device(fn, "probs", probs, kDLCUDA, "a CUDA device");
  b::expect_same_device(fn, "out", samples, "probs", probs);
  if (rows == 0) return;
  s::SampleParams p{};
  p.probs = static_cast<const float*>(b::data(probs));
  p.probs_row_stride = probs.stride(0);
  p.samples = static_cast<int32_t*>(b::data(samples));
  p.rows = rows;
  p.vocab = vocab;
  p.chunk = static_cast<int>(chunk);
  p.vec = reinterpret_cast<uintptr_t>(b::data(probs)) % 16 == 0 &&
          (probs.stride(0) * 4) % 16 == 0 && (vocab * 4) % 16 == 0;
  p.seed = static_cast<uint64_t>(seed);
  p.offset = static_cast<uint64_t>(offset);
  p.device = probs.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, p.device));
  const cudaError_t err = s::sample(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << fn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(softmax, softmax);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(sampling_from_probs, sampling_from_probs);
