// Element-wise maps out[i] = op(in[i]) over a flat range, computed in fp32: the body
// shared by scale, swish and any other one-input stream.
//
// Memory-bound, so the kernel keeps the memory system busy and does little else: 128-bit
// loads and stores, kUnroll vectors in flight per thread, each block working on
// contiguous chunks of kThreads * kUnroll vectors (DRAM-page friendly), and a grid-stride
// loop over chunks for tensors larger than the grid. From 64 KiB of input up, the
// vectors are loaded and stored as streaming (evict-first) data: on the H200 that made
// scale up to 11% faster than plain loads and stores from 64 KiB to 32 MiB and no slower
// above; swish and GLU gained up to 5% on the Conformer shapes. Either hint alone was no
// faster or slower. Smaller tensors are launch-latency bound and gain nothing, and where
// a large op has just filled the L2 with ordinary lines, evict-first lines lose to them:
// scale at 4-32 KiB then ran 12-29% slower with the hints than without
// (reports/h200/benchmarks/tune_scale_streaming_threshold*.txt).
//
// Pointers that are not 16-byte aligned get a scalar head up to the first boundary and a
// scalar tail; input and output at different alignments take the scalar path. n == 0
// launches nothing.
//
// Small tensors are launch-latency bound, so the path to a thread's first load is kept
// short: indices are 32-bit unless the tensor needs 64 (the host picks the
// instantiation), the host precomputes every bound, and the vectors come before the few
// scalar elements (on the H200, checking for scalars first measurably slowed the
// smallest tensors).
//
// The launch shape can be overridden at compile time (-DOASR_ELEMENTWISE_THREADS=...)
// so that benchmarks/tune_kernels.py can sweep it on a GPU. The defaults come from that
// sweep on the H200: 128 threads and one vector per thread per chunk were the best or
// within 1% of it at every size (more vectors per thread lost 5-30% below 2 MiB), and a
// grid of up to 1024 waves beat a single wave by 3-5% above 128 MiB, where a static
// split of the work leaves SMs idle at the end.
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
#ifndef OASR_ELEMENTWISE_STREAMING_MIN_BYTES
#define OASR_ELEMENTWISE_STREAMING_MIN_BYTES 65536
#endif

namespace oasr {

namespace elementwise_detail {
constexpr int kThreads = OASR_ELEMENTWISE_THREADS;
constexpr int kUnroll = OASR_ELEMENTWISE_UNROLL;  // vectors each thread keeps in flight
constexpr int kWaves = OASR_ELEMENTWISE_WAVES;    // grid cap, in waves of resident blocks
constexpr int64_t kStreamingMinBytes = OASR_ELEMENTWISE_STREAMING_MIN_BYTES;  // smaller inputs: plain loads/stores
}  // namespace elementwise_detail

// Where the elements of a map go: [0, head) and [head + num_vectors * kVecSize, n) one by
// one (num_scalars of them), the rest as num_vectors 128-bit vectors. The tail's start is
// derived, not passed: every launch copies the kernel's parameters, and on the H200 scale
// at 4-16 KiB ran 1.6-1.8% slower with 56 bytes of them than with these 32
// (reports/h200/benchmarks/tune_scale_params.txt).
template <typename Index>
struct MapRange {
  Index num_vectors;
  Index num_scalars;
  Index head;
};

template <typename T, typename Op, typename Index, bool kStreaming>
__global__ void __launch_bounds__(elementwise_detail::kThreads)
    MapKernel(const T* input, T* output, MapRange<Index> range, Op op) {
  using VecT = Vec<T>;
  constexpr int kThreads = elementwise_detail::kThreads;
  constexpr int kUnroll = elementwise_detail::kUnroll;
  constexpr Index kChunk = Index{kThreads} * kUnroll;

  const T* vec_in = input + range.head;
  T* vec_out = output + range.head;
  for (Index chunk = static_cast<Index>(blockIdx.x) * kChunk + threadIdx.x; chunk < range.num_vectors;
       chunk += static_cast<Index>(gridDim.x) * kChunk) {
    VecT v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = chunk + u * kThreads;
      if (i >= range.num_vectors) continue;
      if constexpr (kStreaming) {
        v[u] = VecT::load_streaming(vec_in + i * VecT::kSize);
      } else {
        v[u] = VecT::load(vec_in + i * VecT::kSize);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = chunk + u * kThreads;
      if (i < range.num_vectors) {
        VecT r;
#pragma unroll
        for (int k = 0; k < VecT::kSize; ++k) r[k] = from_float<T>(op(to_float(v[u][k])));
        if constexpr (kStreaming) {
          r.store_streaming(vec_out + i * VecT::kSize);
        } else {
          r.store(vec_out + i * VecT::kSize);
        }
      }
    }
  }
  const Index thread = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x;
  for (Index s = thread; s < range.num_scalars; s += static_cast<Index>(gridDim.x) * kThreads) {
    const Index i = s < range.head ? s : s + range.num_vectors * VecT::kSize;
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
  const int per_sm = resident_blocks_per_sm(MapKernel<T, Op, int32_t, true>, kThreads, resident) * kWaves;
  const unsigned blocks = std::max(grid_size(num_vectors, int64_t{kThreads} * kUnroll, per_sm),
                                   grid_size(num_scalars, kThreads, per_sm));
  if (!fits_int32(n, blocks, int64_t{kThreads} * kUnroll)) {  // ~2^31 elements: far past the streaming threshold
    const MapRange<int64_t> range{num_vectors, num_scalars, head};
    MapKernel<T, Op, int64_t, true><<<blocks, kThreads, 0, stream>>>(input, output, range, op);
    return cudaGetLastError();
  }
  const MapRange<int32_t> range{static_cast<int32_t>(num_vectors), static_cast<int32_t>(num_scalars),
                                static_cast<int32_t>(head)};
  if (n * static_cast<int64_t>(sizeof(T)) >= kStreamingMinBytes) {
    MapKernel<T, Op, int32_t, true><<<blocks, kThreads, 0, stream>>>(input, output, range, op);
  } else {
    MapKernel<T, Op, int32_t, false><<<blocks, kThreads, 0, stream>>>(input, output, range, op);
  }
  return cudaGetLastError();
}

}  // namespace oasr
