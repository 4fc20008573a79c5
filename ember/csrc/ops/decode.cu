// Decode kernels for one specialization, chosen at compile time (ember/ops/decode.py):
// -DEMBER_DECODE_QTYPE, -DEMBER_DECODE_KVTYPE (C++ storage types), -DEMBER_DECODE_HEAD_DIM,
// -DEMBER_DECODE_GROUP. No tvm-ffi headers (the binding decode.cc is its own unit).
#include <type_traits>

#include "ember/decode_tc.cuh"

#if !defined(EMBER_DECODE_QTYPE) || !defined(EMBER_DECODE_KVTYPE) || \
    !defined(EMBER_DECODE_HEAD_DIM) || !defined(EMBER_DECODE_GROUP)
#error "compile with -DEMBER_DECODE_{QTYPE,KVTYPE,HEAD_DIM,GROUP}"
#endif

#ifndef EMBER_DECODE_TC
#define EMBER_DECODE_TC 1  // NOTE: 0 forces the CUDA-core kernel (A/B probes)
#endif

namespace ember {
namespace decode {

cudaError_t run(const Params& p, cudaStream_t stream) {
  using Q = EMBER_DECODE_QTYPE;
  using KV = EMBER_DECODE_KVTYPE;
  constexpr int D = EMBER_DECODE_HEAD_DIM;
  constexpr int G = EMBER_DECODE_GROUP;
  // Tensor cores at head_dim 64 or 128 (fp8 K/V converted to q's type in shared memory);
  // CUDA cores at 256.
  if constexpr (EMBER_DECODE_TC && (D == 64 || D == 128)) {
    return tc::launch<Q, KV, D, G>(p, stream);
  } else {
    return launch<Q, KV, D, G>(p, stream);
  }
}

int ctas_per_sm(int device) {
  using Q = EMBER_DECODE_QTYPE;
  using KV = EMBER_DECODE_KVTYPE;
  constexpr int D = EMBER_DECODE_HEAD_DIM;
  constexpr int G = EMBER_DECODE_GROUP;
  if constexpr (EMBER_DECODE_TC && (D == 64 || D == 128)) {
    return tc::ctas_per_sm<Q, KV, D, G>(device);
  } else {
    return ctas_per_sm<Q, KV, D, G>();
  }
}

}  // namespace decode
}  // namespace ember
