// Element-wise maps out[i] = op(in[i]) over a flat range, computed in fp32: the body
// shared by scale, swish and any other one-input stream.
//
// Memory-bound, so the kernel keeps the memory system busy: 128-bit loads and stores,
// kUnroll vectors in flight per thread, each block working on contiguous chunks of
// kThreads * kUnroll vectors (DRAM-page friendly), and a grid-stride loop over chunks
// for tensors larger than the grid. Pointers that are not 16-byte aligned get a scalar
// head up to the first boundary and a scalar tail; input and output at different
// alignments take the scalar path. Indices are 64-bit. n == 0 launches nothing.
//
// The launch shape can be overridden at compile time (-DOASR_ELEMENTWISE_THREADS=...)
// so that benchmarks/tune_elementwise.py can sweep it on a GPU. The defaults come from
// that sweep on the H200: 128 threads and one vector per thread per chunk were the best
// or within 1% of it at every size (more vectors per thread lost 5-30% below 2 MiB),
// and a grid of up to 1024 waves beat a single wave by 3-5% above 128 MiB, where a
// static split of the work leaves SMs idle at the end.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

#ifndef OASR_ELEMENTWISE_THREADS
#define OASR_ELEMENTWISE_THREADS 128
#endif
#ifndef OASR_ELEMENTWISE_UNROLL
#define OASR_ELEMENTWISE_UNROLL 1
#endif
#ifndef OASR_ELEMENTWISE_WAVES
#define OASR_ELEMENTWISE_WAVES 1024
#endif

namespace oasr {

namespace elementwise_detail {
constexpr int kThreads = OASR_ELEMENTWISE_THREADS;
constexpr int kUnroll = OASR_ELEMENTWISE_UNROLL;  // vectors each thread keeps in flight
constexpr int kWaves = OASR_ELEMENTWISE_WAVES;    // grid cap, in waves of resident blocks
}  // namespace elementwise_detail

// Elements [0, head) and [tail_start, n) go one by one; [head, tail_start) in vectors.
template <typename T, typename Op>
__global__ void __launch_bounds__(elementwise_detail::kThreads)
    MapKernel(const T* input, T* output, int64_t n, int64_t head, int64_t num_vectors, Op op) {
  using VecT = Vec<T>;
  constexpr int kThreads = elementwise_detail::kThreads;
  constexpr int kUnroll = elementwise_detail::kUnroll;
  constexpr int64_t kChunk = int64_t{kThreads} * kUnroll;

  const T* vec_in = input + head;
  T* vec_out = output + head;
  for (int64_t chunk = blockIdx.x * kChunk; chunk < num_vectors; chunk += gridDim.x * kChunk) {
    VecT v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = chunk + u * kThreads + threadIdx.x;
      if (i < num_vectors) v[u] = VecT::load(vec_in + i * VecT::kSize);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = chunk + u * kThreads + threadIdx.x;
      if (i < num_vectors) {
        VecT r;
#pragma unroll
        for (int k = 0; k < VecT::kSize; ++k) r[k] = from_float<T>(op(to_float(v[u][k])));
        r.store(vec_out + i * VecT::kSize);
      }
    }
  }

  const int64_t tail_start = head + num_vectors * VecT::kSize;
  const int64_t num_scalars = head + (n - tail_start);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < num_scalars; s += stride) {
    const int64_t i = s < head ? s : tail_start + (s - head);
    output[i] = from_float<T>(op(to_float(input[i])));
  }
}

// output[i] = op(input[i]) for i in [0, n); output may equal input (in place).
// Op is a functor with `__device__ float operator()(float) const`.
template <typename T, typename Op>
cudaError_t Map(const T* input, T* output, int64_t n, Op op, cudaStream_t stream) {
  using namespace elementwise_detail;
  if (n == 0) return cudaSuccess;
  constexpr int kVecSize = Vec<T>::kSize;
  int64_t head = n, num_vectors = 0;
  if (same_vector_phase<T>(input, output)) {
    head = std::min<int64_t>(n, elements_to_alignment<T>(input));
    num_vectors = (n - head) / kVecSize;
  }
  const int64_t num_scalars = n - num_vectors * kVecSize;
  static int resident[kMaxDevices] = {};
  const auto kernel = MapKernel<T, Op>;
  const int per_sm = resident_blocks_per_sm(kernel, kThreads, resident) * kWaves;
  const unsigned blocks = std::max(grid_size(num_vectors, int64_t{kThreads} * kUnroll, per_sm),
                                   grid_size(num_scalars, kThreads, per_sm));
  kernel<<<blocks, kThreads, 0, stream>>>(input, output, n, head, num_vectors, op);
  return cudaGetLastError();
}

}  // namespace oasr
