// TVM-FFI launchers of the group_gemm family on CUTLASS's ptr-array kernels (after a setup kernel that reads the
// offsets): out[rows of g] = input[rows of g] . weight[g]^T (+ bias[g]) on Hopper tensor cores, the groups' row ranges
// read from device offsets. One module per (dtype, epilogue: OASR_GROUP_GEMM_BIAS 0 or 1, tile configuration),
// chosen by oasr/jit/gemm_config.py; the direct schedule has its own launcher (csrc/group_gemm_direct.cu). The
// Python API (oasr/group_gemm.py) validates the arguments, hands over [1, L, K], [G, N, K] and [1, L, N] views and
// caches the workspace.
#include <oasr/gemm/sm90_group_gemm.cuh>

#include <type_traits>

#include "gemm_cutlass.h"
#include "group_gemm_sm90.h"

#ifndef OASR_GROUP_GEMM_BIAS
#error "a group_gemm module is built with or without a bias: oasr/jit/gemm_config.py passes -DOASR_GROUP_GEMM_BIAS"
#endif

namespace {

static_assert(std::is_same_v<oasr::gemm::config::Schedule, oasr::gemm::Cooperative> ||
                  std::is_same_v<oasr::gemm::config::Schedule, oasr::gemm::PingPong>,
              "CUTLASS's grouped GEMM is persistent: cooperative or ping-pong");
using GroupGemm = oasr::gemm::Sm90GroupGemm<oasr::gemm::config::Element, oasr::gemm::config::Tile,
                                            oasr::gemm::config::Cluster, oasr::gemm::config::Schedule,
                                            OASR_GROUP_GEMM_BIAS == 1>;

}  // namespace

// Bytes of workspace a call with `groups` groups on `device` needs.
int64_t group_gemm_workspace_size(int64_t groups, int64_t device) {
  TVM_FFI_ICHECK(groups > 0 && groups < (1LL << 31)) << "`groups` must be positive and below 2^31";
  const int id = static_cast<int>(device);
  return static_cast<int64_t>(
      oasr::gemm::GroupWorkspaceSize<GroupGemm>(static_cast<int>(groups), id, oasr::multiprocessor_count(id)));
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
  cudaError_t status = oasr::gemm::RunGroup<GroupGemm>(p, data_ptr<void>(workspace), pdl, get_stream(input.device()));
  CHECK_CUDA_SUCCESS(status, "group_gemm kernel launch");
}
