// Grid sizing for grid-stride kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace oasr {

constexpr int kMaxDevices = 64;

// query(device) for the current device, asked once per device and remembered in
// cache[device] (a static array of kMaxDevices ints, zero-initialised); at least 1.
template <typename Query>
inline int per_device(int* cache, Query query) {
  int device = 0;
  cudaGetDevice(&device);
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  if (cache[device] == 0) cache[device] = std::max(query(device), 1);
  return cache[device];
}

// Streaming multiprocessors of the current device.
inline int multiprocessor_count() {
  static int cache[kMaxDevices] = {};
  return per_device(cache, [](int device) {
    int count = 0;
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count;
  });
}

// Enough blocks to cover `work` items at `items_per_block` each, capped at
// `blocks_per_sm` blocks for every SM; a grid-stride loop does the rest.
inline unsigned grid_size(int64_t work, int64_t items_per_block, int blocks_per_sm) {
  const int64_t needed = (work + items_per_block - 1) / items_per_block;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count()) * blocks_per_sm;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, cap)));
}

// Blocks of `kernel` that fit on one SM at `threads` threads per block (at least 1);
// `cache` is the kernel's own per-device array (see per_device).
template <typename Kernel>
inline int resident_blocks_per_sm(Kernel kernel, int threads, int* cache, size_t dynamic_smem = 0) {
  return per_device(cache, [&](int) {
    int blocks = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem);
    return blocks;
  });
}

}  // namespace oasr
