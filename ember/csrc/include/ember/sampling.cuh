// Softmax with temperature, one pass over the logits (sm_90+). Framework-free (R3.1, R3.2).
//
// A row is split over a thread-block cluster of kSoftmaxCluster CTAs. Each CTA loads its chunk
// once into shared memory (as fp32, divided by the row's temperature), reduces its max, and the
// cluster exchanges the CTAs' maxima through distributed shared memory; then the same for the
// sum of exponentials, which each CTA keeps in shared memory; finally each CTA writes its chunk
// of probabilities. The logits are read once and the probabilities written once: no second pass
// over a row that does not fit in L2.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ember/dtype.cuh"
#include "ember/launch.cuh"
#include "ember/sampling.h"

namespace ember {
namespace sampling {

constexpr int kSoftmaxThreads = 512;

// Block-wide reduction of `v` (max when MAX, else sum) through `scratch` (one float per warp).
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kSoftmaxThreads / 32 ? scratch[lane] : (MAX ? -INFINITY : 0.f);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

template <typename T, bool VEC>
__global__ void __cluster_dims__(kSoftmaxCluster, 1, 1) __launch_bounds__(kSoftmaxThreads)
    softmax_kernel(SoftmaxParams p) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float row_smem[];  // [chunk] values, then 2 exchange slots
  __shared__ float scratch[kSoftmaxThreads / 32];
  float* exchange = row_smem + p.chunk;  // [0]: this CTA's max, [1]: its sum
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / kSoftmaxCluster;
  const int64_t begin = static_cast<int64_t>(rank) * p.chunk;
  const int64_t left = p.vocab - begin;
  const int n = left <= 0 ? 0 : static_cast<int>(left < p.chunk ? left : p.chunk);
  const T* in = static_cast<const T*>(p.logits) + row * p.logits_row_stride + begin;
  pdl_wait();
  const float t = p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature;
  const float inv_t = 1.f / t;
  float mx = -INFINITY;
  if constexpr (VEC) {
    // n is a multiple of the pack here (vocab and chunk are): 4 packs in flight per thread,
    // then a remainder loop; shared-memory stores as float4.
    constexpr int kE = 16 / static_cast<int>(sizeof(T));
    struct alignas(16) Pack {
      T v[kE];
    };
    const Pack* src = reinterpret_cast<const Pack*>(in);
    const int packs = n / kE;
    auto put = [&](int i, const Pack& x) {
      float f[kE];
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        f[j] = to_float(x.v[j]) * inv_t;
        mx = fmaxf(mx, f[j]);
      }
#pragma unroll
      for (int j = 0; j < kE; j += 4) {
        *reinterpret_cast<float4*>(row_smem + i * kE + j) =
            make_float4(f[j], f[j + 1], f[j + 2], f[j + 3]);
      }
    };
    int i = threadIdx.x;
    for (; i + 3 * kSoftmaxThreads < packs; i += 4 * kSoftmaxThreads) {
      Pack x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) x[u] = src[i + u * kSoftmaxThreads];
#pragma unroll
      for (int u = 0; u < 4; ++u) put(i + u * kSoftmaxThreads, x[u]);
    }
    for (; i < packs; i += kSoftmaxThreads) put(i, src[i]);
  } else {
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) {
      const float v = to_float(in[i]) * inv_t;
      row_smem[i] = v;
      mx = fmaxf(mx, v);
    }
  }
  mx = block_reduce<true>(mx, scratch);
  if (threadIdx.x == 0) exchange[0] = mx;
  cluster.sync();
  float m = -INFINITY;
#pragma unroll
  for (int r = 0; r < kSoftmaxCluster; ++r) m = fmaxf(m, cluster.map_shared_rank(exchange, r)[0]);
  float sum = 0.f;
  for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) {
    const float e = __expf(row_smem[i] - m);
    row_smem[i] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, scratch);
  if (threadIdx.x == 0) exchange[1] = sum;
  cluster.sync();
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < kSoftmaxCluster; ++r) s += cluster.map_shared_rank(exchange, r)[1];
  cluster.sync();  // no CTA leaves while another still reads its exchange slots
  pdl_launch_dependents();
  const float inv_s = 1.f / s;
  float* out = p.probs + row * p.probs_row_stride + begin;
  for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) out[i] = row_smem[i] * inv_s;
}

// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so each (seed, offset, row)
// gives the same numbers on any GPU and in any launch order.
__device__ __forceinline__ uint4 philox(uint4 c, uint2 k) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = static_cast<unsigned long long>(0xD2511F53u) * c.x;
    const unsigned long long p1 = static_cast<unsigned long long>(0xCD9E8D57u) * c.z;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

// A uniform float in [0, 1) for (seed, offset, stream): 24 random bits.
__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t offset, uint64_t stream) {
  const uint4 r =
      philox(make_uint4(static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)),
             make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
  return static_cast<float>(r.x >> 8) * (1.f / 16777216.f);
}

// Block-wide exclusive prefix sum of one value per thread; `total` gets the block's sum.
__device__ __forceinline__ float block_exclusive_scan(float v, float* scratch, float* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float inc = v;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const float w = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += w;
  }
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kSoftmaxThreads / 32 ? scratch[lane] : 0.f;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const float x = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += x;
    }
    if (lane < kSoftmaxThreads / 32) scratch[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  const float before = (warp > 0 ? scratch[warp - 1] : 0.f) + inc - v;
  *total = scratch[kSoftmaxThreads / 32 - 1];
  __syncthreads();  // scratch is reused
  return before;
}

// Inverse-CDF sampling over a row split across the cluster (layout as softmax_kernel). Each
// thread owns a contiguous segment of its CTA's chunk; the CTAs exchange their totals, every CTA
// draws the same u, and the thread whose segment holds u * total scans it for the first index
// whose running sum exceeds the target. Rounding can leave a target just past a sum: then the
// last element with mass before it is taken, so an element of probability 0 is never returned.
// A row whose total is not finite and positive gets -1.
template <bool VEC>
__global__ void __cluster_dims__(kSoftmaxCluster, 1, 1) __launch_bounds__(kSoftmaxThreads)
    sample_kernel(SampleParams p) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float chunk_smem[];  // [chunk], then 1 exchange slot
  __shared__ float scratch[kSoftmaxThreads / 32];
  __shared__ int found;
  float* exchange = chunk_smem + p.chunk;
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / kSoftmaxCluster;
  const int64_t begin = static_cast<int64_t>(rank) * p.chunk;
  const int64_t left = p.vocab - begin;
  const int n = left <= 0 ? 0 : static_cast<int>(left < p.chunk ? left : p.chunk);
  const float* in = p.probs + row * p.probs_row_stride + begin;
  pdl_wait();
  if constexpr (VEC) {
    const float4* src = reinterpret_cast<const float4*>(in);
    const int packs = n / 4;
    int i = threadIdx.x;
    for (; i + 3 * kSoftmaxThreads < packs; i += 4 * kSoftmaxThreads) {
      float4 x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) x[u] = src[i + u * kSoftmaxThreads];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        reinterpret_cast<float4*>(chunk_smem)[i + u * kSoftmaxThreads] = x[u];
    }
    for (; i < packs; i += kSoftmaxThreads) reinterpret_cast<float4*>(chunk_smem)[i] = src[i];
  } else {
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) chunk_smem[i] = in[i];
  }
  if (threadIdx.x == 0) found = 0;
  __syncthreads();
  // NOTE: an odd segment length puts a warp's 32 lanes on 32 different banks as they walk their
  // segments (an even one, e.g. 32 at vocab 128256, would put them all on one)
  const int seg = ((n + kSoftmaxThreads - 1) / kSoftmaxThreads) | 1;
  const int lo = min(n, static_cast<int>(threadIdx.x) * seg), hi = min(n, lo + seg);
  float mine = 0.f;
  int last_nonzero = -1;
  for (int i = lo; i < hi; ++i) {
    mine += chunk_smem[i];
    if (chunk_smem[i] > 0.f) last_nonzero = i;
  }
  float block_total;
  const float prefix = block_exclusive_scan(mine, scratch, &block_total);
  // The segments' ranges share their edges: [start, end) with start = the previous thread's end
  // (in float, prefix + mine of one thread need not equal the next thread's prefix), so exactly
  // one thread holds any target below the last end. prev_nz: the last element with mass before
  // this thread's segment.
  __shared__ float warp_end[kSoftmaxThreads / 32];
  __shared__ int warp_nz[kSoftmaxThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float end = prefix + mine;
  float start = __shfl_up_sync(0xffffffffu, end, 1);
  int nz_incl = last_nonzero;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int x = __shfl_up_sync(0xffffffffu, nz_incl, o);
    if (lane >= o) nz_incl = max(nz_incl, x);
  }
  int prev_nz = __shfl_up_sync(0xffffffffu, nz_incl, 1);
  if (lane == 31) {
    warp_end[warp] = end;
    warp_nz[warp] = nz_incl;
  }
  __syncthreads();
  int before_warp_nz = -1;
  for (int w = 0; w < warp; ++w) before_warp_nz = max(before_warp_nz, warp_nz[w]);
  if (lane == 0) {
    start = warp > 0 ? warp_end[warp - 1] : 0.f;
    prev_nz = before_warp_nz;
  } else {
    prev_nz = max(prev_nz, before_warp_nz);
  }
  if (threadIdx.x == 0) exchange[0] = block_total;
  cluster.sync();
  float before = 0.f, total = 0.f;
  int last_rank = -1;  // the last CTA with mass
#pragma unroll
  for (int r = 0; r < kSoftmaxCluster; ++r) {
    const float t = cluster.map_shared_rank(exchange, r)[0];
    if (r < rank) before += t;
    total += t;
    if (t > 0.f) last_rank = r;
  }
  cluster.sync();  // every remote read is done: CTAs may leave from here on
  if (!(total > 0.f) || !isfinite(total)) {
    if (rank == 0 && threadIdx.x == 0) p.samples[row] = -1;
    return;
  }
  const float target = uniform01(p.seed, p.offset, static_cast<uint64_t>(row)) * total;
  const bool owner =
      block_total > 0.f && target >= before && (target < before + block_total || rank == last_rank);
  if (!owner) return;
  const float local = target - before;
  if (local >= start && local < end) {  // the one thread whose range holds the target
    int pick;
    if (mine > 0.f) {
      float run = start;
      pick = last_nonzero;  // rounding left the target past the running sum: the last mass
      for (int i = lo; i < hi; ++i) {
        run += chunk_smem[i];
        if (run > local && chunk_smem[i] > 0.f) {
          pick = i;
          break;
        }
      }
    } else {
      pick = prev_nz;  // an empty segment's range is only rounding: the mass just before it
    }
    if (pick >= 0) {
      p.samples[row] = static_cast<int32_t>(begin + pick);
      found = 1;
    }
  }
  __syncthreads();
  if (found == 0) {  // `local` past the last end (rounding): the block's last mass, before it
    int idx = last_nonzero;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) idx = max(idx, __shfl_xor_sync(0xffffffffu, idx, o));
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = static_cast<float>(idx);
    __syncthreads();
    if (threadIdx.x == 0) {
      int best = -1;
      for (int w = 0; w < kSoftmaxThreads / 32; ++w) best = max(best, static_cast<int>(scratch[w]));
      p.samples[row] = static_cast<int32_t>(begin + best);
    }
  }
  pdl_launch_dependents();
}

template <typename T>
cudaError_t launch_softmax(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.vocab == 0) return cudaSuccess;
  const size_t smem = (static_cast<size_t>(p.chunk) + 2) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.rows * kSoftmaxCluster));
  if (p.vec) {
    return launch_kernel<softmax_kernel<T, true>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                                  p.device, p);
  }
  return launch_kernel<softmax_kernel<T, false>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                                 p.device, p);
}

inline cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const size_t smem = (static_cast<size_t>(p.chunk) + 1) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.rows * kSoftmaxCluster));
  if (p.vec) {
    return launch_kernel<sample_kernel<true>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                              p.device, p);
  }
  return launch_kernel<sample_kernel<false>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                             p.device, p);
}

}  // namespace sampling
}  // namespace ember
