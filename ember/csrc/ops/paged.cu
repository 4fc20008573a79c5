// Attention utilities: the paged-cache append (rows copied as bytes, any dtype) and the merge of
// attention states (fp32, fp16, bf16).
#include "ember/paged.cuh"

namespace ember {
namespace paged {

cudaError_t run_append(const AppendParams& p, cudaStream_t stream) { return append(p, stream); }

cudaError_t run_merge_states(const MergeParams& p, int dtype, cudaStream_t stream) {
  switch (dtype) {
    case 0:
      return merge_states<float>(p, stream);
    case 1:
      return merge_states<half>(p, stream);
    case 2:
      return merge_states<bfloat16>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace paged
}  // namespace ember
