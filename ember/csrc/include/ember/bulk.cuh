// Bulk asynchronous copies into shared memory (sm_90+, the TMA unit's one-dimensional form) and
// the transaction barriers they complete. Framework-free (R3.1, R3.2): PTX only.
//
// A copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) runs in the async proxy
// and adds its bytes to an mbarrier's transaction count as they land; a thread that expected
// them (mbar_expect_tx) and then waits on the barrier's phase sees the data. One barrier a
// buffer: phase k of buffer s is its k-th fill, so a consumer waits on parity k & 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One arrival a phase (the thread that expects the bytes); call from one thread, then fence and
// __syncthreads before any other thread waits on it.
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
#endif
}

// Makes initialised barriers visible to the async proxy (the copies complete on them).
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The one arrival of this phase, which also expects `bytes` from copies.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// Blocks until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t addr = smem_address(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred ready;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        "selp.u32 %0, 1, 0, ready;\n"
        "}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0u);
#endif
}

// Orders this thread's earlier shared-memory accesses (and, behind a barrier, the block's) before
// its later async-proxy copies into the same memory.
__device__ __forceinline__ void fence_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Global -> this CTA's shared memory, `bytes` completing on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
#endif
}

}  // namespace ember

#pragma nv_diagnostic pop
