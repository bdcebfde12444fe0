// TVM-FFI launcher of the scale family: output = input * factor.
// The Python API (oasr/scale.py) validates the arguments and passes contiguous tensors; this derives the kernel's
// parameters.
#include <oasr/scale.cuh>

#include "tvm_ffi_utils.h"

void scale(TensorView output, TensorView input, double factor) {
  icheck_like(input, input, "input");
  icheck_like(output, input, "output");
  TVM_FFI_ICHECK(output.numel() == input.numel()) << "`output` and `input` must have as many elements";
  TVM_FFI_ICHECK(input.IsContiguous() && output.IsContiguous()) << "`input` and `output` must be contiguous";
  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    cudaError_t status = oasr::Scale<c_type>(data_ptr<const c_type>(input), data_ptr<c_type>(output),
                                             static_cast<float>(factor), input.numel(), stream);
    CHECK_CUDA_SUCCESS(status, "scale kernel launch");
    return true;
  });
}
