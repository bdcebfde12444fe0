#include "tvm_ffi_utils.h"

void scale(TensorView output, TensorView input, double factor);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
