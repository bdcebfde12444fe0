#include "tvm_ffi_utils.h"

void glu(TensorView output, TensorView input);
void swish(TensorView output, TensorView input);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(glu, glu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(swish, swish);
