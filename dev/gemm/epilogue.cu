// dev/ variant of csrc/gemm.cu for the epilogue study (dev/gemm/tune.py --epilogue): the production
// kernel with one epilogue change, by flag (the family's flags, oasr/jit/gemm_config.py, come too).
//
// OASR_GEMM_DEV_EPI_TILE_N: the epilogue's sub-tile N, set by hand instead of CUTLASS's choice
//   (EpilogueTileAuto: 128x32 cooperative, 64x32 otherwise; the M stays the schedule's, as the builder
//   requires). A wider sub-tile means fewer store rounds per tile (smem write, fence, TMA store, barrier).
// OASR_GEMM_DEV_FAST_SILU: SiLU as x / (1 + e^-x) with the approximate exp and divide (ex2.approx and
//   rcp.approx, a few fp32 ulp) instead of CUTLASS's SiLu (expf and an IEEE divide). The IEEE divide
//   compiles to a branch and a slow-path CALL per element (64 CALLs and 77 BSSY in the 128x128
//   cooperative kernel's SASS, against none and 11 for the plain epilogue), which keeps ptxas from
//   interleaving a fragment's elements.
#include "gemm_epilogue.h"

#if !defined(OASR_GEMM_DEV_EPI_TILE_N) && !defined(OASR_GEMM_DEV_FAST_SILU)
#error "dev/gemm/epilogue.cu needs -DOASR_GEMM_DEV_EPI_TILE_N=<n> or -DOASR_GEMM_DEV_FAST_SILU (dev/gemm/tune.py)"
#endif

namespace {

template <class T>
struct FastSiLu {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE T operator()(T const& x) const { return x * __fdividef(1.0f, 1.0f + __expf(-x)); }
};

template <class T, int N>
struct FastSiLu<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = FastSiLu<T>{}(x[i]);
    return y;
  }
};

namespace cfg = oasr::gemm::config;

#ifdef OASR_GEMM_DEV_FAST_SILU
static_assert(OASR_GEMM_EPILOGUE == 5, "OASR_GEMM_DEV_FAST_SILU replaces the SiLU epilogue (5)");
using Epilogue = oasr::gemm::BiasAct<FastSiLu>;
#else
using Epilogue = cfg::Epilogue;
#endif

#ifdef OASR_GEMM_DEV_EPI_TILE_N
constexpr int kEpiM = OASR_GEMM_SCHEDULE == 0 ? 128 : 64;
using EpiTile = cute::Shape<cute::Int<kEpiM>, cute::Int<OASR_GEMM_DEV_EPI_TILE_N>>;
#else
using EpiTile = cutlass::epilogue::collective::EpilogueTileAuto;
#endif

using Gemm = oasr::gemm::Sm90Gemm<cfg::Element, cfg::LayoutB, cfg::Tile, cfg::Cluster, cfg::Schedule, OASR_GEMM_STAGES,
                                  Epilogue, EpiTile>;

}  // namespace

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue) {
  TVM_FFI_ICHECK(epilogue == OASR_GEMM_EPILOGUE) << "this gemm module computes epilogue " << OASR_GEMM_EPILOGUE
                                                 << ", not " << epilogue;
  oasr::gemm::run_gemm<Gemm>(output, input, weight, bias, "gemm kernel launch (dev epilogue)");
}
