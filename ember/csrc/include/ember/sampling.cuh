// The sampling family's shared device code (sm_90+): the pieces both halves of the family use —
// a row split over the shared memory of kSoftmaxCluster CTAs (chunk_length, load_chunk), block and
// cluster reductions, and the host-side occupancy queries of the persistent launches. The halves:
//   softmax.cuh          softmax with temperature (ember.softmax)
//   sampling_filter.cuh  sampling, renormalisation and masking under top-k, top-p and min-p
// Every kernel of the family holds a row in the shared memory of one thread-block cluster of
// kSoftmaxCluster CTAs (or, for some shapes, of 2 or 4 CTAs, of 8 CTAs of a cooperative grid, or
// of one CTA that streams the row), loaded once; the CTAs exchange partial results (maxima, sums,
// histograms) through distributed shared memory or, in the grid, global memory. Framework-free
// (R3.1, R3.2).
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ember/dtype.cuh"
#include "ember/launch.cuh"
#include "ember/sampling.h"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace sampling {

constexpr int kSoftmaxThreads = 512;

// Elements of a row from `begin` (rank * chunk) that are this CTA's: chunk, fewer at the row's
// end, none past it.
__device__ __forceinline__ int chunk_length(int64_t vocab, int chunk, int64_t begin) {
  const int64_t left = vocab - begin;
  return left <= 0 ? 0 : static_cast<int>(left < chunk ? left : chunk);
}

// Block-wide reduction of `v` (max when MAX, else sum) through `scratch` (one float per warp of
// the kThreads-thread block).
template <bool MAX, int kThreads = kSoftmaxThreads>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? scratch[lane] : (MAX ? -INFINITY : 0.f);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

// Loads a CTA's `n` elements of a row into shared memory as fp32, `f(x)` applied to each (it may
// also gather statistics). VEC: n is a multiple of the 16-byte pack and the source is aligned; 4
// packs in flight per thread, float4 shared stores.
template <typename T, bool VEC, typename F>
__device__ __forceinline__ void load_chunk(const T* in, int n, float* dst, F&& f) {
  if constexpr (VEC) {
    constexpr int kE = 16 / static_cast<int>(sizeof(T));
    using Pack = Vec<T, kE>;
    const Pack* src = reinterpret_cast<const Pack*>(in);
    const int packs = n / kE;
    auto put = [&](int i, const Pack& x) {
      float v[kE];
#pragma unroll
      for (int j = 0; j < kE; ++j) v[j] = f(to_float(x.v[j]));
#pragma unroll
      for (int j = 0; j < kE; j += 4) {
        *reinterpret_cast<float4*>(dst + i * kE + j) =
            make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
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
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) dst[i] = f(to_float(in[i]));
  }
}

// `v` reduced (max when MAX, else sum) over the block, then over the cluster: each CTA's value
// goes through its exchange[slot], read by every CTA after one cluster barrier. The caller's reads
// of the peers' slots must be behind a later barrier before any CTA leaves or rewrites its slot.
template <bool MAX, int C = kSoftmaxCluster>
__device__ __forceinline__ float cluster_reduce(cooperative_groups::cluster_group& cluster, float v,
                                                float* exchange, int slot, float* scratch) {
  v = block_reduce<MAX>(v, scratch);
  if (threadIdx.x == 0) exchange[slot] = v;
  cluster.sync();
  float all = MAX ? -INFINITY : 0.f;
#pragma unroll
  for (int r = 0; r < C; ++r) {
    const float x = cluster.map_shared_rank(exchange, r)[slot];
    all = MAX ? fmaxf(all, x) : all + x;
  }
  return all;
}

// Clusters of `Kernel` (C CTAs of kSoftmaxThreads, `smem` bytes of dynamic shared memory each)
// that fit the device at once (0: none, or the query failed), asked once per device and `key`
// (the chunk size, which sets `smem`).
template <auto Kernel, int C>
int resident_clusters(int device, int key, size_t smem) {
  constexpr int kMaxDevices = 64;
  static int key_of[kMaxDevices] = {};
  static int clusters_of[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  if (key_of[device] == key) return clusters_of[device];
  int clusters = 0;
  if (allow_dynamic_smem<Kernel>(smem) == cudaSuccess) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(C * 64);
    config.blockDim = dim3(kSoftmaxThreads);
    config.dynamicSmemBytes = smem;
    if (cudaOccupancyMaxActiveClusters(&clusters, Kernel, &config) != cudaSuccess) clusters = 0;
  }
  cudaGetLastError();  // a failed query leaves no sticky error; the caller falls back
  key_of[device] = key;
  clusters_of[device] = clusters;
  return clusters;
}

// The device's SM count (0: the query failed): filter_stream_kernel's grid, one CTA an SM, and
// softmax_grid_kernel's, a number of CTAs an SM.
inline int stream_grid(int device) {
  constexpr int kMaxDevices = 64;
  static int sms[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  if (sms[device] == 0 &&
      cudaDeviceGetAttribute(&sms[device], cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    sms[device] = -1;
  }
  return sms[device] > 0 ? sms[device] : 0;
}

}  // namespace sampling
}  // namespace ember

#pragma nv_diagnostic pop
