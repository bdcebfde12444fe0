#include "tvm_ffi_utils.h"

bool glu(TensorView output, TensorView input);
bool swish(TensorView output, TensorView input);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(glu, glu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(swish, swish);
