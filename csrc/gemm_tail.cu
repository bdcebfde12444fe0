// TVM-FFI launcher of the gemm family's tail schedule: include/oasr/gemm/sm90_gemm_tail.cuh, one CTA per 128 x N
// tile, the epilogue mostly under the tile's last products (oasr/jit/gemm_config.py's TAIL). The Python API
// (oasr/gemm.py) validates the arguments and hands over [M, K], [N, K] and [M, N] views TMA can address.
#include <oasr/gemm/sm90_gemm_tail.cuh>

#include "gemm_epilogue.h"

namespace {

static_assert(OASR_GEMM_TILE_M == 128 && OASR_GEMM_TILE_N % 64 == 0 && OASR_GEMM_TILE_N >= 128 &&
                  OASR_GEMM_TILE_N <= 256 && OASR_GEMM_TILE_K == 64 && OASR_GEMM_CLUSTER_M == 1 &&
                  OASR_GEMM_CLUSTER_N == 1 &&
                  oasr::gemm::config::kModuleEpilogue != oasr::gemm::config::ModuleEpilogue::kGlu,
              "the tail kernel's tiles are 128 x {128, 192, 256} x 64, without clusters, and it has no GLU");

struct TailGemm {};  // run_gemm's `Gemm` for the tail kernel: the Run below launches it

}  // namespace

namespace oasr::gemm {

// run_gemm's launch, for the tail kernel: one GEMM.
template <>
cudaError_t Run<TailGemm, config::Element>(const GemmParams<config::Element>& p, cudaStream_t stream) {
  using Element = config::Element;
  constexpr auto kEpilogue = config::kOwnEpilogue;
  TVM_FFI_ICHECK(p.batch == 1) << "the tail kernel computes one GEMM, not a batch";
  return p.bias != nullptr ? tail::RunTail<Element, OASR_GEMM_TILE_N, true, kEpilogue>(p, stream)
                           : tail::RunTail<Element, OASR_GEMM_TILE_N, false, kEpilogue>(p, stream);
}

}  // namespace oasr::gemm

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias) {
  TVM_FFI_ICHECK(oasr::gemm::config::kModuleEpilogue != oasr::gemm::config::ModuleEpilogue::kPlain ||
                 !bias.has_value())
      << "the plain epilogue takes no bias";
  oasr::gemm::run_gemm<TailGemm>(output, input, weight, bias, "gemm kernel launch");
}
