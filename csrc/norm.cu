// TVM-FFI launchers of the norm family: LayerNorm, RMSNorm and their fused residual forms.
// The Python API (oasr/norm.py) validates the arguments; these derive the kernel's parameters.
//
// Tensors are row views [..., C]: the last dimension contiguous, the leading dimensions collapsible into one row
// dimension of any stride (contiguous tensors, x[..., :C] slices); weight and bias are contiguous [C] vectors. The
// Python API passes every other layout as such views or copies.
#include <oasr/norm.cuh>

#include "tvm_ffi_utils.h"

namespace {

// A row view of `input`'s rows and columns (an internal invariant).
Rows icheck_rows_like(TensorView t, const char* name, TensorView input, const Rows& in) {
  icheck_like(t, input, name);
  const Rows r = icheck_rows(t, name);
  TVM_FFI_ICHECK(r.rows == in.rows && r.cols == in.cols)
      << "`" << name << "` has " << r.rows << " rows of " << r.cols << ", expected " << in.rows << " rows of "
      << in.cols;
  return r;
}

// A contiguous vector of `cols` elements (an internal invariant).
void icheck_vector(TensorView t, const char* name, TensorView input, int64_t cols) {
  icheck_like(t, input, name);
  TVM_FFI_ICHECK(t.ndim() == 1 && t.size(0) == cols && (cols <= 1 || t.stride(0) == 1))
      << "`" << name << "` must be a contiguous vector of " << cols << " elements";
}

void run_norm(TensorView output, Optional residual_out, TensorView input, Optional residual, TensorView weight,
              Optional bias, double eps, double alpha, bool rms, const char* op) {
  icheck_like(input, input, "input");
  const Rows in = icheck_rows(input, "input");
  const Rows out = icheck_rows_like(output, "output", input, in);
  Rows res, res_out;
  if (residual.has_value()) res = icheck_rows_like(residual.value(), "residual", input, in);
  if (residual_out.has_value()) {
    TVM_FFI_ICHECK(residual.has_value()) << "`residual_out` needs `residual`";
    res_out = icheck_rows_like(residual_out.value(), "residual_out", input, in);
  }
  icheck_vector(weight, "weight", input, in.cols);
  if (bias.has_value()) icheck_vector(bias.value(), "bias", input, in.cols);

  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
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
    CHECK_CUDA_SUCCESS(oasr::norm::Norm<c_type>(p, stream), op);
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
