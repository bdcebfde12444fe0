// TVM-FFI launcher of the bmm family: out[l] = a[l] . b[l]^T (B K-major) or a[l] . b[l] (B N-major) on
// Hopper tensor cores. One module per (dtype, B layout, tile configuration), chosen by
// oasr/gemm_config.py; the Python API (oasr/bmm.py) validates the arguments.
#include "gemm_sm90.h"

void bmm(TensorView output, TensorView a, TensorView b) {
  oasr::gemm::run_gemm<oasr::gemm::Plain>(output, a, b, Optional(), "bmm kernel launch");
}
