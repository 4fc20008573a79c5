// Toy family, host part: the smallest module that exercises the whole JIT lifecycle.
// Framework-free (R3.1, R3.2): raw pointers only; no torch or tvm-ffi headers here.
#pragma once

#include <cstdint>

namespace ember {
namespace toy {

// out[i] = a[i] + alpha * b[i]
template <typename T>
inline void axpy_host(const T* a, const T* b, T alpha, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + alpha * b[i];
}

}  // namespace toy
}  // namespace ember
