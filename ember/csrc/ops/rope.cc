// RoPE binding: validate q, k, their outputs, positions and the cos/sin cache, launch on the
// caller's stream, export (R3.3, R3.4). Compiled by the C++ compiler; the kernels are in rope.cu.
// The module is built for one dtype: EMBER_ROPE_DL_CODE / EMBER_ROPE_DL_BITS name it.
#include "ember/rope.h"

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "binding.h"
#include "ember/device.h"

#ifndef EMBER_ROPE_DL_CODE
#error "compile with -DEMBER_ROPE_DL_CODE=<kDLFloat|kDLBfloat> -DEMBER_ROPE_DL_BITS=<16|32>"
#endif

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;
namespace b = ember::binding;
namespace r = ember::rope;

constexpr DLDataType kDType{EMBER_ROPE_DL_CODE, EMBER_ROPE_DL_BITS, 1};
constexpr int64_t kElemBytes = EMBER_ROPE_DL_BITS / 8;
constexpr const char* kFn = "ember.apply_rope";

void expect_heads(const char* arg, const TensorView& t, int64_t tokens, int64_t head_dim) {
  b::expect_dtype(kFn, arg, t, kDType);
  if (t.ndim() != 3 || (tokens >= 0 && t.shape()[0] != tokens) ||
      (head_dim >= 0 && t.shape()[2] != head_dim)) {
    TVM_FFI_THROW(ValueError) << kFn << ": `" << arg << "` must be [tokens"
                              << (tokens >= 0 ? "=" + std::to_string(tokens) : "")
                              << ", heads, head_dim"
                              << (head_dim >= 0 ? "=" + std::to_string(head_dim) : "") << "], got "
                              << b::shape_str(t);
  }
  if (t.stride(2) != 1) {
    TVM_FFI_THROW(ValueError) << kFn << ": the last dimension of `" << arg
                              << "` must be contiguous (stride 1), got stride " << t.stride(2);
  }
}

r::Heads heads_of(const TensorView& in, const TensorView& out) {
  return {b::data(in),
          b::data(out),
          in.stride(0),
          in.stride(1),
          out.stride(0),
          out.stride(1),
          static_cast<int>(in.shape()[1])};
}

bool aligned16(const TensorView& t) {
  return reinterpret_cast<uintptr_t>(b::data(t)) % 16 == 0 &&
         (t.stride(0) * kElemBytes) % 16 == 0 && (t.stride(1) * kElemBytes) % 16 == 0;
}

void apply(TensorView q, TensorView k, TensorView out_q, TensorView out_k, TensorView positions,
           Optional<TensorView> cos_sin, int64_t rotary_dim, bool interleave, double theta,
           double scale, double llama31_factor, double llama31_low, double llama31_high,
           double llama31_old_context) {
  expect_heads("q", q, -1, -1);
  const int64_t tokens = q.shape()[0];
  const int64_t head_dim = q.shape()[2];
  expect_heads("k", k, tokens, head_dim);
  b::expect_same_shape(kFn, "out_q", out_q, "q", q);
  b::expect_same_shape(kFn, "out_k", out_k, "k", k);
  expect_heads("out_q", out_q, tokens, head_dim);
  expect_heads("out_k", out_k, tokens, head_dim);
  const DLDataType pd = positions.dtype();
  if (pd.code != kDLInt || (pd.bits != 32 && pd.bits != 64) || pd.lanes != 1) {
    TVM_FFI_THROW(TypeError) << kFn << ": `positions` must be int32 or int64, got "
                             << b::dtype_str(pd);
  }
  if (positions.ndim() != 1 || positions.shape()[0] != tokens) {
    TVM_FFI_THROW(ValueError) << kFn << ": `positions` must be [tokens=" << tokens << "], got "
                              << b::shape_str(positions);
  }
  b::expect_contiguous(kFn, "positions", positions);
  if (head_dim > 512 || rotary_dim < 2 || rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    TVM_FFI_THROW(ValueError) << kFn << ": `rotary_dim` must be even, >= 2 and <= head_dim ("
                              << head_dim << ", at most 512), got " << rotary_dim;
  }
  if (cos_sin.has_value()) {
    const TensorView& cs = *cos_sin;
    b::expect_dtype(kFn, "cos_sin_cache", cs, DLDataType{kDLFloat, 32, 1});
    if (cs.ndim() != 2 || cs.shape()[1] != rotary_dim) {
      TVM_FFI_THROW(ValueError) << kFn << ": `cos_sin_cache` must be [max_position, rotary_dim="
                                << rotary_dim << "] (cos then sin), got " << b::shape_str(cs);
    }
    b::expect_contiguous(kFn, "cos_sin_cache", cs);
  } else {
    if (!(theta > 0) || !std::isfinite(theta) || !(scale > 0) || !std::isfinite(scale)) {
      TVM_FFI_THROW(ValueError) << kFn << ": `rope_theta` and `rope_scale` must be finite and > 0, "
                                << "got " << theta << ", " << scale;
    }
    if (llama31_factor != 0 && !(llama31_factor > 0 && llama31_low > 0 &&
                                 llama31_high > llama31_low && llama31_old_context > 0)) {
      TVM_FFI_THROW(ValueError) << kFn << ": `llama31_scaling` needs factor > 0, 0 < "
                                << "low_freq_factor < high_freq_factor and "
                                << "original_max_position_embeddings > 0, got " << llama31_factor
                                << ", " << llama31_low << ", " << llama31_high << ", "
                                << llama31_old_context;
    }
  }
  if (tokens > INT32_MAX || (q.shape()[1] + k.shape()[1]) * head_dim > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << kFn << ": at most 2^31 - 1 tokens and (qo_heads + kv_heads) x "
                              << "head_dim < 2^31, got " << tokens << " tokens of "
                              << q.shape()[1] + k.shape()[1] << " heads";
  }
  b::expect_device(kFn, "q", q, kDLCUDA, "a CUDA device");
  for (auto [name, t] : {std::pair<const char*, TensorView>{"k", k},
                         {"out_q", out_q},
                         {"out_k", out_k},
                         {"positions", positions}}) {
    b::expect_same_device(kFn, name, t, "q", q);
  }
  if (cos_sin.has_value()) b::expect_same_device(kFn, "cos_sin_cache", *cos_sin, "q", q);
  if (tokens == 0) return;

  r::Params p{};
  p.q = heads_of(q, out_q);
  p.k = heads_of(k, out_k);
  p.positions = b::data(positions);
  p.positions_i64 = pd.bits == 64;
  p.has_cache = cos_sin.has_value();
  p.cos_sin = cos_sin.has_value() ? static_cast<const float*>(b::data(*cos_sin)) : nullptr;
  p.cos_sin_rows = cos_sin.has_value() ? (*cos_sin).shape()[0] : 0;
  p.tokens = tokens;
  p.head_dim = static_cast<int>(head_dim);
  p.rotary_dim = static_cast<int>(rotary_dim);
  p.interleave = interleave;
  p.theta = static_cast<float>(theta);
  p.inv_scale = static_cast<float>(1.0 / scale);
  p.llama31_factor = static_cast<float>(llama31_factor);
  p.llama31_low = static_cast<float>(llama31_low);
  p.llama31_high = static_cast<float>(llama31_high);
  p.llama31_old_context = static_cast<float>(llama31_old_context);
  const int64_t e = 16 / kElemBytes;  // elements per 16 bytes
  const bool chunks_fit = interleave ? rotary_dim % e == 0 : (rotary_dim / 2) % e == 0;
  p.vec = chunks_fit && aligned16(q) && aligned16(k) && aligned16(out_q) && aligned16(out_k)
              ? static_cast<int>(e)
              : 1;
  p.device = q.device().device_id;
  p.pdl = ember::supports_pdl(p.device);
  ember::DeviceScope scope(p.device);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, p.device));
  const cudaError_t err = r::run(p, stream);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << kFn << ": kernel launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(apply, apply);
