#include "tvm_ffi_utils.h"

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);
