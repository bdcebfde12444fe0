// TVM-FFI launchers of the group_gemm family's direct schedule: sm90_group_gemm_direct.cuh's single kernel, which
// reads the group offsets itself (oasr/jit/gemm_config.py's DIRECT); otherwise as csrc/group_gemm.cu.
#include <oasr/gemm/sm90_group_gemm_direct.cuh>

#include "group_gemm_sm90.h"

namespace {

constexpr DLDataType kInt32{kDLInt, 32, 1};
#ifndef OASR_GROUP_GEMM_BIAS
#error "a group_gemm module is built with or without a bias: oasr/jit/gemm_config.py passes -DOASR_GROUP_GEMM_BIAS"
#endif
static_assert(OASR_GEMM_TILE_M == 128 && OASR_GEMM_TILE_N == 128 && OASR_GEMM_TILE_K == 64 &&
                  OASR_GEMM_CLUSTER_M == 1 && OASR_GEMM_CLUSTER_N == 1,
              "the direct grouped GEMM's tiles are 128 x 128 x 64, without clusters");
constexpr int kDirectStages = OASR_GEMM_STAGES > 0 ? OASR_GEMM_STAGES : oasr::gemm::direct::kStages;

}  // namespace

// Bytes of workspace a call with `groups` groups on `device` needs.
int64_t group_gemm_workspace_size(int64_t groups, int64_t device) {
  TVM_FFI_ICHECK(groups > 0 && groups < (1LL << 31)) << "`groups` must be positive and below 2^31";
  return 0;  // the direct kernel reads the offsets itself
}

// output [L, N], input [L, K] (or both [1, ...]), weight [G, N, K], offsets int32 [G] (CUDA), bias [G, N] or none,
// workspace: group_gemm_workspace_size bytes (CUDA, 128-byte aligned), error: one host-mapped int32,
// pdl: launch both kernels with programmatic dependent launch (each overlapping the launch of the one before).
void group_gemm(TensorView output, TensorView input, TensorView weight, TensorView offsets, Optional bias,
                TensorView workspace, TensorView error, bool pdl) {
  using Element = oasr::gemm::config::Element;
  oasr::gemm::GroupGemmParams<Element> p = oasr::gemm::group_operands<Element>(output, input, weight);
  const oasr::gemm::Batched in{input}, w{weight}, out{output};
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
                 workspace.numel() * (workspace.dtype().bits / 8) >=
                     group_gemm_workspace_size(groups, input.device().device_id))
      << "`workspace` must be a 128-byte aligned CUDA buffer of group_gemm_workspace_size bytes";
  TVM_FFI_ICHECK(error.numel() >= 1 && error.dtype() == kInt32) << "`error` must be a host-mapped int32";
  p.offsets = data_ptr<const int32_t>(offsets);
  TVM_FFI_ICHECK(bias.has_value() == (OASR_GROUP_GEMM_BIAS == 1))
      << "this group_gemm module was built " << (OASR_GROUP_GEMM_BIAS ? "with" : "without") << " a bias";
  if (bias.has_value()) {
    TensorView v = bias.value();
    TVM_FFI_ICHECK(v.ndim() == 2 && v.size(0) == groups && v.size(1) == n && (n == 1 || v.stride(1) == 1) &&
                   v.dtype() == oasr::gemm::config::kDLType)
        << "`bias` must be [G, N] of the module's dtype with contiguous rows";
    p.bias = data_ptr<const Element>(v);
    p.group_stride_bias = groups > 1 ? v.stride(0) : n;
  }
  p.error = data_ptr<int>(error);
  cudaError_t status = oasr::gemm::RunDirectGroup<Element, kDirectStages, OASR_GROUP_GEMM_BIAS == 1>(
      p, pdl, get_stream(input.device()));
  CHECK_CUDA_SUCCESS(status, "group_gemm kernel launch");
}
