// One sampling filter mode a translation unit, so that ninja builds them in parallel
// (sampling.cu's NOTE): sampling from probabilities (kSampleProbs). Built with
// -DEMBER_SAMPLING_DTYPE. Probabilities are fp32 whatever the logits, so only the fp32 module
// instantiates it (the Python layer sends probabilities there).
#include <type_traits>

#include "ember/sampling_filter.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t filter_sample_probs(const FilterParams& p, cudaStream_t stream) {
  if constexpr (std::is_same_v<EMBER_SAMPLING_DTYPE, float>) {
    return launch_filter<float, kSampleProbs>(p, stream);
  }
  return cudaErrorNotSupported;
}

}  // namespace sampling
}  // namespace ember
