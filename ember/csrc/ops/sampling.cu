// Sampling-family kernels for one logits dtype, chosen at compile time with
// -DEMBER_SAMPLING_DTYPE=<C++ type>. No tvm-ffi headers here: the binding is sampling.cc.
#include "ember/sampling.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t softmax(const SoftmaxParams& p, cudaStream_t stream) {
  return launch_softmax<EMBER_SAMPLING_DTYPE>(p, stream);
}

// NOTE: the filter instances live in two more translation units (sampling_filter_logits.cu,
// sampling_filter_probs.cu) so that ninja compiles them in parallel with this one: the fp32
// module's 10 cluster kernels in one unit took 14.6 s to build cold on the H200 host (target 15).
cudaError_t filter(const FilterParams& p, FilterMode mode, cudaStream_t stream) {
  if (mode == kSampleLogits || mode == kMaskLogits) return filter_logits(p, mode, stream);
  return filter_probs(p, mode, stream);
}

}  // namespace sampling
}  // namespace ember
