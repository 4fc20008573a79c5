// RoPE kernels for one dtype, chosen at compile time with -DEMBER_ROPE_DTYPE=<C++ type>. No
// tvm-ffi headers here: the binding (rope.cc) is its own translation unit.
#include "ember/rope.cuh"

#ifndef EMBER_ROPE_DTYPE
#error "compile with -DEMBER_ROPE_DTYPE=float|ember::half|ember::bfloat16"
#endif

namespace ember {
namespace rope {

cudaError_t run(const Params& p, cudaStream_t stream) {
  return launch<EMBER_ROPE_DTYPE>(p, stream);
}

}  // namespace rope
}  // namespace ember
