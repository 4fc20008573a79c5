// 16-bit float storage types and their fp32 conversions, without cuda_fp16.h / cuda_bf16.h; and
// the one-instruction 2^x and 1/x the elementwise kernels use.
//
// NOTE: those two headers cost about 1.7 s of every nvcc run (measured on the dev machine); the
// kernels only need storage plus round-to-nearest conversions, which are single PTX instructions
// (cvt.rn.bf16.f32 and cvt.rn.f16.f32 need sm_80+; PTX ISA, "cvt"). Arithmetic is done in fp32.
#pragma once

#include <cstdint>

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {

struct alignas(2) bfloat16 {
  uint16_t bits;
};
struct alignas(2) half {
  uint16_t bits;
};
// fp8 e4m3 (OCP "E4M3FN"), storage only; converted to fp32 on load (KV caches). sm_89+.
struct alignas(1) fp8e4m3 {
  uint8_t bits;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bfloat16 v) {
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
}
__device__ __forceinline__ float to_float(half v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}

__device__ __forceinline__ float to_float(fp8e4m3 v) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<uint16_t>(v.bits)));
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<uint16_t>(h2 & 0xffffu)));
  return f;
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bfloat16 from_float<bfloat16>(float v) {
  bfloat16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));
  return r;
}
template <>
__device__ __forceinline__ half from_float<half>(float v) {
  half r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));
  return r;
}

// N elements of T moved as one naturally aligned access (N * sizeof(T) of 2-16 bytes): the
// vector loads and stores of every family.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// One MUFU instruction each: 2^x (ex2.approx.ftz, ~2 ulp) and 1/x (rcp.approx.ftz, 1 ulp). The
// non-ftz forms behind __expf and __fdividef add a denormal fix-up and a range check per
// element; at ~25 instructions an element silu was issue-bound beside the memory stream.
// exp2_approx(-inf) is +0 and NaN stays NaN.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ember

#pragma nv_diagnostic pop
