// Sampling-family filter kernels: the probability modes (sampling, renormalisation).
// Probabilities are fp32 whatever the logits, so only the fp32 module instantiates them (the
// Python layer sends probabilities there). Built with sampling.cu's -DEMBER_SAMPLING_DTYPE.
#include <type_traits>

#include "ember/sampling.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t filter_probs(const FilterParams& p, FilterMode mode, cudaStream_t stream) {
  if constexpr (std::is_same_v<EMBER_SAMPLING_DTYPE, float>) {
    if (mode == kSampleProbs) return launch_filter<float, kSampleProbs>(p, stream);
    if (mode == kRenormProbs) return launch_filter<float, kRenormProbs>(p, stream);
  }
  return cudaErrorNotSupported;
}

}  // namespace sampling
}  // namespace ember
