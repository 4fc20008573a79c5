// RMSNorm kernels for one dtype, chosen at compile time with -DEMBER_NORM_DTYPE=<C++ type>.
// No tvm-ffi headers here: the binding (norm.cc) is its own translation unit, and the two kernel
// units compile in parallel with it.
#include "norm_legacy.cuh"  // NOTE: the kernels of commit 45a1708, for A/B runs

#ifndef EMBER_NORM_DTYPE
#error "compile with -DEMBER_NORM_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace norm {

using T = EMBER_NORM_DTYPE;

cudaError_t rmsnorm(const void* x, RowLayout x_layout, const void* weight, void* out,
                    RowLayout out_layout, const Problem& p, const LaunchPlan& lp,
                    cudaStream_t stream) {
  Rows<const T> xs{static_cast<const T*>(x), x_layout};
  Rows<T> os{static_cast<T*>(out), out_layout};
  return launch<T, false>(xs, Rows<T>{nullptr, {0, 0}}, static_cast<const T*>(weight), os, p, lp,
                          stream);
}

}  // namespace norm
}  // namespace ember
