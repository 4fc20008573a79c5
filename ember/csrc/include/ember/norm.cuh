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
#include "ember/launch.cuh"
#include "ember/norm.h"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace norm {

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

#ifndef EMBER_NORM_STREAMING
#define EMBER_NORM_STREAMING 1  // NOTE: a switch for the variant sweep (tools/norm_probe.py)
#endif
// Plain rmsnorm reads x once and writes out once: in the large-problem plans those accesses carry
// the evict-first ("cs") cache hint. Without effect in v2; on the v4 kernels 0.2-0.6 % faster at
// the large shapes (8192x16384 128.95 vs 129.44 us, graph replay; docs/perf/notes/norm.md, v5).
constexpr bool kStreaming = EMBER_NORM_STREAMING != 0;

template <typename T, int VEC, bool kStream = false>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  Vec<T, VEC> v;
  if constexpr (sizeof(Vec<T, VEC>) == 16) {
    const uint4 u =
        kStream ? __ldcs(reinterpret_cast<const uint4*>(p)) : *reinterpret_cast<const uint4*>(p);
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
// kStream (with kExplicit): the evict-first form.
template <typename T, int VEC, bool kExplicit = false, bool kStream = false>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& v) {
  if constexpr (sizeof(Vec<T, VEC>) == 16) {
    const uint4 u = pack16<T, VEC>(v);
    if constexpr (kExplicit && kStream) {
      asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y),
                   "r"(u.z), "r"(u.w));
    } else if constexpr (kExplicit) {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y),
                   "r"(u.z), "r"(u.w));
    } else {
      *reinterpret_cast<uint4*>(p) = u;
    }
  } else {
    *reinterpret_cast<Vec<T, VEC>*>(p) = v;
  }
}

// Sum over the threads of a row. Sub-warp groups (BLOCK_ROW false): `tpr` is a power of two
// <= 32, xor shuffles inside the group. One row per block (BLOCK_ROW): a full-warp shuffle, then
// the block's warps combine through shared memory; the loop bound is a constant, so it unrolls.
template <bool BLOCK_ROW>
__device__ __forceinline__ float row_sum(float v, int tpr) {
  if constexpr (!BLOCK_ROW) {
    for (int offset = tpr / 2; offset > 0; offset /= 2) {
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
  } else {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (blockDim.x == 32) return v;
    constexpr int kMaxWarps = kMaxThreadsPerRow / 32;
    __shared__ float partial[kMaxWarps];
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    const int warps = static_cast<int>(blockDim.x / 32);
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxWarps; ++i) {
      if (i < warps) total += partial[i];
    }
    return total;
  }
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

template <typename T, int VEC>
__device__ __forceinline__ float sum_squares(const Vec<T, VEC>& v) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float f = to_float(v.v[j]);
    s += f * f;
  }
  return s;
}

// v * rstd * w, rounded to T.
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> scale(const Vec<T, VEC>& v, float rstd,
                                             const Vec<T, VEC>& w) {
  Vec<T, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(to_float(v.v[j]) * rstd * to_float(w.v[j]));
  return o;
}

// The vector indices a thread covers in a row of `nvec` vectors: lane + k * tpr, clamped to the
// last vector where past the row (`in[k]` false: load, ignore, do not store).
template <int NV>
__device__ __forceinline__ void row_indices(int lane, int tpr, int nvec, int (&idx)[NV],
                                            bool (&in)[NV]) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = lane + k * tpr;
    in[k] = i < nvec;
    idx[k] = in[k] ? i : nvec - 1;
  }
}

// FUSED: residual = x + residual (rounded to T); out (= x) = rmsnorm(residual) * weight.
// Rows stay in registers as loaded (16 bytes = 4 registers per vector whatever the dtype), so
// 16 vectors per thread fit without spills at 512 threads.
// BLOCK_ROW: one row per block (blockDim.x threads, a multiple of 32); otherwise groups of
// 2^tpr_log2 threads per row, several rows per block.
// NOTE: up to 4 vectors per thread the kernels are capped at 64 registers (two 512-thread blocks
// per SM): uncapped, batching the weights took 71-81 registers and 8192x8192 fell from 66 to
// 81 us (3 blocks of 256 per SM instead of 4; docs/perf/notes/norm.md, v4).
constexpr int kCappedNV = 4;

template <typename T, int VEC, int NV, bool FUSED, bool EARLY_WEIGHT, bool BLOCK_ROW>
__global__ void __launch_bounds__(kMaxThreadsPerRow, NV <= kCappedNV ? 2 : 1)
    rmsnorm_kernel(Rows<const T> x, Rows<T> residual, const T* __restrict__ weight, Rows<T> out,
                   Problem p, int tpr_log2) {
  // NOTE: no integer division before the first load (the previous version spent three runtime
  // divisions there, ~300 cycles of dependent arithmetic per block): the block-row form reads
  // its row from blockIdx, the group form shifts.
  int tpr, lane;
  int64_t r;
  if constexpr (BLOCK_ROW) {
    tpr = static_cast<int>(blockDim.x);
    lane = static_cast<int>(threadIdx.x);
    r = blockIdx.x;
  } else {
    tpr = 1 << tpr_log2;
    lane = static_cast<int>(threadIdx.x) & (tpr - 1);
    r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> tpr_log2;
  }
  const bool active = BLOCK_ROW || r < p.rows;
  const int nvec = static_cast<int>(p.hidden / VEC);  // NOTE: hidden <= 65536 (plan()).
  // NOTE: loads are unconditional: indices past the row (and rows past the end, in the group
  // form) are clamped to valid ones and their values ignored. Loads under `if` became one branch
  // per vector with the first use inside it, so each thread waited for vector k before issuing
  // k + 1 (SASS); clamped loads issue back to back. Only stores are predicated.
  const int64_t rl = active ? r : p.rows - 1;
  const T* xr = x.row(rl, p.inner);
  T* rr = FUSED ? residual.row(rl, p.inner) : nullptr;
  int idx[NV];
  bool in[NV];
  row_indices<NV>(lane, tpr, nvec, idx, in);

  constexpr bool kResidualEarly = FUSED && NV <= 8;  // NOTE: 16 x 2 vectors would spill.
  constexpr bool kWeightBatch = NV <= kCappedNV;     // all weights in flight at once
  // NOTE: evict-first only where plan() puts large problems (one row per block, >= 4 vectors per
  // thread: more than 256 rows, or rows over 1024 vectors): a decode-sized output stays an
  // ordinary L2 line for the GEMM that reads it next.
  constexpr bool kStreamRow = !FUSED && kStreaming && BLOCK_ROW && NV >= 4;
  Vec<T, VEC> vals[NV];
  Vec<T, VEC> res[kResidualEarly ? NV : 1];
  Vec<T, VEC> wvals[kWeightBatch ? NV : 1];
  pdl_wait();
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    vals[k] = load_vec<T, VEC, kStreamRow>(xr + idx[k] * VEC);
    if constexpr (kResidualEarly) res[k] = load_vec<T, VEC>(rr + idx[k] * VEC);
    if constexpr (EARLY_WEIGHT) wvals[k] = load_vec<T, VEC>(weight + idx[k] * VEC);
  }
  pdl_launch_dependents();
  float sumsq = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if constexpr (FUSED) {
      Vec<T, VEC> rv;
      if constexpr (kResidualEarly) {
        rv = res[k];
      } else {
        rv = load_vec<T, VEC>(rr + idx[k] * VEC);
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        vals[k].v[j] = from_float<T>(to_float(vals[k].v[j]) + to_float(rv.v[j]));
      }
      if (active && in[k]) store_vec<T, VEC>(rr + idx[k] * VEC, vals[k]);
    }
    const float s = sum_squares<T, VEC>(vals[k]);
    sumsq += in[k] ? s : 0.f;
  }
  if constexpr (!EARLY_WEIGHT && kWeightBatch) {
#pragma unroll
    for (int k = 0; k < NV; ++k) wvals[k] = load_vec<T, VEC>(weight + idx[k] * VEC);
  }
  sumsq = row_sum<BLOCK_ROW>(sumsq, tpr);
  const float rstd = rsqrtf(sumsq * p.inv_hidden + p.eps);
  if (!active) return;
  T* orow = out.row(r, p.inner);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    Vec<T, VEC> wv;
    if constexpr (kWeightBatch) {
      wv = wvals[k];
    } else {
      wv = load_vec<T, VEC>(weight + idx[k] * VEC);
    }
    const Vec<T, VEC> ov = scale(vals[k], rstd, wv);
    if (in[k]) store_vec<T, VEC, !FUSED, kStreamRow>(orow + idx[k] * VEC, ov);
  }
}

inline int log2_of(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

// The compiled (VEC, NV, EARLY_WEIGHT, BLOCK_ROW) combinations, which are exactly what plan()
// produces: one row per block with 2-16 vectors per thread (2 with or without early weights), or
// sub-warp groups with 1, 2 or 4 (rows of at most 128 vectors); scalar access uses one row per
// block with 16. Anything else is refused.
template <typename T, int VEC, bool FUSED>
cudaError_t launch_vec(Rows<const T> x, Rows<T> residual, const T* weight, Rows<T> out,
                       const Problem& p, const LaunchPlan& lp, cudaStream_t stream) {
  const int threads = lp.threads_per_row * lp.rows_per_block;
  const int64_t blocks = (p.rows + lp.rows_per_block - 1) / lp.rows_per_block;
  const dim3 grid(static_cast<unsigned>(blocks));
  const int tpr_log2 = log2_of(lp.threads_per_row);
#define EMBER_NORM_LAUNCH(NV, EARLY, BLOCK_ROW)                                                    \
  do {                                                                                             \
    const cudaError_t err = launch_kernel<rmsnorm_kernel<T, VEC, NV, FUSED, EARLY, BLOCK_ROW>>(    \
        grid, dim3(threads), 0, stream, lp.pdl, lp.device, x, residual, weight, out, p, tpr_log2); \
    if (err != cudaSuccess) return err;                                                            \
  } while (0)
  const bool block_row = lp.rows_per_block == 1;
  if (block_row && lp.threads_per_row % 32 != 0) return cudaErrorInvalidValue;
  if (!block_row && (lp.threads_per_row > 32 || (1 << tpr_log2) != lp.threads_per_row)) {
    return cudaErrorInvalidValue;
  }
  if constexpr (VEC == 1) {
    if (lp.vectors_per_thread != kMaxVectorsPerThread || !block_row) return cudaErrorInvalidValue;
    EMBER_NORM_LAUNCH(16, false, true);
    return cudaSuccess;
  }
  if (!block_row) {
    switch (lp.vectors_per_thread) {
      case 1:
        EMBER_NORM_LAUNCH(1, false, false);
        break;
      case 2:
        EMBER_NORM_LAUNCH(2, false, false);
        break;
      case 4:
        EMBER_NORM_LAUNCH(4, false, false);
        break;
      default:
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
  }
  switch (lp.vectors_per_thread) {
    case 2:
      // NOTE: early weights measured faster only in the fused kernel (decode sizes, -0.05 us);
      // plain rmsnorm was 0.05-0.1 us faster without (docs/perf/notes/norm.md, v4).
      if constexpr (FUSED) {
        if (lp.early_weight) {
          EMBER_NORM_LAUNCH(2, true, true);
          break;
        }
      }
      EMBER_NORM_LAUNCH(2, false, true);
      break;
    case 4:
      EMBER_NORM_LAUNCH(4, false, true);
      break;
    case 8:
      EMBER_NORM_LAUNCH(8, false, true);
      break;
    case 16:
      EMBER_NORM_LAUNCH(16, false, true);
      break;
    default:
      return cudaErrorInvalidValue;
  }
#undef EMBER_NORM_LAUNCH
  return cudaSuccess;
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

#pragma nv_diagnostic pop
