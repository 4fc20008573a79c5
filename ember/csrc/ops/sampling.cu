// Sampling-family kernels for one logits dtype, chosen at compile time with
// -DEMBER_SAMPLING_DTYPE=<C++ type>. No tvm-ffi headers here: the binding is sampling.cc.
#include "ember/softmax.cuh"

#ifndef EMBER_SAMPLING_DTYPE
#error "compile with -DEMBER_SAMPLING_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace sampling {

cudaError_t softmax(const SoftmaxParams& p, cudaStream_t stream) {
  return launch_softmax<EMBER_SAMPLING_DTYPE>(p, stream);
}

int64_t softmax_workspace_words(int64_t rows, int64_t vocab) {
  return grid_workspace_words(rows, vocab);
}

// NOTE: the filter instances live in four more translation units, one a mode
// (sampling_filter_{logits,mask,probs,renorm}.cu), so that ninja compiles them in parallel with
// this one: the fp32 module's 10 cluster kernels in one unit took 14.6 s to build cold on the
// H200 host, and two units of two modes each 15.99 s once the stream kernels joined them
// (target 15).
cudaError_t filter(const FilterParams& p, FilterMode mode, cudaStream_t stream) {
  switch (mode) {
    case kSampleLogits:
      return filter_sample_logits(p, stream);
    case kMaskLogits:
      return filter_mask_logits(p, stream);
    case kSampleProbs:
      return filter_sample_probs(p, stream);
    case kRenormProbs:
      return filter_renorm_probs(p, stream);
  }
  return cudaErrorNotSupported;
}

}  // namespace sampling
}  // namespace ember
