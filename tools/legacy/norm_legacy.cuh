// RMSNorm and fused add + RMSNorm kernels. Framework-free (R3.1, R3.2).
//
// One pass over memory: each row is loaded once into registers (vectors_per_thread 16-byte
// vectors per thread), reduced, scaled and stored. Threads cooperating on a row are a sub-warp
// group (short rows, several rows per block, shuffle-only reduction) or a whole block (long rows,
// one row per block, shuffle + shared-memory reduction). Arithmetic is fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/dtype.cuh"
#include "ember/norm.h"

namespace ember {
namespace norm {

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

__device__ __forceinline__ uint32_t bits32(float a) { return __float_as_uint(a); }
__device__ __forceinline__ uint32_t bits16(bfloat16 a) { return a.bits; }
__device__ __forceinline__ uint32_t bits16(half a) { return a.bits; }

// The 4 32-bit words of a 16-byte vector, built with integer ops.
template <typename T, int VEC>
__device__ __forceinline__ uint4 pack16(const Vec<T, VEC>& v) {
  if constexpr (sizeof(T) == 4) {
    return make_uint4(bits32(v.v[0]), bits32(v.v[1]), bits32(v.v[2]), bits32(v.v[3]));
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = bits16(v.v[2 * i]) | (bits16(v.v[2 * i + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  Vec<T, VEC> v;
  if constexpr (sizeof(Vec<T, VEC>) == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    memcpy(&v, &u, 16);
  } else {
    v = *reinterpret_cast<const Vec<T, VEC>*>(p);
  }
  return v;
}

// kExplicit: one st.global.v4 whatever the compiler thinks of the 16-bit lanes. nvcc otherwise
// emits four 32-bit stores (seen in the SASS); forcing the 128-bit store made plain rmsnorm 2-7 %
// faster but the fused kernel, whose residual stores sit between loads, 25 % slower (volatile asm
// pins their order), so only the final output store of plain rmsnorm uses it.
template <typename T, int VEC, bool kExplicit = false>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& v) {
  if constexpr (sizeof(Vec<T, VEC>) == 16) {
    const uint4 u = pack16<T, VEC>(v);
    if constexpr (kExplicit) {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y),
                   "r"(u.z), "r"(u.w));
    } else {
      *reinterpret_cast<uint4*>(p) = u;
    }
  } else {
    *reinterpret_cast<Vec<T, VEC>*>(p) = v;
  }
}

// Sum over the `tpr` threads of a row. tpr <= 32: a power of two, xor shuffles inside the group.
// tpr > 32: the whole block is one row; warps combine through shared memory.
__device__ __forceinline__ float row_sum(float v, int tpr) {
  const int width = tpr < 32 ? tpr : 32;
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  if (tpr <= 32) return v;
  __shared__ float partial[32];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.f;
  const int warps = tpr / 32;
  for (int i = 0; i < warps; ++i) total += partial[i];
  return total;
}

template <typename T>
struct Rows {
  T* base;
  RowLayout layout;
  __device__ __forceinline__ T* row(int64_t r, int64_t inner) const {
    if (inner == 1) return base + r * layout.stride_outer;  // NOTE: skips a 64-bit division.
    const int64_t o = r / inner;
    return base + o * layout.stride_outer + (r - o * inner) * layout.stride_inner;
  }
};

// FUSED: residual = x + residual (rounded to T); out (= x) = rmsnorm(residual) * weight.
// Rows stay in registers as loaded (16 bytes = 4 registers per vector whatever the dtype), so
// 16 vectors per thread fit without spills at 512 threads.
template <typename T, int VEC, int NV, bool FUSED, bool EARLY_WEIGHT>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    rmsnorm_kernel(Rows<const T> x, Rows<T> residual, const T* __restrict__ weight, Rows<T> out,
                   Problem p, int tpr, int rows_per_block) {
  const int lane = threadIdx.x % tpr;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / tpr;
  const bool active = r < p.rows;
  const int64_t nvec = p.hidden / VEC;
  const T* xr = active ? x.row(r, p.inner) : nullptr;
  T* rr = (FUSED && active) ? residual.row(r, p.inner) : nullptr;

  // NOTE: every load of the row is issued before any arithmetic or store, so each thread has all
  // its vectors in flight at once; loads interleaved with the residual stores could not be hoisted
  // past them (the compiler cannot rule out aliasing) and serialised on memory latency: 2.7 ->
  // 3.6 TB/s on 8192x8192 bf16. Weights are loaded after the reduction, except in decode-sized
  // plans (EARLY_WEIGHT), where their latency would add to a call that is all latency.
  constexpr bool kResidualEarly = FUSED && NV <= 8;  // NOTE: 16 x 2 vectors would spill.
  Vec<T, VEC> vals[NV];
  Vec<T, VEC> res[kResidualEarly ? NV : 1];
  Vec<T, VEC> wvals[EARLY_WEIGHT ? NV : 1];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t idx = lane + static_cast<int64_t>(k) * tpr;
    if (active && idx < nvec) {
      vals[k] = load_vec<T, VEC>(xr + idx * VEC);
      if constexpr (kResidualEarly) res[k] = load_vec<T, VEC>(rr + idx * VEC);
      if constexpr (EARLY_WEIGHT) wvals[k] = load_vec<T, VEC>(weight + idx * VEC);
    }
  }
  float sumsq = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t idx = lane + static_cast<int64_t>(k) * tpr;
    if (active && idx < nvec) {
      if constexpr (FUSED) {
        Vec<T, VEC> rv;
        if constexpr (kResidualEarly) {
          rv = res[k];
        } else {
          rv = load_vec<T, VEC>(rr + idx * VEC);
        }
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          vals[k].v[j] = from_float<T>(to_float(vals[k].v[j]) + to_float(rv.v[j]));
        }
        store_vec<T, VEC>(rr + idx * VEC, vals[k]);
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float f = to_float(vals[k].v[j]);
        sumsq += f * f;
      }
    }
  }
  sumsq = row_sum(sumsq, tpr);
  const float rstd = rsqrtf(sumsq / static_cast<float>(p.hidden) + p.eps);
  if (!active) return;
  T* orow = out.row(r, p.inner);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t idx = lane + static_cast<int64_t>(k) * tpr;
    if (idx < nvec) {
      Vec<T, VEC> wv;
      if constexpr (EARLY_WEIGHT) {
        wv = wvals[k];
      } else {
        wv = load_vec<T, VEC>(weight + idx * VEC);
      }
      Vec<T, VEC> ov;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        ov.v[j] = from_float<T>(to_float(vals[k].v[j]) * rstd * to_float(wv.v[j]));
      }
      store_vec<T, VEC, !FUSED>(orow + idx * VEC, ov);
    }
  }
}

template <typename T, int VEC, bool FUSED>
cudaError_t launch_vec(Rows<const T> x, Rows<T> residual, const T* weight, Rows<T> out,
                       const Problem& p, const LaunchPlan& lp, cudaStream_t stream) {
  const int threads = lp.threads_per_row * lp.rows_per_block;
  const int64_t blocks = (p.rows + lp.rows_per_block - 1) / lp.rows_per_block;
  const dim3 grid(static_cast<unsigned>(blocks));
#define EMBER_NORM_LAUNCH(NV, EARLY)                                      \
  rmsnorm_kernel<T, VEC, NV, FUSED, EARLY><<<grid, threads, 0, stream>>>( \
      x, residual, weight, out, p, lp.threads_per_row, lp.rows_per_block)
  if constexpr (VEC == 1) {
    if (lp.vectors_per_thread != kMaxVectorsPerThread) return cudaErrorInvalidValue;
    EMBER_NORM_LAUNCH(16, false);
    return cudaGetLastError();
  }
  switch (lp.vectors_per_thread) {
    case 1:
      EMBER_NORM_LAUNCH(1, false);
      break;
    case 2:
      if (lp.early_weight) {
        EMBER_NORM_LAUNCH(2, true);
      } else {
        EMBER_NORM_LAUNCH(2, false);
      }
      break;
    case 4:
      EMBER_NORM_LAUNCH(4, false);
      break;
    case 8:
      EMBER_NORM_LAUNCH(8, false);
      break;
    case 16:
      EMBER_NORM_LAUNCH(16, false);
      break;
    default:
      return cudaErrorInvalidValue;
  }
#undef EMBER_NORM_LAUNCH
  return cudaGetLastError();
}

// The explicit dispatch (R5.11, R5.12): the 16-byte vector width with 1-16 vectors per thread,
// or scalar access (rows whose length or alignment forbids vectors) with 16 per thread; plan()
// only produces these, anything else is refused.
template <typename T, bool FUSED>
cudaError_t launch(Rows<const T> x, Rows<T> residual, const T* weight, Rows<T> out,
                   const Problem& p, const LaunchPlan& lp, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  constexpr int kWide = 16 / static_cast<int>(sizeof(T));
  if (lp.vec == kWide) return launch_vec<T, kWide, FUSED>(x, residual, weight, out, p, lp, stream);
  if (lp.vec == 1 && lp.vectors_per_thread == kMaxVectorsPerThread) {
    return launch_vec<T, 1, FUSED>(x, residual, weight, out, p, lp, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace norm
}  // namespace ember
