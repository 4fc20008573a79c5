// Asynchronous global -> shared copies (cp.async, sm_80+) and the shared-window address they
// take (decode_tc.cuh's pipeline; any kernel that stages tiles through shared memory).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from `src` to shared address `dst`, through L2 only (.cg); !valid zero-fills `dst`
// without reading `src`.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid = true) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
// 8 bytes from `src` to shared address `dst` (.ca: the 8-byte form has no .cg).
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}
// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's groups are pending; the completed copies are visible
// to this thread only (a barrier publishes them to the block).
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace ember

#pragma nv_diagnostic pop
