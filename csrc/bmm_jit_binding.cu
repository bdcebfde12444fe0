#include "tvm_ffi_utils.h"

void bmm(TensorView output, TensorView a, TensorView b);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(bmm, bmm);
