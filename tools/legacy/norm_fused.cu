// Fused add + RMSNorm kernels for one dtype, chosen at compile time with -DEMBER_NORM_DTYPE=<C++
// type>. No tvm-ffi headers here: the binding (norm.cc) is its own translation unit, and the two
// kernel units compile in parallel with it.
#include "norm_legacy.cuh"  // NOTE: the kernels of commit 45a1708, for A/B runs

#ifndef EMBER_NORM_DTYPE
#error "compile with -DEMBER_NORM_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace norm {

using T = EMBER_NORM_DTYPE;

cudaError_t fused_add_rmsnorm(void* x, RowLayout x_layout, void* residual,
                              RowLayout residual_layout, const void* weight, const Problem& p,
                              const LaunchPlan& lp, cudaStream_t stream) {
  Rows<const T> xs{static_cast<const T*>(x), x_layout};
  Rows<T> rs{static_cast<T*>(residual), residual_layout};
  Rows<T> os{static_cast<T*>(x), x_layout};
  return launch<T, true>(xs, rs, static_cast<const T*>(weight), os, p, lp, stream);
}

}  // namespace norm
}  // namespace ember
