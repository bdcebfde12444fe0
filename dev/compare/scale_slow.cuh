// A deliberately slower scale for the revision-compare acceptance test (dev/compare/h200_acceptance.py):
// the production kernel, then a second pass over the first tenth of the data, ~10% more DRAM traffic.
// It replaces include/oasr/scale.cuh in a copy of include/; never in production.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/elementwise.cuh"

namespace oasr {

struct ScaleOp {
  float factor;
  __device__ __forceinline__ float operator()(float x) const { return x * factor; }
};

template <typename T>
cudaError_t Scale(const T* input, T* output, float factor, int64_t n, cudaStream_t stream) {
  cudaError_t status = Map(input, output, n, ScaleOp{factor}, stream);
  if (status != cudaSuccess || input == output) return status;  // in place, a second pass would scale twice
  return Map(input, output, n / 10, ScaleOp{factor}, stream);
}

}  // namespace oasr
