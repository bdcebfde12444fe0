// TVM-FFI launcher of the gemm family on CUTLASS's kernels: out = act(input . weight^T + bias) on Hopper tensor
// cores. One module per (dtype, epilogue, tile configuration), chosen by oasr/jit/gemm_config.py; the direct and
// tail schedules have launchers of their own (csrc/gemm_direct.cu, csrc/gemm_tail.cu). The Python API (oasr/gemm.py)
// validates the arguments and hands over [M, K], [N, K] and [M, N] views TMA can address (csrc/gemm_sm90.h's Batched
// reads a leading 1 the same).
#include "gemm_cutlass.h"
#include "gemm_epilogue.h"

static_assert(oasr::gemm::config::kModuleEpilogue != oasr::gemm::config::ModuleEpilogue::kGlu,
              "GLU runs on the direct schedule only");

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias) {
  namespace config = oasr::gemm::config;
  TVM_FFI_ICHECK(config::kModuleEpilogue != config::ModuleEpilogue::kPlain || !bias.has_value())
      << "the plain epilogue takes no bias";
  oasr::gemm::run_gemm<config::Gemm<config::Epilogue>>(output, input, weight, bias, "gemm kernel launch");
}
