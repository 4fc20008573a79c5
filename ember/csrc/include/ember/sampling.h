// Sampling family: what the binding (sampling.cc) and the kernel unit (sampling.cu) share.
// Framework-free (R3.1): raw pointers, strides in elements, cudaStream_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember {
namespace sampling {

struct SoftmaxParams {
  const void* logits;  // [rows, vocab], last dimension contiguous
  int64_t logits_row_stride;
  float* probs;  // [rows, vocab] fp32
  int64_t probs_row_stride;
  const float* temperature;  // [rows], or null: `scalar_temperature` for every row
  float scalar_temperature;
  int64_t rows;
  int64_t vocab;
  int chunk;  // elements of a row per CTA of its cluster (a multiple of 8)
  bool vec;   // 16-byte loads of the logits (aligned rows)
  bool pdl;
  int device;
};

// CTAs per row: a thread-block cluster whose shared memories together hold the row.
constexpr int kSoftmaxCluster = 8;

cudaError_t softmax(const SoftmaxParams& p, cudaStream_t stream);

struct SampleParams {
  const float* probs;  // [rows, vocab] fp32, non-negative (need not sum to 1)
  int64_t probs_row_stride;
  int32_t* samples;  // [rows]
  int64_t rows;
  int64_t vocab;
  int chunk;              // elements of a row per CTA of its cluster (a multiple of 8)
  bool vec;               // 16-byte loads (aligned rows)
  uint64_t seed, offset;  // Philox4x32-10 key and counter: draw `offset` of stream `row`
  bool pdl;
  int device;
};

// One token per row, index i drawn with probability probs[i] / sum(probs): inverse-CDF sampling
// over the row held in a cluster's shared memory; reproducible for a given (seed, offset).
cudaError_t sample(const SampleParams& p, cudaStream_t stream);

}  // namespace sampling
}  // namespace ember
