#include "tvm_ffi_utils.h"

void bmm(TensorView output, TensorView a, TensorView b, bool b_n_major, Optional workspace);
int64_t bmm_workspace_size(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t device);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(bmm, bmm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(bmm_workspace_size, bmm_workspace_size);
