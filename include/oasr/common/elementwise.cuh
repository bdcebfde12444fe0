// Element-wise maps out[i] = op(in[i]) over a flat range, computed in fp32: the body
// shared by scale, swish and any other one-input stream.
//
// Memory-bound, so the kernel keeps the memory system busy and does little else: 128-bit
// loads and stores, one vector per thread per step of a grid-stride loop over blocks of
// 128 threads, on a grid of up to 1024 waves of resident blocks. On the H200 that shape
// was the best or within 1% of it at every size, and the 1024-wave cap beat a single wave
// by 3-5% above 128 MiB (a static split of the work leaves SMs idle at the end).
//
// From 64 KiB of input up, the vectors are loaded and stored as streaming (evict-first)
// data: scale up to 11% faster from 64 KiB to 32 MiB, swish and GLU up to 5% on the
// Conformer shapes. Smaller inputs gain nothing, and right after a large op has filled the
// L2, evict-first lines lose to what it left there: scale at 4-32 KiB ran 12-29% slower.
//
// Pointers that are not 16-byte aligned get a scalar head up to the first boundary and a
// scalar tail; input and output at different alignments take the scalar path. n == 0
// launches nothing. Small tensors are launch-latency bound, so the path to a thread's
// first load is short: 32-bit indices unless the tensor needs 64 (the host picks the
// instantiation), every bound precomputed on the host, the vectors before the scalars.
//
// The measurements behind these choices, and what was tried and dropped: dev/elementwise/RESULTS.md.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {

namespace elementwise_detail {
constexpr int kThreads = 128;
constexpr int kWaves = 1024;                   // grid cap, in waves of resident blocks
constexpr int64_t kStreamingMinBytes = 65536;  // smaller inputs: plain loads and stores
}  // namespace elementwise_detail

// Where the elements of a map go: [0, head) and [head + num_vectors * kVecSize, n) one by
// one (num_scalars of them), the rest as num_vectors 128-bit vectors. The tail's start is
// derived, not passed: every launch copies the kernel's parameters, and scale at 4-16 KiB
// ran 1.6-1.8% slower with 56 bytes of them than with these 32.
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
  using elementwise_detail::kThreads;
  const Index thread = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x;
  const T* vec_in = input + range.head;
  T* vec_out = output + range.head;
  for (Index i = thread; i < range.num_vectors; i += static_cast<Index>(gridDim.x) * kThreads) {
    const VecT v = kStreaming ? VecT::load_streaming(vec_in + i * VecT::kSize) : VecT::load(vec_in + i * VecT::kSize);
    VecT r;
#pragma unroll
    for (int k = 0; k < VecT::kSize; ++k) r[k] = from_float<T>(op(to_float(v[k])));
    if constexpr (kStreaming) {
      r.store_streaming(vec_out + i * VecT::kSize);
    } else {
      r.store(vec_out + i * VecT::kSize);
    }
  }
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
  const unsigned blocks = std::max(grid_size(num_vectors, kThreads, per_sm), grid_size(num_scalars, kThreads, per_sm));
  if (!fits_int32(n, blocks, kThreads)) {  // ~2^31 elements: far past the streaming threshold
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
