#include "tvm_ffi_utils.h"

void glu(TensorView output, TensorView input);
void swish(TensorView output, TensorView input);
void bias_activation(TensorView output, TensorView input, Optional bias, OptionalName activation);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(glu, glu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(swish, swish);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(bias_activation, bias_activation);
