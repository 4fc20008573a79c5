// The paged-cache append kernel (dtype-agnostic: rows are copied as bytes).
#include "ember/paged.cuh"

namespace ember {
namespace paged {

cudaError_t run_append(const AppendParams& p, cudaStream_t stream) { return append(p, stream); }

}  // namespace paged
}  // namespace ember
