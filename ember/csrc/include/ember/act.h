// Gated activations (act(x[..., :d]) * x[..., d:]): what the binding (act.cc) and the kernel unit
// (act.cu) share. Framework-free (R3.1): raw pointers, strides in elements, cudaStream_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember {
namespace act {

enum Op { kSilu = 0, kGelu = 1, kGeluTanh = 2 };

struct Params {
  const void* x;  // [rows, 2 * d]: the gate half, then the up half
  int64_t x_row_stride;
  void* out;  // [rows, d]
  int64_t out_row_stride;
  int64_t rows;
  int64_t d;
  int vec;              // elements per access: 16 bytes when rows and halves are aligned, else 1
  int vecs_per_thread;  // accesses per thread along the row: 1 (small problems) or 4
  bool pdl;
  int device;
};

// Launches act(op) for the dtype the unit was compiled with. Returns the launch error.
cudaError_t run(const Params& p, int op, cudaStream_t stream);

}  // namespace act
}  // namespace ember
