// TVM-FFI launchers of the activation family: GLU, Swish (SiLU) and bias + activation.
// The Python API (oasr/activation.py) validates the arguments and passes the layouts these take (row views for GLU,
// contiguous tensors for Swish); these derive the kernels' parameters.
#include <oasr/activation.cuh>

#include "tvm_ffi_utils.h"

// output [..., C] = input[..., :C] * sigmoid(input[..., C:2C]); both row views (last dimension contiguous, leading
// dimensions collapsible into one row dimension of any stride).
void glu(TensorView output, TensorView input) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  const Rows in = icheck_rows(input, "input"), out = icheck_rows(output, "output");
  TVM_FFI_ICHECK(out.rows == in.rows && 2 * out.cols == in.cols)
      << "`output` has " << out.rows << " rows of " << out.cols << ", expected " << in.rows << " rows of "
      << in.cols / 2;
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    CHECK_CUDA_SUCCESS(oasr::activation::GLU<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output), in.rows,
                                                     out.cols, in.stride, out.stride, stream),
                       "glu kernel launch");
  });
}

// output = input * sigmoid(input), element-wise, both contiguous.
void swish(TensorView output, TensorView input) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  TVM_FFI_ICHECK(output.numel() == input.numel()) << "`output` and `input` must have as many elements";
  TVM_FFI_ICHECK(input.IsContiguous() && output.IsContiguous()) << "`input` and `output` must be contiguous";
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    CHECK_CUDA_SUCCESS(oasr::activation::Swish<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                                       input.numel(), stream),
                       "swish kernel launch");
  });
}

// output [..., C] = act(input + bias), both row views (output may be input); bias [C] contiguous or absent.
void bias_activation(TensorView output, TensorView input, Optional bias, OptionalName activation) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  const Rows in = icheck_rows(input, "input"), out = icheck_rows(output, "output");
  TVM_FFI_ICHECK(out.rows == in.rows && out.cols == in.cols)
      << "`output` has " << out.rows << " rows of " << out.cols << ", expected " << in.rows << " rows of " << in.cols;
  if (bias.has_value()) {
    icheck_like(bias.value(), input, "bias");
    TVM_FFI_ICHECK(bias.value().numel() == in.cols && bias.value().IsContiguous()) << "`bias` must be [C], contiguous";
  }
  const oasr::Activation act =
      activation_from_name(activation, {oasr::Activation::kSilu, oasr::Activation::kRelu, oasr::Activation::kGelu,
                                        oasr::Activation::kGeluTanh});
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    const c_type* b = bias.has_value() ? data_ptr<const c_type>(bias.value()) : nullptr;
    CHECK_CUDA_SUCCESS(oasr::activation::BiasActivation<c_type>(data_ptr<const c_type>(input), b,
                                                                data_ptr<c_type>(output), in.rows, in.cols, in.stride,
                                                                out.stride, act, stream),
                       "bias_activation kernel launch");
  });
}
