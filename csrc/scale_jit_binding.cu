#include "tvm_ffi_utils.h"

bool scale_run(TensorView output, TensorView input, double factor);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, scale_run);
