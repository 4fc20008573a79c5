// Host-side device helpers for bindings: the current-device guard and per-device capability
// lookups. Framework-free: CUDA runtime only (R3.1, R3.2).
#pragma once

#include <cuda_runtime_api.h>

namespace ember {

// Makes `device` current for the launch and restores the caller's device afterwards. NOTE: one
// cudaGetDevice per call (the launch is told the device instead of asking again).
struct DeviceScope {
  int saved = -1;
  bool switched = false;
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved) != cudaSuccess || saved != device) {
      switched = cudaSetDevice(device) == cudaSuccess;
    }
  }
  ~DeviceScope() {
    if (switched && saved >= 0) cudaSetDevice(saved);
  }
};

// Programmatic dependent launch needs compute capability 9.0; looked up once per device.
inline bool supports_pdl(int device) {
  constexpr int kMaxDevices = 64;
  static int cached[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  if (device < 0 || device >= kMaxDevices) return false;
  if (cached[device] == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    cached[device] = major >= 9 ? 2 : 1;
  }
  return cached[device] == 2;
}

}  // namespace ember
