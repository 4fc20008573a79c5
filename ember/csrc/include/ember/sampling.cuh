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

}  // namespace sampling
}  // namespace ember
