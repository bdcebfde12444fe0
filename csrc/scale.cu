#include <oasr/scale.cuh>

#include "tvm_ffi_utils.h"

void scale_run(TensorView output, TensorView input, double factor) {
  CHECK_INPUT(input);
  CHECK_INPUT(output);
  CHECK_DEVICE(output, input);
  CHECK_SAME_DTYPE(output, input);
  if (output.numel() != input.numel()) {
    TVM_FFI_THROW(ValueError) << "`output` has " << output.numel() << " elements, `input` has "
                              << input.numel();
  }
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::Scale<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                             static_cast<float>(factor), input.numel(), stream);
    CHECK_CUDA_SUCCESS(status, "scale kernel launch");
    return true;
  });
}
