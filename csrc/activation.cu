// TVM-FFI launchers of the activation family: GLU and Swish (SiLU).
#include <oasr/activation.cuh>

#include "tvm_ffi_utils.h"

// output [..., C] = input[..., :C] * sigmoid(input[..., C:2C]). Both tensors are row views:
// the last dimension contiguous, the leading dimensions collapsible into one row dimension
// of any stride.
void glu(TensorView output, TensorView input) {
  CHECK_CUDA(input);
  CHECK_CUDA(output);
  CHECK_DEVICE(output, input);
  CHECK_SAME_DTYPE(output, input);
  int64_t rows = 0, in_cols = 0, in_stride = 0, out_rows = 0, cols = 0, out_stride = 0;
  if (!as_rows(input, rows, in_cols, in_stride)) {
    TVM_FFI_THROW(ValueError) << "`input` must have a contiguous last dimension and evenly strided rows";
  }
  if (!as_rows(output, out_rows, cols, out_stride)) {
    TVM_FFI_THROW(ValueError) << "`output` must have a contiguous last dimension and evenly strided rows";
  }
  if (in_cols % 2 != 0) {
    TVM_FFI_THROW(ValueError) << "`input` last dimension must be even (the two GLU halves), got " << in_cols;
  }
  if (out_rows != rows || cols != in_cols / 2) {
    TVM_FFI_THROW(ValueError) << "`output` has " << out_rows << " rows of " << cols << ", expected " << rows
                              << " rows of " << in_cols / 2;
  }
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::activation::GLU<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                       rows, cols, in_stride, out_stride, stream);
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
