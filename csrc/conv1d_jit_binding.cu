#include "tvm_ffi_utils.h"

void depthwise_conv1d(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t pad_left,
                      int64_t pad_right, Optional mask, OptionalName activation);
void depthwise_conv1d_step(TensorView output, TensorView input, TensorView state, TensorView weight, Optional bias,
                           OptionalName activation);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(depthwise_conv1d, depthwise_conv1d);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(depthwise_conv1d_step, depthwise_conv1d_step);
