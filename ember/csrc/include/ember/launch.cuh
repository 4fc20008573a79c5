// Launching kernels: programmatic dependent launch (PDL) on the device side, and one host-side
// launcher every family uses. Framework-free (R3.1, R3.2): CUDA runtime and driver types only.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {

// Programmatic dependent launch (sm_90+, PTX "griddepcontrol"): launched with the
// programmatic-stream-serialization attribute, a kernel may start while the previous kernel on
// the stream finishes; `wait` blocks until that kernel's writes are visible, so it comes before
// the first load. `launch_dependents` lets the next such kernel start its own prologue.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Kernels launch through cuLaunchKernelEx, reached through the runtime's driver entry point (no
// link against libcuda), with each kernel's CUfunction looked up once per device: 0.15 us less
// host time per call than cudaLaunchKernelEx (H200 host; docs/perf/notes/norm.md, v4). Where the
// entry point is unavailable the runtime launch is used. `pdl` adds the programmatic-stream-
// serialization attribute (sm_90+ devices).
using LaunchKernelExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
inline LaunchKernelExFn driver_launch_kernel_ex() {
  static const LaunchKernelExFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<LaunchKernelExFn>(nullptr);
    }
    return reinterpret_cast<LaunchKernelExFn>(p);
  }();
  return fn;
}

#ifndef EMBER_DRIVER_LAUNCH
#define EMBER_DRIVER_LAUNCH 1  // NOTE: a switch for the variant sweep (tools/norm_probe.py)
#endif

// Dynamic shared memory above the 48 KiB default needs a per-kernel opt-in; `smem` is the most
// a kernel is ever launched with (one value per kernel), set once per device.
constexpr size_t kDefaultMaxDynamicSmem = 48 << 10;
template <auto Kernel>
cudaError_t allow_dynamic_smem(size_t smem) {
  if (smem <= kDefaultMaxDynamicSmem) return cudaSuccess;
  return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem));
}

// A runtime-API launch with at most one launch attribute (`attr`, or none when null), after the
// dynamic shared memory opt-in.
template <auto Kernel, typename... Args>
cudaError_t runtime_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           cudaLaunchAttribute* attr, Args... args) {
  if (const cudaError_t err = allow_dynamic_smem<Kernel>(smem); err != cudaSuccess) return err;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = attr != nullptr ? 1 : 0;
  return cudaLaunchKernelEx(&config, Kernel, args...);
}

// NOTE: the kernel is a template argument so each kernel gets its own CUfunction cache.
// `device` is the current device (the caller's guard made it so; no query per launch). `smem`:
// dynamic shared memory bytes per block.
template <auto Kernel, typename... Args>
cudaError_t launch_kernel(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                          int device, Args... args) {
  constexpr int kMaxDevices = 64;
  static CUfunction funcs[kMaxDevices] = {};
  static size_t opted_smem[kMaxDevices] = {};  // the dynamic shared memory allowed so far
  const LaunchKernelExFn launch = EMBER_DRIVER_LAUNCH ? driver_launch_kernel_ex() : nullptr;
  if (launch != nullptr && device >= 0 && device < kMaxDevices) {
    if (funcs[device] == nullptr) {
      cudaFunction_t f = nullptr;
      const cudaError_t err = cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(Kernel));
      if (err != cudaSuccess) return err;
      funcs[device] = reinterpret_cast<CUfunction>(f);
    }
    // NOTE: a kernel whose shared memory depends on the problem (e.g. softmax's row chunk) may
    // need more than any earlier launch: the opt-in follows the largest request.
    if (smem > opted_smem[device]) {
      if (const cudaError_t err = allow_dynamic_smem<Kernel>(smem); err != cudaSuccess) return err;
      opted_smem[device] = smem;
    }
    CUlaunchAttribute attr[1];
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block.x;
    config.blockDimY = block.y;
    config.blockDimZ = block.z;
    config.sharedMemBytes = static_cast<unsigned>(smem);
    config.hStream = reinterpret_cast<CUstream>(stream);
    config.attrs = attr;
    config.numAttrs = pdl ? 1 : 0;
    void* params[] = {static_cast<void*>(&args)...};
    return static_cast<cudaError_t>(launch(&config, funcs[device], params, nullptr));
  }
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return runtime_launch<Kernel>(grid, block, smem, stream, pdl ? &attr : nullptr, args...);
}

// A cooperative launch: every CTA of the grid is resident at once, or the launch fails
// (cudaErrorCooperativeLaunchTooLarge) instead of starting; for kernels whose CTAs wait on each
// other through global memory. No programmatic dependent launch.
template <auto Kernel, typename... Args>
cudaError_t launch_cooperative(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               Args... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  return runtime_launch<Kernel>(grid, block, smem, stream, &attr, args...);
}

}  // namespace ember

#pragma nv_diagnostic pop
