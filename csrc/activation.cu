// TVM-FFI launchers of the activation family: GLU and Swish (SiLU).
// The Python API (oasr/activation.py) validates the arguments; these derive the kernels' parameters.
#include <oasr/activation.cuh>

#include "tvm_ffi_utils.h"

// output [..., C] = input[..., :C] * sigmoid(input[..., C:2C]). False, launching nothing,
// when a tensor is not a row view (last dimension contiguous, leading dimensions collapsible
// into one row dimension of any stride): the caller copies it.
bool glu(TensorView output, TensorView input) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  int64_t rows = 0, in_cols = 0, in_stride = 0, out_rows = 0, cols = 0, out_stride = 0;
  if (!as_rows(input, rows, in_cols, in_stride) || !as_rows(output, out_rows, cols, out_stride)) return false;
  TVM_FFI_ICHECK(out_rows == rows && 2 * cols == in_cols)
      << "`output` has " << out_rows << " rows of " << cols << ", expected " << rows << " rows of " << in_cols / 2;
  cudaStream_t stream = get_stream(input.device());
  return DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::activation::GLU<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                       rows, cols, in_stride, out_stride, stream);
    CHECK_CUDA_SUCCESS(status, "glu kernel launch");
    return true;
  });
}

// output = input * sigmoid(input), element-wise. False, launching nothing, when a tensor is
// not contiguous (the caller copies it).
bool swish(TensorView output, TensorView input) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  TVM_FFI_ICHECK(output.numel() == input.numel()) << "`output` and `input` must have as many elements";
  if (!input.IsContiguous() || !output.IsContiguous()) return false;
  cudaStream_t stream = get_stream(input.device());
  return DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::activation::Swish<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                         input.numel(), stream);
    CHECK_CUDA_SUCCESS(status, "swish kernel launch");
    return true;
  });
}
