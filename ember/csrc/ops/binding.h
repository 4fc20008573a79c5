// Binding-layer helpers: tensor validation that raises the right Python exception (R3.3).
// Only launchers in csrc/ops include this; device headers never see tvm-ffi (R3.2, R8.2).
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <sstream>
#include <string>

namespace ember {
namespace binding {

inline std::string shape_str(const tvm::ffi::TensorView& t) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < t.ndim(); ++i) os << (i ? ", " : "") << t.shape()[i];
  os << "]";
  return os.str();
}

inline std::string dtype_str(DLDataType d) {
  const char* kind = d.code == kDLFloat    ? "float"
                     : d.code == kDLBfloat ? "bfloat"
                     : d.code == kDLInt    ? "int"
                     : d.code == kDLUInt   ? "uint"
                                           : "dtype";
  std::ostringstream os;
  os << kind << static_cast<int>(d.bits);
  if (d.lanes != 1) os << "x" << d.lanes;
  return os.str();
}

inline void expect_dtype(const char* fn, const char* arg, const tvm::ffi::TensorView& t,
                         DLDataType want) {
  const DLDataType got = t.dtype();
  if (got.code != want.code || got.bits != want.bits || got.lanes != want.lanes) {
    TVM_FFI_THROW(TypeError) << fn << ": `" << arg << "` must have dtype " << dtype_str(want)
                             << ", got " << dtype_str(got);
  }
}

inline void expect_ndim(const char* fn, const char* arg, const tvm::ffi::TensorView& t, int ndim) {
  if (t.ndim() != ndim) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must be " << ndim << "-D, got shape "
                              << shape_str(t);
  }
}

inline void expect_same_shape(const char* fn, const char* arg, const tvm::ffi::TensorView& t,
                              const char* ref_arg, const tvm::ffi::TensorView& ref) {
  bool same = t.ndim() == ref.ndim();
  for (int i = 0; same && i < t.ndim(); ++i) same = t.shape()[i] == ref.shape()[i];
  if (!same) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must have the shape of `" << ref_arg
                              << "` " << shape_str(ref) << ", got " << shape_str(t);
  }
}

inline void expect_contiguous(const char* fn, const char* arg, const tvm::ffi::TensorView& t) {
  if (!t.IsContiguous()) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must be contiguous";
  }
}

inline void expect_device(const char* fn, const char* arg, const tvm::ffi::TensorView& t,
                          DLDeviceType want, const char* want_name) {
  if (t.device().device_type != want) {
    const int got = static_cast<int>(t.device().device_type);
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must be on " << want_name << ", got "
                              << (got == kDLCPU    ? "cpu"
                                  : got == kDLCUDA ? "cuda"
                                                   : "device type " + std::to_string(got));
  }
}

inline void expect_same_device(const char* fn, const char* arg, const tvm::ffi::TensorView& t,
                               const char* ref_arg, const tvm::ffi::TensorView& ref) {
  if (t.device().device_type != ref.device().device_type ||
      t.device().device_id != ref.device().device_id) {
    TVM_FFI_THROW(ValueError) << fn << ": `" << arg << "` must be on the device of `" << ref_arg
                              << "`";
  }
}

// The first element's address: DLPack's data pointer plus its byte offset (always use this, never
// data_ptr() alone: a producer may hand over a nonzero byte_offset).
inline void* data(const tvm::ffi::TensorView& t) {
  return static_cast<char*>(t.data_ptr()) + t.byte_offset();
}

}  // namespace binding
}  // namespace ember
