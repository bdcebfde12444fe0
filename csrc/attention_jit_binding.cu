#include "tvm_ffi_utils.h"

void attention(TensorView out, TensorView q, TensorView k, TensorView v, Optional lengths, double scale,
               int64_t chunk_size, int64_t left_chunks);
void rel_pos_attention(TensorView out, TensorView q, TensorView k, TensorView v, TensorView p, TensorView pos_bias_u,
                       TensorView pos_bias_v, Optional lengths, bool shift, double scale, int64_t chunk_size,
                       int64_t left_chunks);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(attention, attention);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rel_pos_attention, rel_pos_attention);
