#include "tvm_ffi_utils.h"

int64_t group_gemm_workspace_size(int64_t groups, int64_t device);
void group_gemm(TensorView output, TensorView input, TensorView weight, TensorView offsets, Optional bias,
                TensorView workspace, TensorView error, bool pdl);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(group_gemm_workspace_size, group_gemm_workspace_size);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(group_gemm, group_gemm);
