#include "tvm_ffi_utils.h"

int64_t bmm(TensorView output, TensorView a, TensorView b, bool b_n_major);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(bmm, bmm);
