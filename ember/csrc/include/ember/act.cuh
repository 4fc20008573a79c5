// Gated activations: out[r, i] = act(x[r, i]) * x[r, d + i], computed in fp32. Framework-free
// (R3.1, R3.2).
//
// A memory-bound elementwise kernel. Small problems (and unaligned rows): a grid of (rows,
// column blocks); each thread moves `vecs_per_thread` accesses of `VEC` elements (16 bytes when
// the rows and both halves are 16-byte aligned, else one element) of the gate and the up half,
// and writes one of the output. Large aligned problems (>= 2^20 accesses): one flat range of
// accesses, one a thread, every block full (act_flat_kernel: 193.7 -> 160.8 us at 8192 x 14336
// on the H200, where more accesses a thread measured slower).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/act.h"
#include "ember/dtype.cuh"
#include "ember/launch.cuh"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace act {

constexpr int kThreads = 256;

#ifndef EMBER_ACT_MUFU
#define EMBER_ACT_MUFU 1  // NOTE: 0 = __expf / __fdividef (with their range fix-ups), for A/B
#endif

// x * sigmoid(z). For z far below 0, 1 + e^-z overflows to inf (or past 2^126) and its reciprocal
// flushes to 0: the product is 0 with x's sign, the right limit.
__device__ __forceinline__ float times_sigmoid(float x, float z) {
#if EMBER_ACT_MUFU
  return x * rcp_approx(1.f + exp2_approx(-1.4426950408889634f * z));
#else
  return __fdividef(x, 1.f + __expf(-z));
#endif
}

template <int OP>
__device__ __forceinline__ float activate(float x) {
  // NOTE: fast exponential and reciprocal: an IEEE division or tanhf made silu and gelu_tanh
  // compute-bound (3.2 TB/s on the H200 against erf-GELU's 4.1 TB/s).
  if constexpr (OP == kSilu) {
    return times_sigmoid(x, x);
  } else if constexpr (OP == kGelu) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  } else {
    // 0.5 x (1 + tanh u) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
    return times_sigmoid(x, 1.5957691216057308f * (x + 0.044715f * x * x * x));
  }
}

#ifndef EMBER_ACT_FLAT
#define EMBER_ACT_FLAT 1  // NOTE: 0 = large problems on the 2-D grid too (A/B)
#endif

// act(gate) * up for one access of each half, in fp32.
template <int OP, typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> gated(const Vec<T, VEC>& g, const Vec<T, VEC>& u) {
  Vec<T, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j)
    o.v[j] = from_float<T>(activate<OP>(to_float(g.v[j])) * to_float(u.v[j]));
  return o;
}

// NOTE: every load of a thread is issued before its first store (the x and out pointers could
// alias as far as the compiler knows, so a load-compute-store loop would serialize them).
template <typename T, int OP, int VEC, int VPT>
__global__ void __launch_bounds__(kThreads) act_kernel(Params p) {
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
  T* out = static_cast<T*>(p.out) + row * p.out_row_stride;
  const int64_t nvec = p.d / VEC;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kThreads * VPT + threadIdx.x;
  using P = Vec<T, VEC>;
  P g[VPT], u[VPT];
  pdl_wait();
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t i = first + k * kThreads;
    if (i < nvec) {
      g[k] = reinterpret_cast<const P*>(x)[i];
      u[k] = reinterpret_cast<const P*>(x + p.d)[i];
    }
  }
  pdl_launch_dependents();
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t i = first + k * kThreads;
    if (i < nvec) reinterpret_cast<P*>(out)[i] = gated<OP>(g[k], u[k]);
  }
}

// The large-problem form: the (row, 16-byte column) accesses of the whole problem numbered in
// one flat range (fewer than 2^31), one a thread, so every block is full and consecutive blocks
// stream consecutive memory (no partial column block per row). Measured on the H200 at 8192 x
// 14336 bf16 (docs/perf/notes/act.md): 160.8 us against the 2-D grid's 193.7; two or four
// accesses a thread 172.8 / 204.2, evict-first hints 173-196, 128 or 512 threads no different.
template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) act_flat_kernel(Params p) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Vec<T, kVec>;
  const uint32_t nvec = static_cast<uint32_t>(p.d / kVec);
  const uint32_t i = blockIdx.x * kThreads + threadIdx.x;
  pdl_wait();
  if (i >= static_cast<uint32_t>(p.rows) * nvec) return;
  const uint32_t row = i / nvec, col = i - row * nvec;
  const P* src =
      reinterpret_cast<const P*>(static_cast<const T*>(p.x) + row * p.x_row_stride) + col;
  const P g = src[0], u = src[nvec];
  pdl_launch_dependents();
  reinterpret_cast<P*>(static_cast<T*>(p.out) + row * p.out_row_stride)[col] = gated<OP>(g, u);
}

template <typename T, int OP, int VEC>
cudaError_t launch_vec(const Params& p, const dim3& grid, cudaStream_t stream) {
  if (p.vecs_per_thread == 4) {
    return launch_kernel<act_kernel<T, OP, VEC, 4>>(grid, dim3(kThreads), 0, stream, p.pdl,
                                                    p.device, p);
  }
  return launch_kernel<act_kernel<T, OP, VEC, 1>>(grid, dim3(kThreads), 0, stream, p.pdl, p.device,
                                                  p);
}

template <typename T, int OP>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  if (p.rows == 0 || p.d == 0) return cudaSuccess;
  const int64_t nvec = p.d / p.vec;
  const int64_t per_block = static_cast<int64_t>(kThreads) * p.vecs_per_thread;
  // NOTE: rows on x (up to 2^31 - 1), column blocks on y (a row of d <= 2^24 elements)
  const dim3 grid(static_cast<unsigned>(p.rows),
                  static_cast<unsigned>((nvec + per_block - 1) / per_block));
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (EMBER_ACT_FLAT && p.vec == kVec && p.vecs_per_thread == 4 &&
      p.rows * nvec < (int64_t{1} << 31)) {
    const int64_t blocks = (p.rows * nvec + kThreads - 1) / kThreads;
    return launch_kernel<act_flat_kernel<T, OP>>(dim3(static_cast<unsigned>(blocks)),
                                                 dim3(kThreads), 0, stream, p.pdl, p.device, p);
  }
  if (p.vec == kVec) return launch_vec<T, OP, kVec>(p, grid, stream);
  return launch_vec<T, OP, 1>(p, grid, stream);
}

}  // namespace act
}  // namespace ember

#pragma nv_diagnostic pop
