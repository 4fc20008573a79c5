// Sampling-family kernels for one logits dtype, chosen at compile time with
// -DEMBER_SAMPLING_DTYPE=<C++ type>. No tvm-ffi headers here: the binding is sampling.cc.
#include <type_traits>

#include "ember/sampling.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t softmax(const SoftmaxParams& p, cudaStream_t stream) {
  return launch_softmax<EMBER_SAMPLING_DTYPE>(p, stream);
}

// The probability modes read fp32 whatever the module's logits dtype: only the fp32 module has
// them (the Python layer sends probabilities there).
cudaError_t filter(const FilterParams& p, FilterMode mode, cudaStream_t stream) {
  using T = EMBER_SAMPLING_DTYPE;
  if (mode == kSampleLogits) return launch_filter<T, kSampleLogits>(p, stream);
  if (mode == kMaskLogits) return launch_filter<T, kMaskLogits>(p, stream);
  if constexpr (std::is_same_v<T, float>) {
    if (mode == kSampleProbs) return launch_filter<float, kSampleProbs>(p, stream);
    if (mode == kRenormProbs) return launch_filter<float, kRenormProbs>(p, stream);
  }
  return cudaErrorNotSupported;
}

}  // namespace sampling
}  // namespace ember
