// TVM-FFI launchers of the group_gemm family's direct schedule: sm90_group_gemm_direct.cuh's single kernel, which
// reads the group offsets itself (oasr/jit/gemm_config.py's DIRECT); otherwise as csrc/group_gemm.cu.
#include <oasr/gemm/sm90_group_gemm_direct.cuh>

#include "group_gemm_sm90.h"

#ifndef OASR_GROUP_GEMM_BIAS
#error "a group_gemm module is built with or without a bias: oasr/jit/gemm_config.py passes -DOASR_GROUP_GEMM_BIAS"
#endif

namespace {

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
  const int64_t workspace_bytes = group_gemm_workspace_size(weight.size(0), input.device().device_id);
  const oasr::gemm::GroupGemmParams<Element> p = oasr::gemm::group_launch<Element>(
      output, input, weight, offsets, bias, workspace, error, workspace_bytes, OASR_GROUP_GEMM_BIAS == 1);
  cudaError_t status = oasr::gemm::RunDirectGroup<Element, kDirectStages, OASR_GROUP_GEMM_BIAS == 1>(
      p, pdl, get_stream(input.device()));
  CHECK_CUDA_SUCCESS(status, "group_gemm kernel launch");
}
