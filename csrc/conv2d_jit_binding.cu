#include "tvm_ffi_utils.h"

void conv2d_direct(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t stride_h,
                   int64_t stride_w, int64_t pad_h, int64_t pad_w, OptionalName activation);
void conv2d_subsampling(TensorView output, TensorView input, TensorView weight1, TensorView bias1, TensorView weight2,
                        TensorView bias2);
int64_t conv2d_subsampling_smem_bytes(int64_t f2, int64_t d);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(conv2d_direct, conv2d_direct);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(conv2d_subsampling, conv2d_subsampling);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(conv2d_subsampling_smem_bytes, conv2d_subsampling_smem_bytes);

#ifdef OASR_CONV2D_TILE_M  // a module built for one implicit-GEMM configuration
void conv2d_implicit_gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t stride_h,
                          int64_t stride_w, int64_t pad_h, int64_t pad_w, OptionalName activation);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(conv2d_implicit_gemm, conv2d_implicit_gemm);
#endif
