// TVM-FFI launchers of the norm family: LayerNorm, RMSNorm and their fused residual forms.
//
// Tensors are row views [..., C]: the last dimension contiguous, the leading dimensions
// collapsible into one row dimension of any stride (contiguous tensors, x[..., :C]
// slices; the Python API copies other layouts). weight and bias are [C], contiguous, of
// the input's dtype.
#include <oasr/norm.cuh>

#include "tvm_ffi_utils.h"

namespace {

struct Rows {
  int64_t rows, cols, stride;
};

// A row view on `device` of `dtype` (rows x cols when given); ValueError/TypeError naming it.
Rows check_rows(TensorView t, const char* name, DLDevice device, DLDataType dtype, const Rows* expected) {
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
  Rows r{};
  if (!as_rows(t, r.rows, r.cols, r.stride)) {
    TVM_FFI_THROW(ValueError) << "`" << name
                              << "` must have a contiguous last dimension and evenly strided rows";
  }
  if (expected != nullptr && (r.rows != expected->rows || r.cols != expected->cols)) {
    TVM_FFI_THROW(ValueError) << "`" << name << "` has " << r.rows << " rows of " << r.cols << ", expected "
                              << expected->rows << " rows of " << expected->cols;
  }
  return r;
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
  const DLDevice device = input.device();
  const DLDataType dtype = input.dtype();
  const Rows in = check_rows(input, "input", device, dtype, nullptr);
  const Rows out = check_rows(output, "output", device, dtype, &in);
  check_vector(weight, "weight", in.cols, device, dtype);
  if (bias.has_value()) check_vector(bias.value(), "bias", in.cols, device, dtype);
  Rows res{}, res_out{};
  if (residual.has_value()) res = check_rows(residual.value(), "residual", device, dtype, &in);
  if (residual_out.has_value()) {
    if (!residual.has_value()) TVM_FFI_THROW(ValueError) << "`residual_out` needs `residual`";
    res_out = check_rows(residual_out.value(), "residual_out", device, dtype, &in);
  }
  if (!(eps >= 0.0)) TVM_FFI_THROW(ValueError) << "`eps` must be >= 0, got " << eps;

  cudaStream_t stream = get_stream(device);
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(dtype, c_type, [&] {
    oasr::norm::NormParams<c_type> p;
    p.output = data_ptr<c_type>(output);
    p.input = data_ptr<const c_type>(input);
    p.weight = data_ptr<const c_type>(weight);
    p.bias = bias.has_value() ? data_ptr<const c_type>(bias.value()) : nullptr;
    p.rows = in.rows;
    p.cols = in.cols;
    p.output_stride = out.stride;
    p.input_stride = in.stride;
    if (residual.has_value()) {
      p.residual = data_ptr<const c_type>(residual.value());
      p.residual_stride = res.stride;
    }
    if (residual_out.has_value()) {
      p.residual_out = data_ptr<c_type>(residual_out.value());
      p.residual_out_stride = res_out.stride;
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
