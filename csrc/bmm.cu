// TVM-FFI launcher of the bmm family: out[l] = a[l] . b[l]^T (B K-major) or a[l] . b[l] (B N-major) on
// Hopper tensor cores. One module per (dtype, B layout, tile configuration), chosen by
// oasr/jit/gemm_config.py; the Python API (oasr/bmm.py) validates the arguments.
#include "gemm_sm90.h"

namespace config = oasr::gemm::config;

// `b_n_major` names the layout this module was built for (b is [L, K, N] when true, [L, N, K] otherwise). Returns 0
// once launched, or (launching nothing) which operands TMA cannot address as they are: 1 a, 2 b, 4 out, for
// oasr/bmm.py to pass padded copies instead (the usual call costs it no check).
int64_t bmm(TensorView output, TensorView a, TensorView b, bool b_n_major) {
  TVM_FFI_ICHECK(b_n_major == static_cast<bool>(OASR_GEMM_B_NMAJOR)) << "this bmm module takes B "
                                                                      << (OASR_GEMM_B_NMAJOR ? "N" : "K") << "-major";
  if (const int64_t refused = oasr::gemm::unaddressable(a, b, output)) return refused;
  oasr::gemm::run_gemm<config::Gemm<oasr::gemm::Plain>>(output, a, b, Optional(), "bmm kernel launch");
  return 0;
}
