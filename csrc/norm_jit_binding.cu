#include "tvm_ffi_utils.h"

void layer_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps);
void rms_norm(TensorView output, TensorView input, TensorView weight, Optional bias, double eps);
void add_layer_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                    TensorView weight, Optional bias, double eps, double alpha);
void add_rms_norm(TensorView output, Optional residual_out, TensorView input, TensorView residual,
                  TensorView weight, Optional bias, double eps, double alpha);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(layer_norm, layer_norm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms_norm, rms_norm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_layer_norm, add_layer_norm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_rms_norm, add_rms_norm);
