// TMA (sm90) copies from global into shared memory, each completing on an mbarrier (common/mbarrier.cuh):
// a plain bulk copy of contiguous bytes, and tiled copies of a box of a 2-D or 3-D tensor described by a
// CUtensorMap (encoded on the host by encode_tensor_map, passed as a __grid_constant__ kernel parameter).
// Also bulk copies the other way, out of shared memory, which complete in groups.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mbarrier.cuh"

namespace oasr {

// Copies `bytes` (a multiple of 16) from `src` to shared address `dst`, completing on `bar`, where `issue` is
// true (a predicate, not a branch). The caller announces the bytes first (mbarrier_arrive_expect_tx), once for all
// the copies of a phase: an arrival per copy could complete the phase before the later copies are announced.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                          bool issue = true) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
      "@p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n}\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "r"(static_cast<int>(issue))
      : "memory");
}

// Copies `bytes` (a multiple of 16) from shared address `src` to `dst` (both 16-byte aligned) in this thread's
// current bulk group. The shared bytes, if ordinary stores wrote them, need fence_async_shared (common/wgmma.cuh)
// first; bulk_store_commit closes the group and bulk_store_wait_read waits until the groups have read their
// shared bytes (before they are written again, or the block exits).
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// The box of `map` at element coordinates (c0 innermost, c1[, c2]) into `dst`; out-of-bounds elements read 0.
// The caller announces the box's bytes on `bar` (mbarrier_arrive_expect_tx).
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Fetches a descriptor into the TMA unit's cache ahead of its first copy.
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// The driver's function `name` in its CUDA 12.0 form, or null if the driver has none: looked up through the runtime,
// so that nothing links -lcuda. A lookup searches by name on every call: keep the result.
template <class Function>
inline Function driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t error = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
  return error == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<Function>(fn) : nullptr;
}

// A row-major tensor of 16-bit elements, `rank` (2 or 3) dimensions innermost first: `dims` elements,
// `strides` bytes between consecutive indices of dimensions 1.. (multiples of 16), boxes of `box` elements
// landing in shared memory with the 128-byte swizzle (box[0] * 2 must be 128: one swizzle row).
// Returns false when the driver refuses it (or has no cuTensorMapEncodeTiled).
inline bool encode_tensor_map(CUtensorMap* map, CUtensorMapDataType type, const void* base, int rank,
                              const uint64_t* dims, const uint64_t* strides, const uint32_t* box) {
  static const auto encode = driver_function<decltype(&::cuTensorMapEncodeTiled)>("cuTensorMapEncodeTiled");
  if (encode == nullptr) return false;
  const cuuint32_t unit[3] = {1, 1, 1};
  return encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace oasr
