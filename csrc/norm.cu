// TVM-FFI launchers of the norm family: LayerNorm, RMSNorm and their fused residual forms.
// The Python API (oasr/norm.py) validates the arguments; these derive the kernel's parameters.
//
// Tensors are row views [..., C]: the last dimension contiguous, the leading dimensions
// collapsible into one row dimension of any stride (contiguous tensors, x[..., :C] slices).
// weight and bias are contiguous [C] vectors. A launcher returns false, launching nothing,
// when a tensor is not laid out so; the Python API then copies it.
#include <oasr/norm.cuh>

#include "tvm_ffi_utils.h"

namespace {

struct Rows {
  int64_t rows = 0, cols = 0, stride = 0;
};

// A row view of `in`'s rows and columns (an internal invariant); false when `t` is not a row view.
bool rows_like(TensorView t, const char* name, TensorView input, const Rows& in, Rows& r) {
  icheck_like(t, input, name);
  if (!as_rows(t, r.rows, r.cols, r.stride)) return false;
  TVM_FFI_ICHECK(r.rows == in.rows && r.cols == in.cols)
      << "`" << name << "` has " << r.rows << " rows of " << r.cols << ", expected " << in.rows << " rows of "
      << in.cols;
  return true;
}

// A contiguous vector of `cols` elements; its size is an internal invariant.
bool contiguous_vector(TensorView t, const char* name, TensorView input, int64_t cols) {
  icheck_like(t, input, name);
  TVM_FFI_ICHECK(t.ndim() == 1 && t.size(0) == cols) << "`" << name << "` must have " << cols << " elements";
  return cols <= 1 || t.stride(0) == 1;
}

bool run_norm(TensorView output, Optional residual_out, TensorView input, Optional residual, TensorView weight,
              Optional bias, double eps, double alpha, bool rms, const char* op) {
  icheck_like(input, input, "input");
  Rows in, out, res, res_out;
  if (!as_rows(input, in.rows, in.cols, in.stride)) return false;
  if (!rows_like(output, "output", input, in, out)) return false;
  if (residual.has_value() && !rows_like(residual.value(), "residual", input, in, res)) return false;
  if (residual_out.has_value()) {
    TVM_FFI_ICHECK(residual.has_value()) << "`residual_out` needs `residual`";
    if (!rows_like(residual_out.value(), "residual_out", input, in, res_out)) return false;
  }
  if (!contiguous_vector(weight, "weight", input, in.cols)) return false;
  if (bias.has_value() && !contiguous_vector(bias.value(), "bias", input, in.cols)) return false;

  cudaStream_t stream = get_stream(input.device());
  return DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
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

bool layer_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps) {
  return run_norm(output, Optional(), input, Optional(), weight, bias, eps, 1.0, false, "layer_norm kernel launch");
}

bool rms_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps) {
  return run_norm(output, Optional(), input, Optional(), weight, bias, eps, 1.0, true, "rms_norm kernel launch");
}

bool add_layer_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                    TensorView weight, Optional bias, double eps, double alpha) {
  return run_norm(output, residual_out, input, Optional(residual), weight, bias, eps, alpha, false,
                  "add_layer_norm kernel launch");
}

bool add_rms_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                  TensorView weight, Optional bias, double eps, double alpha) {
  return run_norm(output, residual_out, input, Optional(residual), weight, bias, eps, alpha, true,
                  "add_rms_norm kernel launch");
}
