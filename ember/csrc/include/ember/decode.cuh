// Batch decode kernels over a paged KV cache (v1: CUDA cores). Framework-free (R3.1, R3.2).
//
// One CTA per (work unit, kv head): the unit is a token range of one request (decode_plan.h).
// The CTA's 4 warps take tokens round-robin; in a warp each lane owns D/32 consecutive elements
// of the head dimension, so a K or V row is one coalesced warp load. All G query heads of the kv
// head are processed together (the row is read once for the group). Scores are kept in the log2
// domain (scaled by log2 e) for exp2; each warp keeps an online softmax per query head, and the
// warps are combined through shared memory at the end. A unit that is its request's only one
// writes the output directly; split requests write fp32 partials that the merge kernel combines
// by their log-sum-exp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/decode.h"
#include "ember/decode_plan.h"
#include "ember/dtype.cuh"
#include "ember/launch.cuh"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace decode {

constexpr int kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// E consecutive elements of T as fp32 (E * sizeof(T) is 2-16 bytes, naturally aligned).
template <typename T, int E>
__device__ __forceinline__ void load_row(const T* p, float (&f)[E]) {
  using Pack = Vec<T, E>;
  const Pack pk = *reinterpret_cast<const Pack*>(p);
#pragma unroll
  for (int i = 0; i < E; ++i) f[i] = to_float(pk.v[i]);
}

template <typename T, int E>
__device__ __forceinline__ void store_row(T* p, const float (&f)[E]) {
  using Pack = Vec<T, E>;
  Pack pk;
#pragma unroll
  for (int i = 0; i < E; ++i) pk.v[i] = from_float<T>(f[i]);
  *reinterpret_cast<Pack*>(p) = pk;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A CTA's row of the work table (decode_plan.h): request (-1: nothing to do), token range and
// partial slot (-1: write the output directly).
struct Unit {
  int req, kv_start, kv_end, slot;
};
__device__ __forceinline__ Unit read_unit(const Params& p, int unit) {
  const int32_t* w = p.work + static_cast<int64_t>(unit) * kWorkFields;
  return {w[kRequest], w[kKvStart], w[kKvEnd], w[kSlot]};
}

// Element d of query head h's result: into the output (and LSE) when the unit is its request's
// only one (slot < 0), else into the unit's fp32 partial slot for the merge.
template <typename TQ, int D>
__device__ __forceinline__ void write_result(const Params& p, int req, int slot, int h, int d,
                                             float o, float lse) {
  if (slot < 0) {
    TQ* orow = static_cast<TQ*>(p.out) + req * p.o_stride_b + h * p.o_stride_h;
    orow[d] = from_float<TQ>(o);
    if (d == 0 && p.lse != nullptr) p.lse[static_cast<int64_t>(req) * p.qo_heads + h] = lse;
  } else {
    p.partial_o[(static_cast<int64_t>(slot) * p.qo_heads + h) * D + d] = o;
    if (d == 0) p.partial_lse[static_cast<int64_t>(slot) * p.qo_heads + h] = lse;
  }
}

template <typename TQ, typename TKV, int D, int G>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(Params p) {
  constexpr int E = D / 32;
  const int unit = blockIdx.y;  // heads fastest (as in decode_tc.cuh)
  const int kv_head = blockIdx.x;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  pdl_wait();
  const Unit u = read_unit(p, unit);
  if (u.req < 0) return;
  const int req = u.req, kv_start = u.kv_start, kv_end = u.kv_end, slot = u.slot;
  const int32_t* pages = p.indices + p.indptr[req];

  // q for the G heads, scaled so that q.k is the logit in log2 units (or the raw scaled logit
  // when a soft cap applies: the cap's tanh needs natural units).
  const float qscale = p.soft_cap > 0.f ? p.sm_scale : p.sm_scale * kLog2e;
  float q[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int h = kv_head * G + g;
    load_row<TQ, E>(static_cast<const TQ*>(p.q) + req * p.q_stride_b + h * p.q_stride_h + lane * E,
                    q[g]);
#pragma unroll
    for (int i = 0; i < E; ++i) q[g][i] *= qscale;
  }
  float m[G], l[G], acc[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < E; ++i) acc[g][i] = 0.f;
  }
  const TKV* kbase = static_cast<const TKV*>(p.k.base) + kv_head * p.k.head_stride + lane * E;
  const TKV* vbase = static_cast<const TKV*>(p.v.base) + kv_head * p.v.head_stride + lane * E;
  for (int t = kv_start + warp; t < kv_end; t += kWarps) {
    const int64_t page = pages[t / p.page_size];
    const int s = t % p.page_size;
    float kf[E], vf[E];
    load_row<TKV, E>(kbase + page * p.k.page_stride + s * p.k.slot_stride, kf);
    load_row<TKV, E>(vbase + page * p.v.page_stride + s * p.v.slot_stride, vf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < E; ++i) dot += q[g][i] * kf[i];
      float x = warp_sum(dot) * p.k_scale;
      if (p.soft_cap > 0.f) x = p.soft_cap * tanhf(x / p.soft_cap) * kLog2e;
      const float m_new = fmaxf(m[g], x);
      const float corr = exp2f(m[g] - m_new);  // exp2(-inf) = 0 on the first token
      const float pr = exp2f(x - m_new);
      l[g] = l[g] * corr + pr;
#pragma unroll
      for (int i = 0; i < E; ++i) acc[g][i] = acc[g][i] * corr + pr * vf[i] * p.v_scale;
      m[g] = m_new;
    }
  }
  pdl_launch_dependents();

  // Combine the warps: per query head, the warp maxima, then rescaled sums.
  __shared__ float sm[kWarps][G], sl[kWarps][G];
  __shared__ float so[kWarps][G][D];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < E; ++i) so[warp][g][lane * E + i] = acc[g][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int g = idx / D;
    const int d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) mx = fmaxf(mx, sm[k][g]);
    float sum = 0.f, o = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int k = 0; k < kWarps; ++k) {
        const float c = exp2f(sm[k][g] - mx);
        sum += sl[k][g] * c;
        o += so[k][g][d] * c;
      }
    }
    o = sum > 0.f ? o / sum : 0.f;
    const float lse = sum > 0.f ? (mx + log2f(sum)) * kLn2 : -INFINITY;
    write_result<TQ, D>(p, req, slot, kv_head * G + g, d, o, lse);
  }
}

// One CTA per (request, query head) of a split request: out = sum_i w_i o_i with
// w_i = exp(lse_i - lse), lse = log sum_i exp(lse_i). Requests with 0 or 1 units return.
template <typename TQ, int D>
__global__ void __launch_bounds__(D) merge_kernel(Params p) {
  const int req = blockIdx.x;
  const int h = blockIdx.y;
  const int d = threadIdx.x;
  pdl_wait();
  const int s0 = p.merge_indptr[req];
  const int s1 = p.merge_indptr[req + 1];
  if (s1 - s0 < 2) return;
  float mx = -INFINITY;
  for (int s = s0; s < s1; ++s)
    mx = fmaxf(mx, p.partial_lse[static_cast<int64_t>(s) * p.qo_heads + h]);
  float sum = 0.f, o = 0.f;
  if (mx != -INFINITY) {
    for (int s = s0; s < s1; ++s) {
      const float c = __expf(p.partial_lse[static_cast<int64_t>(s) * p.qo_heads + h] - mx);
      sum += c;
      o += c * p.partial_o[(static_cast<int64_t>(s) * p.qo_heads + h) * D + d];
    }
  }
  pdl_launch_dependents();
  TQ* orow = static_cast<TQ*>(p.out) + req * p.o_stride_b + h * p.o_stride_h;
  orow[d] = from_float<TQ>(sum > 0.f ? o / sum : 0.f);
  if (d == 0 && p.lse != nullptr) {
    p.lse[static_cast<int64_t>(req) * p.qo_heads + h] = sum > 0.f ? mx + logf(sum) : -INFINITY;
  }
}

// The merge of split requests, after the decode kernel.
template <typename TQ, int D>
cudaError_t launch_merge(const Params& p, cudaStream_t stream) {
  if (p.merge_rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.merge_rows), static_cast<unsigned>(p.qo_heads));
  return launch_kernel<merge_kernel<TQ, D>>(grid, dim3(D), 0, stream, p.pdl, p.device, p);
}

template <typename TQ, typename TKV, int D, int G>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  if (p.grid > 0) {
    const dim3 grid(static_cast<unsigned>(p.kv_heads), static_cast<unsigned>(p.grid));
    const cudaError_t err = launch_kernel<decode_kernel<TQ, TKV, D, G>>(grid, dim3(kWarps * 32), 0,
                                                                        stream, p.pdl, p.device, p);
    if (err != cudaSuccess) return err;
  }
  return launch_merge<TQ, D>(p, stream);
}

// Resident CTAs per SM of the CUDA-core kernel (the planner's wave size).
template <typename TQ, typename TKV, int D, int G>
int ctas_per_sm() {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_kernel<TQ, TKV, D, G>, kWarps * 32,
                                                    0) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace decode
}  // namespace ember

#pragma nv_diagnostic pop
