// Grid sizing for grid-stride kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace oasr {

constexpr int kMaxDevices = 64;

// Streaming multiprocessors of the current device, queried once per device.
inline int multiprocessor_count() {
  static int counts[kMaxDevices] = {};
  int device = 0;
  cudaGetDevice(&device);
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  if (counts[device] == 0) {
    cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device);
    if (counts[device] <= 0) counts[device] = 1;
  }
  return counts[device];
}

// Enough blocks to cover `work` items at `items_per_block` each, capped at
// `blocks_per_sm` blocks for every SM; a grid-stride loop does the rest.
inline unsigned grid_size(int64_t work, int64_t items_per_block, int blocks_per_sm) {
  const int64_t needed = (work + items_per_block - 1) / items_per_block;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count()) * blocks_per_sm;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, cap)));
}

// Blocks of `kernel` that fit on one SM at `threads` threads per block (at least 1),
// queried once per device and remembered in cache[device] (a per-kernel static array
// of kMaxDevices ints, zero-initialised).
template <typename Kernel>
inline int resident_blocks_per_sm(Kernel kernel, int threads, int* cache, size_t dynamic_smem = 0) {
  int device = 0;
  cudaGetDevice(&device);
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  if (cache[device] == 0) {
    int blocks = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem);
    cache[device] = std::max(blocks, 1);
  }
  return cache[device];
}

}  // namespace oasr
