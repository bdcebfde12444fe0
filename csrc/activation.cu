// TVM-FFI launchers of the activation family: GLU and Swish (SiLU).
#include <oasr/activation.cuh>

#include "tvm_ffi_utils.h"

// output [rows, C] = input[:, :C] * sigmoid(input[:, C:2C]); input a [rows, 2C] view and
// output a [rows, C] view, both with a contiguous last dimension and any row stride.
void glu(TensorView output, TensorView input) {
  CHECK_CUDA(input);
  CHECK_CUDA(output);
  CHECK_DEVICE(output, input);
  CHECK_SAME_DTYPE(output, input);
  CHECK_DIM(2, input);
  CHECK_DIM(2, output);
  CHECK_LAST_DIM_CONTIGUOUS(input);
  CHECK_LAST_DIM_CONTIGUOUS(output);
  const int64_t rows = input.size(0), in_cols = input.size(1);
  if (in_cols % 2 != 0) {
    TVM_FFI_THROW(ValueError) << "`input` last dimension must be even (the two GLU halves), got " << in_cols;
  }
  const int64_t cols = in_cols / 2;
  if (output.size(0) != rows || output.size(1) != cols) {
    TVM_FFI_THROW(ValueError) << "`output` must have shape [" << rows << ", " << cols << "], got ["
                              << output.size(0) << ", " << output.size(1) << "]";
  }
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::activation::GLU<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                       rows, cols, input.stride(0), output.stride(0), stream);
    CHECK_CUDA_SUCCESS(status, "glu kernel launch");
    return true;
  });
}

// output = input * sigmoid(input), element-wise over contiguous tensors of equal size.
void swish(TensorView output, TensorView input) {
  CHECK_INPUT(input);
  CHECK_INPUT(output);
  CHECK_DEVICE(output, input);
  CHECK_SAME_DTYPE(output, input);
  if (output.numel() != input.numel()) {
    TVM_FFI_THROW(ValueError) << "`output` has " << output.numel() << " elements, `input` has " << input.numel();
  }
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::activation::Swish<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                         input.numel(), stream);
    CHECK_CUDA_SUCCESS(status, "swish kernel launch");
    return true;
  });
}
