#include "tvm_ffi_utils.h"

int64_t gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);
