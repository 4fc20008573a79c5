// One sampling filter mode a translation unit, so that ninja builds them in parallel
// (sampling.cu's NOTE): sampling from logits (kSampleLogits). Built with -DEMBER_SAMPLING_DTYPE.
#include "ember/sampling_filter.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t filter_sample_logits(const FilterParams& p, cudaStream_t stream) {
  return launch_filter<EMBER_SAMPLING_DTYPE, kSampleLogits>(p, stream);
}

}  // namespace sampling
}  // namespace ember
