// The conv2d module's sm90 implicit-GEMM launcher, compiled into a module built for one configuration
// (-D flags from oasr/jit/conv2d_config.py):
//
// OASR_CONV2D_DTYPE (1 float16, 2 bfloat16), OASR_CONV2D_ACTIVATION (an oasr::Activation enumerator: kNone, kRelu, kSilu),
// OASR_CONV2D_TILE_{M,N,K}, OASR_CONV2D_CLUSTER_{M,N}, OASR_CONV2D_CONSUMERS (consumer warpgroups, 1 or 2).
#pragma once

#include <oasr/common/launch.cuh>
#include <oasr/conv2d/sm90_implicit_gemm.cuh>

#include "tvm_ffi_utils.h"

#if !defined(OASR_CONV2D_DTYPE) || !defined(OASR_CONV2D_ACTIVATION) || !defined(OASR_CONV2D_TILE_N) || \
    !defined(OASR_CONV2D_TILE_K) || !defined(OASR_CONV2D_CLUSTER_M) || !defined(OASR_CONV2D_CLUSTER_N) ||   \
    !defined(OASR_CONV2D_CONSUMERS)
#error "an implicit-GEMM conv2d module is built for one configuration: oasr/jit/conv2d_config.py passes its -D flags"
#endif

namespace oasr::conv2d::config {

namespace act = cutlass::epilogue::thread;
using Element = cute::conditional_t<OASR_CONV2D_DTYPE == 1, cutlass::half_t, cutlass::bfloat16_t>;
constexpr DLDataType kDLType = OASR_CONV2D_DTYPE == 1 ? dl_float16 : dl_bfloat16;
constexpr oasr::Activation kActivation = oasr::Activation::OASR_CONV2D_ACTIVATION;
static_assert(kActivation == oasr::Activation::kNone || kActivation == oasr::Activation::kRelu ||
                  kActivation == oasr::Activation::kSilu,
              "the implicit-GEMM conv fuses ReLU or SiLU");
template <class T>
using Act = cute::conditional_t<kActivation == oasr::Activation::kRelu, act::ReLu<T>,
                                cute::conditional_t<kActivation == oasr::Activation::kSilu, act::SiLu<T>, act::Identity<T>>>;
using Tile = cute::Shape<cute::Int<OASR_CONV2D_TILE_M>, cute::Int<OASR_CONV2D_TILE_N>,
                         cute::Shape<cute::Int<OASR_CONV2D_TILE_K>>>;
using Cluster = cute::Shape<cute::Int<OASR_CONV2D_CLUSTER_M>, cute::Int<OASR_CONV2D_CLUSTER_N>, cute::_1>;
using Conv = Sm90Conv2d<Element, Act, Tile, Cluster, OASR_CONV2D_CONSUMERS>;

}  // namespace oasr::conv2d::config

// output [N, P, Q, K], input [N, H, W, C], weight [K, R, S, C], all packed; bias [K] or none.
// `activation` names the one this module was built for (so a call states what it computes).
void conv2d_implicit_gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t stride_h,
                          int64_t stride_w, int64_t pad_h, int64_t pad_w, OptionalName activation) {
  namespace config = oasr::conv2d::config;
  using Element = config::Element;
  TVM_FFI_ICHECK(activation_from_name(activation, {config::kActivation}) == config::kActivation)
      << "this conv2d module computes another activation";
  TVM_FFI_ICHECK(input.dtype() == config::kDLType) << "this conv2d module is built for " << dtype_name(config::kDLType);
  for (TensorView t : {input, weight, output}) {
    icheck_like(t, input, "tensor");
    TVM_FFI_ICHECK(t.ndim() == 4 && t.IsContiguous() && reinterpret_cast<uintptr_t>(data_ptr<char>(t)) % 16 == 0)
        << "`input`, `weight` and `output` must be packed, 16-byte aligned 4-D tensors";
  }
  oasr::conv2d::ImplicitGemmParams<Element> p;
  p.n = static_cast<int>(input.size(0));
  p.h = static_cast<int>(input.size(1));
  p.w = static_cast<int>(input.size(2));
  p.c = static_cast<int>(input.size(3));
  p.k = static_cast<int>(weight.size(0));
  p.r = static_cast<int>(weight.size(1));
  p.s = static_cast<int>(weight.size(2));
  p.pad_h = static_cast<int>(pad_h);
  p.pad_w = static_cast<int>(pad_w);
  p.stride_h = static_cast<int>(stride_h);
  p.stride_w = static_cast<int>(stride_w);
  TVM_FFI_ICHECK(weight.size(3) == p.c && p.c % 8 == 0 && p.k % 8 == 0) << "C and K must be multiples of 8";
  TVM_FFI_ICHECK(output.size(0) == p.n && output.size(3) == p.k &&
                 output.size(1) == (p.h + 2 * p.pad_h - p.r) / p.stride_h + 1 &&
                 output.size(2) == (p.w + 2 * p.pad_w - p.s) / p.stride_w + 1)
      << "`output` must be [N, P, Q, K]";
  p.input = data_ptr<const Element>(input);
  p.weight = data_ptr<const Element>(weight);
  p.output = data_ptr<Element>(output);
  if (bias.has_value()) {
    icheck_like(bias.value(), input, "bias");
    TVM_FFI_ICHECK(bias.value().ndim() == 1 && bias.value().size(0) == p.k && bias.value().IsContiguous())
        << "`bias` must be a contiguous [K] vector";
    p.bias = data_ptr<const Element>(bias.value());
  }
  p.device = input.device().device_id;
  p.sm_count = oasr::multiprocessor_count(p.device);
  cudaError_t status = oasr::conv2d::RunImplicitGemm<config::Conv>(p, get_stream(input.device()));
  TVM_FFI_ICHECK(status != cudaErrorNotSupported)
      << "CUTLASS's implicit GEMM cannot run this shape (TMA im2col limits: padding <= 256, filter < 255, "
         "input corners within +-128); the Python API sends such shapes to the direct kernel";
  CHECK_CUDA_SUCCESS(status, "conv2d implicit-GEMM kernel launch");
}
