// The gemm module's epilogue from its -D flag (oasr/jit/gemm_config.py passes it), for csrc/gemm.cu and
// its dev/ variants.
//
// OASR_GEMM_EPILOGUE: 0 plain, 1 bias, 2 bias+ReLU, 3 bias+GELU (erf), 4 bias+GELU (tanh), 5 bias+SiLU, 6 GLU
// (the direct schedule's only: csrc/gemm.cu).
#pragma once

#include "gemm_sm90.h"

#ifndef OASR_GEMM_EPILOGUE
#error "a gemm module is built for one epilogue: oasr/jit/gemm_config.py passes -DOASR_GEMM_EPILOGUE"
#endif
static_assert(OASR_GEMM_EPILOGUE <= 5 || OASR_GEMM_SCHEDULE == 3, "GLU runs on the direct schedule only");

namespace oasr::gemm::config {

namespace act = cutlass::epilogue::thread;

using Epilogue = cute::conditional_t<
    OASR_GEMM_EPILOGUE == 0, Plain,
    cute::conditional_t<
        OASR_GEMM_EPILOGUE == 1, BiasAct<act::Identity>,
        cute::conditional_t<
            OASR_GEMM_EPILOGUE == 2, BiasAct<act::ReLu>,
            cute::conditional_t<OASR_GEMM_EPILOGUE == 3, BiasAct<act::GELU>,
                                cute::conditional_t<OASR_GEMM_EPILOGUE == 4, BiasAct<act::GELU_taylor>,
                                                    BiasAct<Silu>>>>>>;

}  // namespace oasr::gemm::config
