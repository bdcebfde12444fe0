// cp.async (sm80+): 16-byte copies from global into shared memory that complete in this thread's groups.
#pragma once

#include <cstdint>

namespace oasr {

// Copies 16 bytes from `src` to shared address `dst`, of which the first `src_bytes` are read and the rest are
// zeros (0: all zeros, nothing read).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace oasr
