// How many thread-block clusters of each size fit on this GPU at once
// (cudaOccupancyMaxActiveClusters), for the CTA shapes the persistent softmax could take:
// 512 or 1 024 threads, a given dynamic shared memory. An 8-CTA cluster must sit in one GPC, so
// the count tells how the GPCs' SM counts quantise a persistent grid (docs/perf/notes/act.md).
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o /tmp/cluster_probe tools/cluster_probe.cu
#include <cuda_runtime.h>

#include <cstdio>

__global__ void probe_kernel(int* out) {
  extern __shared__ int smem[];
  if (out != nullptr) out[threadIdx.x] = smem[threadIdx.x];
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 << 10);
  std::printf("SMs %d\n| threads | smem KB | cluster | max active clusters | CTAs | error |\n",
              sms);
  const int shapes[][2] = {{512, 64}, {512, 100}, {512, 200}, {1024, 128}, {1024, 200}, {256, 32}};
  for (const auto& s : shapes) {
    for (int c : {1, 2, 4, 6, 8, 16}) {
      cudaLaunchConfig_t config = {};
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = c;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      config.attrs = attr;
      config.numAttrs = 1;
      config.gridDim = dim3(c * 64);
      config.blockDim = dim3(s[0]);
      config.dynamicSmemBytes = static_cast<size_t>(s[1]) << 10;
      int n = -1;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(&n, probe_kernel, &config);
      std::printf("| %d | %d | %d | %d | %d | %s |\n", s[0], s[1], c, n, n * c,
                  err == cudaSuccess ? "" : cudaGetErrorString(err));
      cudaGetLastError();
    }
  }
  return 0;
}
