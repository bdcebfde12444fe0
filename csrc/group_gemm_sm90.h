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

}  // namespace oasr::gemm
