// scale(x, factor) = x * factor, element-wise, computed in fp32 and rounded once
// (bit-identical to torch's x * factor). The streaming body, with its vector path,
// unaligned head and tail and grid-stride loop, is common/elementwise.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/elementwise.cuh"

namespace oasr {

struct ScaleOp {
  float factor;
  __device__ __forceinline__ float operator()(float x) const { return x * factor; }
};

// output[i] = input[i] * factor for i in [0, n). output may equal input (in place).
template <typename T>
cudaError_t Scale(const T* input, T* output, float factor, int64_t n, cudaStream_t stream) {
  return Map(input, output, n, ScaleOp{factor}, stream);
}

}  // namespace oasr
