// Rotary position embedding: what the binding (rope.cc) and the kernel unit (rope.cu) share.
// Framework-free (R3.1): raw pointers, strides in elements, cudaStream_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember {
namespace rope {

// One of q or k: element (token, head, d) is at base[token * token_stride + head * head_stride
// + d] (d contiguous).
struct Heads {
  const void* in;
  void* out;  // may equal `in` (in place)
  int64_t in_token_stride, in_head_stride;
  int64_t out_token_stride, out_head_stride;
  int heads;
};

struct Params {
  Heads q, k;
  const void* positions;  // [tokens], int32 or int64
  bool positions_i64;
  bool has_cache;        // angles from cos_sin (else computed)
  const float* cos_sin;  // [max_position, rotary_dim]: cos then sin halves
  int64_t cos_sin_rows;  // max_position (positions outside [0, rows) are never read)
  int64_t tokens;
  int head_dim;
  int rotary_dim;   // even, <= head_dim; dims past it are copied (out of place) or left alone
  bool interleave;  // GPT-J pairs (2i, 2i+1); else NeoX pairs (i, i + rotary_dim / 2)
  // Computed frequencies: inv_freq_i = theta^(-2i / rotary_dim) / scale, with Llama-3.1's
  // wavelength-dependent scaling when llama31_factor > 0.
  float theta;
  float inv_scale;
  float llama31_factor, llama31_low, llama31_high, llama31_old_context;
  int vec;  // pairs per thread access: 16 bytes of pairs when aligned, else 1
  bool pdl;
  int device;
};

cudaError_t run(const Params& p, cudaStream_t stream);

}  // namespace rope
}  // namespace ember
