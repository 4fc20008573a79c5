// RMSNorm family: the host-visible interface between the binding (csrc/ops/norm.cc, compiled by
// the C++ compiler) and the kernels (csrc/ops/norm_rmsnorm.cu and norm_fused.cu, compiled by nvcc).
// Keeping the two in separate translation units lets ninja compile them in parallel and keeps the
// tvm-ffi headers out of nvcc's work. Framework-free: raw pointers and plain integers only (R3.1,
// R3.2).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember {
namespace norm {

// The kernels of one dtype (EMBER_NORM_DTYPE) are compiled into each module; the launchers below
// are defined in csrc/ops/norm_rmsnorm.cu and csrc/ops/norm_fused.cu.

// Rows of a 2-D [rows, hidden] or 3-D [outer, inner, hidden] tensor whose last dim is contiguous:
// row r starts at (r / inner) * stride_outer + (r % inner) * stride_inner elements.
struct RowLayout {
  int64_t stride_outer;
  int64_t stride_inner;
};

struct Problem {
  int64_t rows;    // outer * inner
  int64_t inner;   // 1 for 2-D inputs
  int64_t hidden;  // normalised length
  float eps;
  float inv_hidden;  // 1 / hidden, rounded to fp32 on the host
};

// The launch plan: elements per vector access, vectors per thread held in registers, threads
// cooperating on one row, rows per block. Chosen by plan(); the launcher dispatches on it.
struct LaunchPlan {
  int vec;
  int vectors_per_thread;
  int threads_per_row;
  int rows_per_block;
  bool early_weight;  // fused kernel: load the weights with the row (2-vector block-row plans)
  bool pdl;           // launch as a programmatic dependent (sm_90+), set by the caller
  int device;         // the CUDA device (current during the launch), set by the caller
};

// The widest vector (16 bytes) and the largest vectors-per-thread the kernels are compiled for.
constexpr int kMaxVectorsPerThread = 16;
constexpr int kMaxThreadsPerRow = 512;
// Up to this many rows a call counts as decode-sized (latency bound): about two rows per SM.
constexpr int64_t kFewRows = 256;
// Rows of at least this many vectors (8192 bf16) use 8 vectors per thread when there are many.
constexpr int64_t kLongRowVectors = 1024;
#ifndef EMBER_NORM_LONG_ROW_NV
#define EMBER_NORM_LONG_ROW_NV 8  // NOTE: a switch for the variant sweep (tools/norm_probe.py)
#endif

// Plans a launch for `rows` rows of `hidden` elements of `elem_bytes` bytes, accessed `vec`
// elements at a time: 16 / elem_bytes, or 1 for rows that are not 16-byte aligned. Returns false
// when no compiled variant covers the request (hidden > 16 vectors x 512 threads x vec).
//
// NOTE (measured on H200, docs/perf/notes/norm.md): short rows (<= 128 vectors) use sub-warp
// groups so a block holds several rows. Long rows use one block per row holding the whole row in
// registers: 4 vectors per thread when there are many rows (8192x4096: 128 threads beat 256 by
// 12 %), 8 for rows of 1024+ vectors (8192x8192 and 8192x16384: ~0.9 % faster than 4, 5120: 3 %
// slower), 2 when there are few (decode: more threads, shorter per-thread chains), more only
// when 512 threads would not cover the row.
#ifndef EMBER_NORM_EARLY_WEIGHT
#define EMBER_NORM_EARLY_WEIGHT 1  // NOTE: a switch for the variant sweep (tools/norm_probe.py)
#endif

inline bool plan(int64_t hidden, int64_t rows, int vec, int elem_bytes, LaunchPlan* out) {
  const int wide = 16 / elem_bytes;
  if (hidden < 1 || (vec != wide && vec != 1) || hidden % vec != 0) return false;
  const int64_t nvec = hidden / vec;
  LaunchPlan lp{vec, kMaxVectorsPerThread, 32, 1, false};
  int64_t threads = (nvec + kMaxVectorsPerThread - 1) / kMaxVectorsPerThread;
  if (vec != 1 && nvec <= 128) {
    lp.vectors_per_thread = nvec <= 32 ? 1 : (nvec <= 64 ? 2 : 4);
    int tpr = 1;
    while (tpr * lp.vectors_per_thread < nvec) tpr *= 2;
    lp.threads_per_row = tpr;
    lp.rows_per_block = 256 / tpr;
    *out = lp;
    return true;
  }
  if (vec != 1) {
    const int first = rows <= kFewRows ? 2 : (nvec >= kLongRowVectors ? EMBER_NORM_LONG_ROW_NV : 4);
    for (int nv = first; nv <= kMaxVectorsPerThread; nv *= 2) {
      lp.vectors_per_thread = nv;
      threads = (nvec + nv - 1) / nv;
      if (threads <= kMaxThreadsPerRow) break;
    }
  }
  if (threads > kMaxThreadsPerRow) return false;
  lp.early_weight = EMBER_NORM_EARLY_WEIGHT && vec != 1 && lp.vectors_per_thread == 2;
  lp.threads_per_row = static_cast<int>((threads + 31) / 32 * 32);
  *out = lp;
  return true;
}

// out = x * rsqrt(mean(x^2) + eps) * weight, row by row.
cudaError_t rmsnorm(const void* x, RowLayout x_layout, const void* weight, void* out,
                    RowLayout out_layout, const Problem& p, const LaunchPlan& lp,
                    cudaStream_t stream);

// residual = x + residual; x = rmsnorm(residual) * weight, in place.
cudaError_t fused_add_rmsnorm(void* x, RowLayout x_layout, void* residual,
                              RowLayout residual_layout, const void* weight, const Problem& p,
                              const LaunchPlan& lp, cudaStream_t stream);

}  // namespace norm
}  // namespace ember
