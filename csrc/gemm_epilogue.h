// The gemm module's epilogue, named by its -D flag: oasr/jit/gemm_config.py passes -DOASR_GEMM_EPILOGUE=kSilu for
// "silu" (plain: the accumulators; bias: acc + bias; an activation: act(acc + bias), a missing bias reading as 0;
// glu: the direct kernel's value * sigmoid(gate)). A name this enum lacks fails to compile.
#pragma once

#include <oasr/gemm/sm90_group_gemm_direct.cuh>

#include "gemm_sm90.h"

#ifndef OASR_GEMM_EPILOGUE
#error "a gemm module is built for one epilogue: oasr/jit/gemm_config.py passes -DOASR_GEMM_EPILOGUE"
#endif

namespace oasr::gemm::config {

enum class ModuleEpilogue { kPlain, kBias, kRelu, kGelu, kGeluTanh, kSilu, kGlu };
constexpr ModuleEpilogue kModuleEpilogue = ModuleEpilogue::OASR_GEMM_EPILOGUE;

namespace act = cutlass::epilogue::thread;

// CUTLASS's epilogue (csrc/gemm.cu): its activation functors (oasr's SiLU, sm90_gemm.cuh).
using Epilogue = cute::conditional_t<
    kModuleEpilogue == ModuleEpilogue::kPlain, Plain,
    cute::conditional_t<
        kModuleEpilogue == ModuleEpilogue::kBias, BiasAct<act::Identity>,
        cute::conditional_t<
            kModuleEpilogue == ModuleEpilogue::kRelu, BiasAct<act::ReLu>,
            cute::conditional_t<kModuleEpilogue == ModuleEpilogue::kGelu, BiasAct<act::GELU>,
                                cute::conditional_t<kModuleEpilogue == ModuleEpilogue::kGeluTanh,
                                                    BiasAct<act::GELU_taylor>, BiasAct<Silu>>>>>>;

// The direct and tail kernels' epilogue (the bias, when given, is read at run time).
constexpr direct::Epilogue kOwnEpilogue =
    kModuleEpilogue == ModuleEpilogue::kRelu       ? direct::Epilogue::kRelu
    : kModuleEpilogue == ModuleEpilogue::kGelu     ? direct::Epilogue::kGelu
    : kModuleEpilogue == ModuleEpilogue::kGeluTanh ? direct::Epilogue::kGeluTanh
    : kModuleEpilogue == ModuleEpilogue::kSilu     ? direct::Epilogue::kSilu
    : kModuleEpilogue == ModuleEpilogue::kGlu      ? direct::Epilogue::kGlu
                                                   : direct::Epilogue::kNone;

}  // namespace oasr::gemm::config
