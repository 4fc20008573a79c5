// Does a GPU-scope release wait for the warp's loads still in flight? (session 20, for
// EMBER_SOFTMAX_LATE0). Every CTA's threads issue 8 16-byte loads of a buffer far larger than L2
// (each CTA its own 64 KB), then thread 0 times one add on a counter with clock64: issued with
// those loads in flight (mode 0: release, mode 1: relaxed) or before issuing them (mode 2:
// release); mode 3: warp 0 issues no loads at all, the CTA's other 15 warps do, and thread 0's
// release add waits until they are in flight (after a CTA barrier). If mode 0's add takes a DRAM
// round trip and mode 1 does not, the release drains the warp's loads; if mode 3's does too, it
// drains more than its own warp's (the CTA's or the SM's).
// Session 20, H100 (modes 0-2): 9 074-9 583 cycles median, 176, 1 790 (p90 9 880).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a tools/release_probe.cu -o /tmp/rp
//   /tmp/rp
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

constexpr int kThreads = 512;
constexpr int kLoads = 8;

template <int kMode>
__global__ void __launch_bounds__(kThreads, 2)
    probe(const int4* src, unsigned* count, long long* cycles, int4* sink, long long stride) {
  const int t = threadIdx.x;
  const int4* base = src + (blockIdx.x * stride) % (1ll << 27);  // int4s: the buffer is 2 GB
  int4 v[kLoads];
  long long c0 = 0, c1 = 0;
  if (kMode == 2 && t == 0) {
    c0 = clock64();
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    c1 = clock64();
  }
  if (kMode != 3 || t >= 32) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) v[u] = base[t + u * kThreads];
  } else {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) v[u] = make_int4(t, u, 0, 0);
  }
  if (kMode == 3) __syncthreads();  // (the other warps' loads are issued)
  if (kMode != 2 && t == 0) {
    c0 = clock64();
    if (kMode == 0 || kMode == 3) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    } else {
      asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    }
    c1 = clock64();
  }
  int4 acc = make_int4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    acc.x ^= v[u].x;
    acc.y ^= v[u].y;
    acc.z ^= v[u].z;
    acc.w ^= v[u].w;
  }
  if (acc.x == 0x12345678) sink[blockIdx.x * kThreads + t] = acc;  // (never: keeps the loads)
  if (t == 0) cycles[blockIdx.x] = c1 - c0;
}

template <int kMode>
void run(const int4* src, unsigned* count, long long* cycles, int4* sink, int blocks) {
  std::vector<long long> all;
  for (int rep = 0; rep < 20; ++rep) {
    probe<kMode><<<blocks, kThreads>>>(src, count, cycles, sink, 4096ll * (rep * 7 + 1) + 4096);
    cudaDeviceSynchronize();
    std::vector<long long> h(blocks);
    cudaMemcpy(h.data(), cycles, blocks * sizeof(long long), cudaMemcpyDeviceToHost);
    if (rep >= 2) all.insert(all.end(), h.begin(), h.end());
  }
  std::sort(all.begin(), all.end());
  const char* name[] = {"release, loads in flight", "relaxed, loads in flight",
                        "release, before the loads", "release, only other warps' loads"};
  std::printf("mode %d (%s): add takes median %lld cycles, p10 %lld, p90 %lld\n", kMode,
              name[kMode], all[all.size() / 2], all[all.size() / 10], all[all.size() * 9 / 10]);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = 2 * sms;
  int4 *src = nullptr, *sink = nullptr;
  unsigned* count = nullptr;
  long long* cycles = nullptr;
  cudaMalloc(&src, (1ll << 27) * sizeof(int4) + 64 * 1024ll * blocks * 64);
  cudaMemset(src, 1, (1ll << 27) * sizeof(int4));
  cudaMalloc(&sink, blocks * kThreads * sizeof(int4));
  cudaMalloc(&count, sizeof(unsigned));
  cudaMalloc(&cycles, blocks * sizeof(long long));
  for (int round = 0; round < 2; ++round) {
    run<0>(src, count, cycles, sink, blocks);
    run<1>(src, count, cycles, sink, blocks);
    run<2>(src, count, cycles, sink, blocks);
    run<3>(src, count, cycles, sink, blocks);
  }
  const cudaError_t err = cudaGetLastError();
  std::printf("%s on %d SMs, %d CTAs of %d\n", cudaGetErrorString(err), sms, blocks, kThreads);
  return err == cudaSuccess ? 0 : 1;
}
