// Warp and block all-reductions (every participating thread gets the result).
//
// Butterfly (xor) shuffles: at every step lane i adds s_i + s_{i^o} and lane i^o adds
// s_{i^o} + s_i, the same fp32 sum, so all lanes of a group end with bit-identical
// results. Kernels rely on that: every thread of a row normalises with the same mean.
#pragma once

#include <cuda_runtime.h>

namespace oasr {

constexpr unsigned kFullWarpMask = 0xffffffffu;
constexpr int kWarpSize = 32;

// Sum over aligned groups of kWidth lanes (a power of two <= 32). All 32 lanes of the
// warp must call it.
template <int kWidth = kWarpSize>
__device__ __forceinline__ float warp_allreduce_sum(float v) {
  static_assert(kWidth >= 1 && kWidth <= kWarpSize && (kWidth & (kWidth - 1)) == 0, "bad width");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

template <int kWidth = kWarpSize>
__device__ __forceinline__ float warp_allreduce_max(float v) {
  static_assert(kWidth >= 1 && kWidth <= kWarpSize && (kWidth & (kWidth - 1)) == 0, "bad width");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

// Sum over aligned groups of `width` lanes, width a power of two <= 32 known only at
// run time. All 32 lanes of the warp must call it.
__device__ __forceinline__ float warp_allreduce_sum(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). `smem` holds at
// least 32 floats. One __syncthreads: the caller must not hand the same `smem` to the
// next call before every thread has returned from this one -- alternate two buffers
// (a barrier separates consecutive calls, so the call after next may reuse a buffer).
__device__ __forceinline__ float block_allreduce_sum(float v, float* smem) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = warp_allreduce_sum(v);
  if (num_warps == 1) return v;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  // Every warp reduces the same partials in the same order: identical results.
  return warp_allreduce_sum(lane < num_warps ? smem[lane] : 0.0f);
}

}  // namespace oasr
