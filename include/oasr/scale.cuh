// scale(x, factor) = x * factor, element-wise, computed in fp32.
//
// Memory-bound: every element is read once and written once, so the kernel is built
// to keep the memory system busy: 128-bit loads and stores, several vectors in
// flight per thread, and a grid-stride loop over a grid sized to the GPU. Pointers
// that are not 16-byte aligned get a scalar head (up to the first boundary) and a
// scalar tail; input and output at different alignments take the scalar path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {

namespace scale_detail {
constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // vectors each thread keeps in flight
}  // namespace scale_detail

// Elements [0, head) and [tail_start, n) go one by one; [head, tail_start) in vectors.
template <typename T>
__global__ void __launch_bounds__(scale_detail::kThreads) ScaleKernel(const T* input, T* output, float factor, int64_t n, int64_t head,
                            int64_t num_vectors) {
  using VecT = Vec<T>;
  constexpr int kUnroll = scale_detail::kUnroll;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  const T* vec_in = input + head;
  T* vec_out = output + head;
  for (int64_t base = thread; base < num_vectors; base += stride * kUnroll) {
    VecT v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < num_vectors) v[u] = VecT::load(vec_in + i * VecT::kSize);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < num_vectors) {
        VecT scaled;
#pragma unroll
        for (int k = 0; k < VecT::kSize; ++k) scaled[k] = from_float<T>(to_float(v[u][k]) * factor);
        scaled.store(vec_out + i * VecT::kSize);
      }
    }
  }

  const int64_t tail_start = head + num_vectors * VecT::kSize;
  const int64_t num_scalars = head + (n - tail_start);
  for (int64_t s = thread; s < num_scalars; s += stride) {
    const int64_t i = s < head ? s : tail_start + (s - head);
    output[i] = from_float<T>(to_float(input[i]) * factor);
  }
}

// output[i] = input[i] * factor for i in [0, n). output may equal input (in place).
template <typename T>
cudaError_t Scale(const T* input, T* output, float factor, int64_t n, cudaStream_t stream) {
  using namespace scale_detail;
  if (n == 0) return cudaSuccess;
  constexpr int kVecSize = Vec<T>::kSize;
  int64_t head = n, num_vectors = 0;
  if (same_vector_phase<T>(input, output)) {
    head = std::min<int64_t>(n, elements_to_alignment<T>(input));
    num_vectors = (n - head) / kVecSize;
  }
  const int64_t num_scalars = n - num_vectors * kVecSize;
  // One vector per thread while the GPU has room (small tensors are latency-bound, so
  // spread them over every SM); large ones loop, kUnroll vectors in flight per thread.
  static const int blocks_per_sm = resident_blocks_per_sm(ScaleKernel<T>, kThreads);
  const unsigned blocks = grid_size(std::max(num_vectors, num_scalars), kThreads, blocks_per_sm);
  ScaleKernel<T><<<blocks, kThreads, 0, stream>>>(input, output, factor, n, head, num_vectors);
  return cudaGetLastError();
}

}  // namespace oasr
