// TVM-FFI glue shared by every launcher in csrc/: type aliases, the launchers' internal
// invariants, dtype dispatch, the caller's CUDA stream and row views. Kernel templates in
// include/oasr/ never include this file: they stay framework-agnostic.
//
// The Python API (oasr/<family>.py) validates every argument before it calls a launcher and
// raises TypeError/ValueError naming it. A launcher only derives the kernel's parameters; what
// it assumes is checked with TVM_FFI_ICHECK (a RuntimeError, for callers that skip the Python
// API), so a bad call never reaches a kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <oasr/common/activation.cuh>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

using TensorView = tvm::ffi::TensorView;
using Optional = tvm::ffi::Optional<tvm::ffi::TensorView>;
using OptionalName = tvm::ffi::Optional<tvm::ffi::String>;

// An activation's name as the Python API passes it (oasr/_checks.py's check_activation has refused unknown ones; an
// op that lacks one says so with `supported`).
inline oasr::Activation activation_from_name(const OptionalName& name,
                                             std::initializer_list<oasr::Activation> supported) {
  oasr::Activation a = oasr::Activation::kNone;
  if (name.has_value()) {
    const tvm::ffi::String held = name.value();  // (value() returns a copy: the view must not outlive it)
    const std::string_view n(held.data(), held.size());
    if (n == "relu") {
      a = oasr::Activation::kRelu;
    } else if (n == "gelu") {
      a = oasr::Activation::kGelu;
    } else if (n == "gelu_tanh") {
      a = oasr::Activation::kGeluTanh;
    } else if (n == "silu") {
      a = oasr::Activation::kSilu;
    } else {
      TVM_FFI_THROW(ValueError) << "unknown activation '" << n << "'";
    }
  }
  bool ok = a == oasr::Activation::kNone;
  for (oasr::Activation s : supported) ok = ok || s == a;
  TVM_FFI_ICHECK(ok) << "this kernel has no activation '" << (name.has_value() ? std::string(name.value()) : "")
                      << "'";
  return a;
}

// Internal invariant: `t` is a CUDA tensor on `input`'s device, of `input`'s dtype.
inline void icheck_like(TensorView t, TensorView input, const char* name) {
  TVM_FFI_ICHECK(t.device().device_type == kDLCUDA && t.device().device_id == input.device().device_id &&
                 t.dtype() == input.dtype())
      << "`" << name << "` must be a CUDA tensor of `input`'s device and dtype (the Python API checks this)";
}

constexpr DLDataType dl_float32{kDLFloat, 32, 1};
constexpr DLDataType dl_float16{kDLFloat, 16, 1};
constexpr DLDataType dl_bfloat16{kDLBfloat, 16, 1};

inline std::string dtype_name(DLDataType dtype) {
  if (dtype == dl_float32) return "float32";
  if (dtype == dl_float16) return "float16";
  if (dtype == dl_bfloat16) return "bfloat16";
  return "dtype(code=" + std::to_string(dtype.code) + ", bits=" + std::to_string(dtype.bits) + ")";
}

// Calls the lambda __VA_ARGS__ with c_type bound to float, half or nv_bfloat16.
#define DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(dlpack_dtype, c_type, ...)                                      \
  [&]() {                                                                                                   \
    if ((dlpack_dtype) == dl_float32) {                                                                     \
      using c_type = float;                                                                                 \
      return __VA_ARGS__();                                                                                 \
    } else if ((dlpack_dtype) == dl_float16) {                                                              \
      using c_type = half;                                                                                  \
      return __VA_ARGS__();                                                                                 \
    } else if ((dlpack_dtype) == dl_bfloat16) {                                                             \
      using c_type = nv_bfloat16;                                                                           \
      return __VA_ARGS__();                                                                                 \
    }                                                                                                       \
    TVM_FFI_THROW(TypeError) << "unsupported dtype " << dtype_name(dlpack_dtype)                            \
                             << "; expected float32, float16 or bfloat16";                                  \
  }()

// Calls the lambda __VA_ARGS__ with c_type bound to half or nv_bfloat16 (the tensor-core families' dtypes).
#define DISPATCH_HALF_TYPES(dlpack_dtype, c_type, ...)                                                      \
  [&]() {                                                                                                   \
    if ((dlpack_dtype) == dl_float16) {                                                                     \
      using c_type = half;                                                                                  \
      return __VA_ARGS__();                                                                                 \
    } else if ((dlpack_dtype) == dl_bfloat16) {                                                             \
      using c_type = nv_bfloat16;                                                                           \
      return __VA_ARGS__();                                                                                 \
    }                                                                                                       \
    TVM_FFI_THROW(TypeError) << "unsupported dtype " << dtype_name(dlpack_dtype)                            \
                             << "; expected float16 or bfloat16";                                           \
  }()

// The stream tvm-ffi set for this call: torch's current stream of the first CUDA tensor.
inline cudaStream_t get_stream(DLDevice device) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
}

// The first element, with DLPack's byte_offset applied.
template <typename T>
inline T* data_ptr(TensorView x) {
  return reinterpret_cast<T*>(static_cast<char*>(x.data_ptr()) + x.byte_offset());
}

// A rows x cols view: the last dimension contiguous and the leading dimensions collapsible into one evenly
// strided dimension (contiguous tensors, x[..., :C] slices), `stride` elements from row to row.
struct Rows {
  int64_t rows = 0, cols = 0, stride = 0;
};

// Internal invariant: `t` is such a view (oasr/_layouts.py makes every other layout one).
inline Rows icheck_rows(TensorView t, const char* name) {
  const int nd = static_cast<int>(t.ndim());
  TVM_FFI_ICHECK(nd >= 1) << "`" << name << "` must have at least one dimension";
  Rows r;
  r.cols = t.size(nd - 1);
  TVM_FFI_ICHECK(r.cols <= 1 || t.stride(nd - 1) == 1) << "`" << name << "`'s last dimension must be contiguous";
  r.rows = 1;
  for (int i = 0; i < nd - 1; ++i) r.rows *= t.size(i);
  r.stride = r.cols;
  if (r.rows == 0 || r.cols == 0) return r;  // nothing is addressed
  int inner = -1;  // the innermost leading dimension of size > 1
  for (int i = nd - 2; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (inner < 0) {
      r.stride = t.stride(i);
    } else {
      TVM_FFI_ICHECK(t.stride(i) == t.stride(inner) * t.size(inner))
          << "`" << name << "`'s leading dimensions must collapse into one row dimension";
    }
    inner = i;
  }
  return r;
}

#define CHECK_CUDA_SUCCESS(status, what)                                                \
  TVM_FFI_ICHECK((status) == cudaSuccess) << what << " failed: " << cudaGetErrorString(status)
