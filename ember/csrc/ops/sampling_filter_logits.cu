// Sampling-family filter kernels: the logits modes (sampling from logits, top-k masking) for the
// module's dtype. Built with sampling.cu's -DEMBER_SAMPLING_DTYPE.
#include "ember/sampling.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t filter_logits(const FilterParams& p, FilterMode mode, cudaStream_t stream) {
  using T = EMBER_SAMPLING_DTYPE;
  if (mode == kSampleLogits) return launch_filter<T, kSampleLogits>(p, stream);
  if (mode == kMaskLogits) return launch_filter<T, kMaskLogits>(p, stream);
  return cudaErrorNotSupported;
}

}  // namespace sampling
}  // namespace ember
