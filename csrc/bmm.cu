// TVM-FFI launcher of the bmm family: out[l] = a[l] . b[l]^T (B K-major) or a[l] . b[l] (B N-major) on
// Hopper tensor cores. One module per (dtype, B layout, tile configuration), chosen by
// oasr/jit/gemm_config.py; the Python API (oasr/bmm.py) validates the arguments and passes views TMA can address.
#include "gemm_cutlass.h"

void bmm(TensorView output, TensorView a, TensorView b) {
  oasr::gemm::run_gemm<oasr::gemm::config::Gemm<oasr::gemm::Plain>>(output, a, b, Optional(), "bmm kernel launch");
}
