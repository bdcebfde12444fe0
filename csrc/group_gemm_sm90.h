// The grouped GEMM's launch parameters from TVM-FFI views, for csrc/group_gemm.cu and the gemm family's direct
// schedule (csrc/gemm.cu, one group of every row).
#pragma once

#include <oasr/gemm/sm90_group_gemm.cuh>

#include "gemm_sm90.h"

namespace oasr::gemm {

// The problem and operands of out [L, N'], input [L, K] (or both with a leading 1) and weight [G, N, K] (or
// [N, K]: one group), each first checked to be a view TMA can use. The caller checks how their shapes relate,
// then adds the offsets, bias and error flag.
template <class Element>
GroupGemmParams<Element> group_operands(TensorView output_view, TensorView input_view, TensorView weight_view) {
  const Batched input = icheck_tma_view(input_view, "input");
  const Batched weight = icheck_tma_view(weight_view, "weight");
  const Batched output = icheck_tma_view(output_view, "out");
  GroupGemmParams<Element> p;
  p.groups = static_cast<int>(weight.size(0));
  p.rows = static_cast<int>(input.size(1));
  p.n = static_cast<int>(weight.size(1));
  p.k = static_cast<int>(input.size(2));
  p.a = data_ptr<const Element>(input_view);
  p.lda = row_stride(input);
  p.b = data_ptr<const Element>(weight_view);
  p.ldb = row_stride(weight);
  p.group_stride_b = batch_stride(weight, p.ldb);
  p.d = data_ptr<Element>(output_view);
  p.ldd = row_stride(output);
  p.device = input_view.device().device_id;
  p.sm_count = multiprocessor_count(p.device);
  return p;
}

// A group_gemm launcher's parameters (csrc/group_gemm.cu, csrc/group_gemm_direct.cu), every tensor checked: out
// [L, N], input [L, K] (or both [1, ...]), weight [G, N, K], offsets int32 [G] (CUDA), bias [G, N] when the module
// was built with one (`with_bias`), a CUDA workspace of `workspace_bytes` (128-byte aligned), error: a host-mapped
// int32.
template <class Element>
GroupGemmParams<Element> group_launch(TensorView output, TensorView input, TensorView weight, TensorView offsets,
                                      Optional bias, TensorView workspace, TensorView error, int64_t workspace_bytes,
                                      bool with_bias) {
  constexpr DLDataType kInt32{kDLInt, 32, 1};
  GroupGemmParams<Element> p = group_operands<Element>(output, input, weight);
  const Batched in{input}, w{weight}, out{output};
  const int64_t rows = in.size(1), k = in.size(2), groups = w.size(0), n = w.size(1);
  TVM_FFI_ICHECK(in.size(0) == 1 && out.size(0) == 1 && out.size(1) == rows && out.size(2) == n && w.size(2) == k)
      << "expected out [L, N], input [L, K] (or both with a leading 1) and weight [G, N, K]";
  TVM_FFI_ICHECK(rows > 0 && n > 0 && k > 0 && rows < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31))
      << "extents must be positive and below 2^31 (the Python API handles empty problems)";
  TVM_FFI_ICHECK(offsets.ndim() == 1 && offsets.size(0) == groups && offsets.dtype() == kInt32 &&
                 offsets.device().device_type == kDLCUDA && (groups == 1 || offsets.stride(0) == 1))
      << "`offsets` must be a contiguous CUDA int32 [G] vector";
  TVM_FFI_ICHECK(workspace.device().device_type == kDLCUDA &&
                 reinterpret_cast<uintptr_t>(data_ptr<char>(workspace)) % 128 == 0 &&
                 workspace.numel() * (workspace.dtype().bits / 8) >= workspace_bytes)
      << "`workspace` must be a 128-byte aligned CUDA buffer of group_gemm_workspace_size bytes";
  TVM_FFI_ICHECK(error.numel() >= 1 && error.dtype() == kInt32) << "`error` must be a host-mapped int32";
  p.offsets = data_ptr<const int32_t>(offsets);
  TVM_FFI_ICHECK(bias.has_value() == with_bias)
      << "this group_gemm module was built " << (with_bias ? "with" : "without") << " a bias";
  if (bias.has_value()) {
    TensorView v = bias.value();
    TVM_FFI_ICHECK(v.ndim() == 2 && v.size(0) == groups && v.size(1) == n && (n == 1 || v.stride(1) == 1) &&
                   v.dtype() == config::kDLType)
        << "`bias` must be [G, N] of the module's dtype with contiguous rows";
    p.bias = data_ptr<const Element>(v);
    p.group_stride_bias = groups > 1 ? v.stride(0) : n;
  }
  p.error = data_ptr<int>(error);
  return p;
}

}  // namespace oasr::gemm
