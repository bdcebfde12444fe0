// TVM-FFI launchers of the norm family: LayerNorm, RMSNorm and their fused residual forms.
//
// Tensors are 2-D row views [rows, C] with the last dimension contiguous and any row
// stride (the Python API flattens the leading dimensions). weight and bias are [C],
// contiguous, of the input's dtype.
#include <oasr/norm.cuh>

#include "tvm_ffi_utils.h"

namespace {

// A [rows, C] view with a unit last stride, on `device`, of `dtype`.
void check_rows(TensorView t, const char* name, int64_t rows, int64_t cols, DLDevice device, DLDataType dtype) {
  if (t.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must be a CUDA tensor";
  }
  if (t.device().device_id != device.device_id) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must be on the same device as `input`";
  }
  if (t.dtype() != dtype) {
    TVM_FFI_THROW(TypeError) << "`" << name << "` has dtype " << dtype_name(t.dtype()) << ", expected "
                             << dtype_name(dtype);
  }
  if (t.ndim() != 2 || t.size(0) != rows || t.size(1) != cols) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must have shape [" << rows << ", " << cols << "]";
  }
  if (cols > 1 && t.stride(1) != 1) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must be contiguous in its last dimension";
  }
}

void check_vector(TensorView t, const char* name, int64_t cols, DLDevice device, DLDataType dtype) {
  if (t.device().device_type != kDLCUDA || t.device().device_id != device.device_id) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must be a CUDA tensor on the device of `input`";
  }
  if (t.dtype() != dtype) {
    TVM_FFI_THROW(TypeError) << "`" << name << "` has dtype " << dtype_name(t.dtype()) << ", expected "
                             << dtype_name(dtype) << " (the dtype of `input`)";
  }
  if (t.ndim() != 1 || t.size(0) != cols || (cols > 1 && t.stride(0) != 1)) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` must be a contiguous vector of " << cols << " elements";
  }
}

void run_norm(TensorView output, Optional residual_out, TensorView input, Optional residual, TensorView weight,
              Optional bias, double eps, double alpha, bool rms, const char* op) {
  if (input.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << "`input` must be a CUDA tensor";
  }
  if (input.ndim() != 2) {
    TVM_FFI_THROW(ValueError) << "`input` must be a 2-D [rows, C] view, got " << input.ndim() << " dimensions";
  }
  const DLDevice device = input.device();
  const DLDataType dtype = input.dtype();
  const int64_t rows = input.size(0), cols = input.size(1);
  check_rows(input, "input", rows, cols, device, dtype);
  check_rows(output, "output", rows, cols, device, dtype);
  check_vector(weight, "weight", cols, device, dtype);
  if (bias.has_value()) check_vector(bias.value(), "bias", cols, device, dtype);
  if (residual.has_value()) check_rows(residual.value(), "residual", rows, cols, device, dtype);
  if (residual_out.has_value()) {
    if (!residual.has_value()) TVM_FFI_THROW(ValueError) << "`residual_out` needs `residual`";
    check_rows(residual_out.value(), "residual_out", rows, cols, device, dtype);
  }
  if (!(eps >= 0.0)) TVM_FFI_THROW(ValueError) << "`eps` must be >= 0, got " << eps;

  cudaStream_t stream = get_stream(device);
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(dtype, c_type, [&] {
    oasr::norm::NormParams<c_type> p;
    p.output = data_ptr<c_type>(output);
    p.input = data_ptr<const c_type>(input);
    p.weight = data_ptr<const c_type>(weight);
    p.bias = bias.has_value() ? data_ptr<const c_type>(bias.value()) : nullptr;
    p.rows = rows;
    p.cols = cols;
    p.output_stride = output.stride(0);
    p.input_stride = input.stride(0);
    if (residual.has_value()) {
      p.residual = data_ptr<const c_type>(residual.value());
      p.residual_stride = residual.value().stride(0);
    }
    if (residual_out.has_value()) {
      p.residual_out = data_ptr<c_type>(residual_out.value());
      p.residual_out_stride = residual_out.value().stride(0);
    }
    p.eps = static_cast<float>(eps);
    p.alpha = static_cast<float>(alpha);
    p.rms = rms;
    cudaError_t status = oasr::norm::Norm<c_type>(p, stream);
    CHECK_CUDA_SUCCESS(status, op);
    return true;
  });
}

}  // namespace

void layer_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps) {
  run_norm(output, Optional(), input, Optional(), weight, bias, eps, 1.0, false, "layer_norm kernel launch");
}

void rms_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps) {
  run_norm(output, Optional(), input, Optional(), weight, bias, eps, 1.0, true, "rms_norm kernel launch");
}

void add_layer_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                    TensorView weight, Optional bias, double eps, double alpha) {
  run_norm(output, residual_out, input, Optional(residual), weight, bias, eps, alpha, false,
           "add_layer_norm kernel launch");
}

void add_rms_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                  TensorView weight, Optional bias, double eps, double alpha) {
  run_norm(output, residual_out, input, Optional(residual), weight, bias, eps, alpha, true,
           "add_rms_norm kernel launch");
}
