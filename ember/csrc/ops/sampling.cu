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

cudaError_t sample(const SampleParams& p, cudaStream_t stream) { return launch_sample(p, stream); }

}  // namespace sampling
}  // namespace ember
