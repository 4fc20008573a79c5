// Toy family, device part: a grid-stride axpy. Framework-free (R3.1, R3.2).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ember/toy.h"

namespace ember {
namespace toy {

template <typename T>
__global__ void axpy_kernel(const T* __restrict__ a, const T* __restrict__ b, T alpha,
                            T* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = a[i] + alpha * b[i];
  }
}

template <typename T>
cudaError_t axpy(const T* a, const T* b, T alpha, T* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks64 = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks64 < 65535 ? blocks64 : 65535);
  axpy_kernel<T><<<blocks, kThreads, 0, stream>>>(a, b, alpha, out, n);
  return cudaGetLastError();
}

}  // namespace toy
}  // namespace ember
