#include "tvm_ffi_utils.h"

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue,
          Optional workspace);
int64_t gemm_workspace_size(int64_t m, int64_t n, int64_t k, int64_t device);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm_workspace_size, gemm_workspace_size);
