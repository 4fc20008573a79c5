// Gated-activation kernels for one dtype, chosen at compile time with -DEMBER_ACT_DTYPE=<C++
// type>. No tvm-ffi headers here: the binding (act.cc) is its own translation unit.
#include "ember/act.cuh"

#ifndef EMBER_ACT_DTYPE
#error "compile with -DEMBER_ACT_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace act {

cudaError_t run(const Params& p, int op, cudaStream_t stream) {
  using T = EMBER_ACT_DTYPE;
  switch (op) {
    case kSilu:
      return launch<T, kSilu>(p, stream);
    case kGelu:
      return launch<T, kGelu>(p, stream);
    case kGeluTanh:
      return launch<T, kGeluTanh>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace act
}  // namespace ember
