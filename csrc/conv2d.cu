// TVM-FFI launchers of the conv2d family: the direct NHWC convolution (few input channels), the fused
// Conv2dSubsampling front end and, in a module built for one CUTLASS configuration (-D flags from
// oasr/jit/conv2d_config.py), the sm90 implicit-GEMM convolution (csrc/conv2d_sm90.h).
//
// The Python API (oasr/conv2d.py) validates every argument before calling here and hands over packed
// weights and outputs; the checks below are internal invariants.
#include <oasr/conv2d/direct.cuh>
#include <oasr/conv2d/subsampling.cuh>

#include "tvm_ffi_utils.h"

namespace {

void icheck_packed(TensorView t, TensorView input, const char* name, int ndim) {
  icheck_like(t, input, name);
  TVM_FFI_ICHECK(t.ndim() == ndim && t.IsContiguous()) << "`" << name << "` must be a contiguous " << ndim << "-D tensor";
}

}  // namespace

// output [N, P, Q, K], input [N, H, W, C] (channels contiguous), weight [K, R, S, C], bias [K] or none.
void conv2d_direct(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t stride_h,
                   int64_t stride_w, int64_t pad_h, int64_t pad_w, OptionalName activation) {
  const oasr::Activation act = activation_from_name(activation, {oasr::Activation::kRelu, oasr::Activation::kSilu});
  TVM_FFI_ICHECK(input.ndim() == 4 && (input.size(3) <= 1 || input.stride(3) == 1))
      << "`input` must be [N, H, W, C] with contiguous channels";
  icheck_packed(weight, input, "weight", 4);
  icheck_packed(output, input, "output", 4);
  const int64_t n = input.size(0), h = input.size(1), w = input.size(2), c = input.size(3);
  const int64_t k = weight.size(0), r = weight.size(1), s = weight.size(2);
  const int64_t p = (h + 2 * pad_h - r) / stride_h + 1, q = (w + 2 * pad_w - s) / stride_w + 1;
  TVM_FFI_ICHECK(weight.size(3) == c && output.size(0) == n && output.size(1) == p && output.size(2) == q &&
                 output.size(3) == k)
      << "`output` must be [N, P, Q, K] and `weight` [K, R, S, C]";
  TVM_FFI_ICHECK(n * p * q < INT32_MAX && n * p * q * k < (int64_t{1} << 40) && h < INT32_MAX && w < INT32_MAX)
      << "too many output pixels (the Python API splits the batch)";
  TVM_FFI_ICHECK(oasr::conv2d::DirectConv2dFits(static_cast<int>(r), static_cast<int>(s), static_cast<int>(c)))
      << "the filter is too large for the direct kernel (R * S * C above 12288)";
  if (bias.has_value()) {
    icheck_packed(bias.value(), input, "bias", 1);
    TVM_FFI_ICHECK(bias.value().size(0) == k) << "`bias` must be [K]";
  }
  DISPATCH_HALF_TYPES(input.dtype(), c_type, [&] {
    oasr::conv2d::DirectConv2dParams<c_type> prm;
    prm.output = data_ptr<c_type>(output);
    prm.input = data_ptr<const c_type>(input);
    prm.weight = data_ptr<const c_type>(weight);
    prm.bias = bias.has_value() ? data_ptr<const c_type>(bias.value()) : nullptr;
    prm.input_n_stride = input.stride(0);
    prm.input_h_stride = input.stride(1);
    prm.input_w_stride = input.stride(2);
    prm.n = static_cast<int>(n);
    prm.h = static_cast<int>(h);
    prm.w = static_cast<int>(w);
    prm.c = static_cast<int>(c);
    prm.k = static_cast<int>(k);
    prm.r = static_cast<int>(r);
    prm.s = static_cast<int>(s);
    prm.p = static_cast<int>(p);
    prm.q = static_cast<int>(q);
    prm.stride_h = static_cast<int>(stride_h);
    prm.stride_w = static_cast<int>(stride_w);
    prm.pad_h = static_cast<int>(pad_h);
    prm.pad_w = static_cast<int>(pad_w);
    prm.activation = act;
    cudaError_t status = oasr::conv2d::DirectConv2d<c_type>(prm, get_stream(input.device()));
    CHECK_CUDA_SUCCESS(status, "conv2d direct kernel launch");
  });
}

// output [B, T2, D * F2], input [B, T, F] (any strides), weight1 [D, 3, 3], bias1 [D],
// weight2 [N / 16, 9, N, 16] (the kernel's shared-memory image of each chunk, oasr/conv2d.py), bias2 [D].
void conv2d_subsampling(TensorView output, TensorView input, TensorView weight1, TensorView bias1, TensorView weight2,
                        TensorView bias2) {
  TVM_FFI_ICHECK(input.ndim() == 3) << "`input` must be [B, T, F]";
  icheck_like(input, input, "input");
  icheck_packed(weight1, input, "weight1", 3);
  icheck_packed(bias1, input, "bias1", 1);
  icheck_packed(weight2, input, "weight2", 4);
  icheck_packed(bias2, input, "bias2", 1);
  icheck_packed(output, input, "output", 3);
  const int64_t b = input.size(0), t = input.size(1), f = input.size(2), d = weight1.size(0);
  const int64_t t2 = ((t - 1) / 2 - 1) / 2, f2 = ((f - 1) / 2 - 1) / 2;
  TVM_FFI_ICHECK(t >= 7 && f >= 7 && d % 16 == 0 && d <= 256 && d >= 16) << "sizes out of the kernel's range";
  const int64_t n = oasr::conv2d::detail::subsampling_n(static_cast<int>(d));
  TVM_FFI_ICHECK(weight2.size(0) == n / 16 && weight2.size(1) == 9 && weight2.size(2) == n && weight2.size(3) == 16 &&
                 bias1.size(0) == d && bias2.size(0) == d && output.size(0) == b && output.size(1) == t2 &&
                 output.size(2) == d * f2)
      << "`weight2` must be packed [N / 16, 9, N, 16] and `output` [B, T2, D * F2]";
  TVM_FFI_ICHECK(t2 * f2 < INT32_MAX && b < 65536 && (t - 1) * input.stride(1) + (f - 1) * input.stride(2) < INT32_MAX)
      << "sizes out of the kernel's range";
  DISPATCH_HALF_TYPES(input.dtype(), c_type, [&] {
    oasr::conv2d::SubsamplingParams<c_type> prm;
    prm.output = data_ptr<c_type>(output);
    prm.input = data_ptr<const c_type>(input);
    prm.weight1 = data_ptr<const c_type>(weight1);
    prm.bias1 = data_ptr<const c_type>(bias1);
    prm.weight2 = data_ptr<const c_type>(weight2);
    prm.bias2 = data_ptr<const c_type>(bias2);
    prm.input_b_stride = input.stride(0);
    prm.input_t_stride = input.stride(1);
    prm.input_f_stride = input.stride(2);
    prm.batch = static_cast<int>(b);
    prm.channels = static_cast<int>(d);
    prm.t2 = static_cast<int>(t2);
    prm.f2 = static_cast<int>(f2);
    cudaError_t status = oasr::conv2d::Subsampling<c_type>(prm, get_stream(input.device()));
    CHECK_CUDA_SUCCESS(status, "conv2d_subsampling kernel launch");
  });
}

// Shared memory (bytes) the fused front end needs for these sizes (the Python API compares it with the GPU's limit).
int64_t conv2d_subsampling_smem_bytes(int64_t f2, int64_t d) {
  return static_cast<int64_t>(oasr::conv2d::SubsamplingSmemBytes(static_cast<int>(f2), static_cast<int>(d)));
}

#ifdef OASR_CONV2D_TILE_M
#include "conv2d_sm90.h"
#endif
