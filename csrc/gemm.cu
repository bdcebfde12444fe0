// TVM-FFI launcher of the gemm family: out = act(input . weight^T + bias) on Hopper tensor cores.
// One module per (dtype, epilogue, tile configuration), chosen by oasr/jit/gemm_config.py; the Python API
// (oasr/gemm.py) validates the arguments and hands over [1, M, K], [1, N, K] and [1, M, N] views.
#include "gemm_epilogue.h"

// `epilogue` names the one this module was built for (so a call states what it computes).
void gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue) {
  TVM_FFI_ICHECK(epilogue == OASR_GEMM_EPILOGUE) << "this gemm module computes epilogue " << OASR_GEMM_EPILOGUE
                                                 << ", not " << epilogue;
  TVM_FFI_ICHECK(OASR_GEMM_EPILOGUE != 0 || !bias.has_value()) << "the plain epilogue takes no bias";
  namespace config = oasr::gemm::config;
  oasr::gemm::run_gemm<config::Gemm<config::Epilogue>>(output, input, weight, bias, "gemm kernel launch");
}
