#include "tvm_ffi_utils.h"

// csrc/gemm.cu, csrc/gemm_direct.cu or csrc/gemm_tail.cu, as the module's schedule has it.
void gemm(TensorView output, TensorView input, TensorView weight, Optional bias);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);
