// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80+), in commit groups.
#pragma once

#include <cstdint>

namespace oasr {

// Copies src_bytes (0 or 16) of src to the shared address dst and zero-fills the rest of the 16 bytes: with 0, a
// row past a tensor's end arrives as zeros and src is not read.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace oasr
