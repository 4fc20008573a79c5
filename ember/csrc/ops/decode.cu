// Decode kernels for one specialization, chosen at compile time (ember/ops/decode.py):
// -DEMBER_DECODE_QTYPE, -DEMBER_DECODE_KVTYPE (C++ storage types), -DEMBER_DECODE_HEAD_DIM,
// -DEMBER_DECODE_GROUP. No tvm-ffi headers (the binding decode.cc is its own unit).
#include "ember/decode.cuh"

#if !defined(EMBER_DECODE_QTYPE) || !defined(EMBER_DECODE_KVTYPE) || \
    !defined(EMBER_DECODE_HEAD_DIM) || !defined(EMBER_DECODE_GROUP)
#error \
    "compile with -DEMBER_DECODE_QTYPE -DEMBER_DECODE_KVTYPE -DEMBER_DECODE_HEAD_DIM -DEMBER_DECODE_GROUP"
#endif

namespace ember {
namespace decode {

cudaError_t run(const Params& p, cudaStream_t stream) {
  return launch<EMBER_DECODE_QTYPE, EMBER_DECODE_KVTYPE, EMBER_DECODE_HEAD_DIM, EMBER_DECODE_GROUP>(
      p, stream);
}

}  // namespace decode
}  // namespace ember
