// TVM-FFI launcher of the gemm family: out = act(input . weight^T + bias) on Hopper tensor cores.
// One module per (dtype, epilogue, tile configuration), chosen by oasr/gemm_config.py; the Python API
// (oasr/gemm.py) validates the arguments and hands over [1, M, K], [1, N, K] and [1, M, N] views.
//
// OASR_GEMM_EPILOGUE: 0 plain, 1 bias, 2 bias+ReLU, 3 bias+GELU (erf), 4 bias+GELU (tanh), 5 bias+SiLU.
#include "gemm_sm90.h"

#ifndef OASR_GEMM_EPILOGUE
#error "a gemm module is built for one epilogue: oasr/gemm_config.py passes -DOASR_GEMM_EPILOGUE"
#endif

namespace {

namespace act = cutlass::epilogue::thread;
using oasr::gemm::BiasAct;
using oasr::gemm::Plain;

using Epilogue = cute::conditional_t<
    OASR_GEMM_EPILOGUE == 0, Plain,
    cute::conditional_t<
        OASR_GEMM_EPILOGUE == 1, BiasAct<act::Identity>,
        cute::conditional_t<
            OASR_GEMM_EPILOGUE == 2, BiasAct<act::ReLu>,
            cute::conditional_t<OASR_GEMM_EPILOGUE == 3, BiasAct<act::GELU>,
                                cute::conditional_t<OASR_GEMM_EPILOGUE == 4, BiasAct<act::GELU_taylor>,
                                                    BiasAct<act::SiLu>>>>>>;

}  // namespace

// `epilogue` names the one this module was built for (so a call states what it computes).
void gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue) {
  TVM_FFI_ICHECK(epilogue == OASR_GEMM_EPILOGUE) << "this gemm module computes epilogue " << OASR_GEMM_EPILOGUE
                                                 << ", not " << epilogue;
  TVM_FFI_ICHECK(OASR_GEMM_EPILOGUE != 0 || !bias.has_value()) << "the plain epilogue takes no bias";
  oasr::gemm::run_gemm<Epilogue>(output, input, weight, bias, "gemm kernel launch");
}
