// dev/ variant of csrc/gemm.cu for the epilogue study (dev/gemm/tune.py --epilogue): the production
// kernel with the epilogue's sub-tile set by hand (the family's flags, oasr/jit/gemm_config.py, come too).
//
// OASR_GEMM_DEV_EPI_TILE_N: the epilogue's sub-tile N instead of CUTLASS's choice (EpilogueTileAuto: 128x32
//   cooperative, 64x32 otherwise; the M stays the schedule's, as the builder requires). A wider sub-tile means
//   fewer store rounds per tile (smem write, fence, TMA store, barrier).
#include <type_traits>

#include "gemm_cutlass.h"
#include "gemm_epilogue.h"

#ifndef OASR_GEMM_DEV_EPI_TILE_N
#error "dev/gemm/epilogue.cu needs -DOASR_GEMM_DEV_EPI_TILE_N=<n> (dev/gemm/tune.py)"
#endif

namespace {

namespace cfg = oasr::gemm::config;

constexpr int kEpiM = std::is_same_v<cfg::Schedule, oasr::gemm::Cooperative> ? 128 : 64;
using EpiTile = cute::Shape<cute::Int<kEpiM>, cute::Int<OASR_GEMM_DEV_EPI_TILE_N>>;

using Gemm = oasr::gemm::Sm90Gemm<cfg::Element, cfg::LayoutB, cfg::Tile, cfg::Cluster, cfg::Schedule, OASR_GEMM_STAGES,
                                  cfg::Epilogue, EpiTile>;

}  // namespace

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias) {
  oasr::gemm::run_gemm<Gemm>(output, input, weight, bias, "gemm kernel launch (dev epilogue)");
}
