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
  // NOTE: the A/B switches' fields last, so the default kernels' parameter offsets stay put
  // softmax_grid_kernel's workspace (softmax_workspace_words, any contents), or null
  uint32_t* grid_ws;
};

// CTAs per row: a thread-block cluster whose shared memories together hold the row.
constexpr int kSoftmaxCluster = 8;

cudaError_t softmax(const SoftmaxParams& p, cudaStream_t stream);
// 32-bit words of workspace (any contents) `softmax` takes for `rows` rows of `vocab`
// (SoftmaxParams::grid_ws; 0: none, the build does not use softmax_grid_kernel for them).
int64_t softmax_workspace_words(int64_t rows, int64_t vocab);

// What a filter launch does with a row (one kernel template, one instance per mode).
enum FilterMode : int {
  kSampleProbs = 0,   // one token from probabilities
  kSampleLogits = 1,  // one token from softmax(logits / temperature)
  kRenormProbs = 2,   // the kept probabilities, renormalised to sum to 1
  kMaskLogits = 3,    // the kept logits, the rest -inf (top-k only)
};

struct FilterParams {
  const void* in;  // [rows, vocab] probabilities (fp32) or logits (the module's dtype)
  int64_t in_row_stride;
  void* out;  // kRenormProbs: fp32 [rows, vocab]; kMaskLogits: logits dtype [rows, vocab]
  int64_t out_row_stride;
  int32_t* samples;  // sampling modes: [rows]
  int64_t rows;
  int64_t vocab;
  int chunk;                 // elements of a row per CTA of its cluster (a multiple of 8)
  bool vec;                  // 16-byte loads (aligned rows)
  const float* temperature;  // kSampleLogits: [rows], or null: `scalar_temperature`
  float scalar_temperature;
  // Filters, each per row ([rows] tensor) or, where the pointer is null, one scalar; a value
  // outside the filter's range turns it off for that row: top_k <= 0 or >= vocab, top_p >= 1
  // (or NaN), min_p <= 0 (or NaN).
  const int32_t* top_k;
  int32_t scalar_top_k;
  const float* top_p;
  float scalar_top_p;
  const float* min_p;
  float scalar_min_p;
  uint64_t seed, offset;  // Philox4x32-10 key and counter: draw `offset` of stream `row`
  bool pdl;
  int device;
  // kSampleProbs, set by the launcher only: filter_kernel samples just the rows that
  // filter_stream_kernel marked kStreamFallback (it left the others' samples final);
  // filter_marked_kernel always does.
  bool only_marked;
};

// What filter_stream_kernel writes for a row it leaves to the cluster kernels.
constexpr int32_t kStreamFallback = INT32_MIN;

// Sampling modes: one token per row, index i drawn with probability proportional to its value
// among the kept elements (inverse CDF in index order over the row held in a cluster's shared
// memory, or over the candidates filter_stream_kernel keeps;
// reproducible for a given (seed, offset)).
cudaError_t filter(const FilterParams& p, FilterMode mode, cudaStream_t stream);
// `filter` by mode, one translation unit each (built in parallel).
cudaError_t filter_sample_logits(const FilterParams& p, cudaStream_t stream);
cudaError_t filter_mask_logits(const FilterParams& p, cudaStream_t stream);
cudaError_t filter_sample_probs(const FilterParams& p, cudaStream_t stream);
cudaError_t filter_renorm_probs(const FilterParams& p, cudaStream_t stream);

}  // namespace sampling
}  // namespace ember
