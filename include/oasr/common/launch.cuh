// Grid sizing: grid-stride kernels sized to the GPU, and grids that cover their work once.
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

// Streaming multiprocessors of `device`, asked once per device (at least 1).
inline int multiprocessor_count(int device) {
  static int cache[kMaxDevices] = {};
  const auto query = [device] {
    int count = 0;
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return std::max(count, 1);
  };
  if (device < 0 || device >= kMaxDevices) return query();
  if (cache[device] == 0) cache[device] = query();
  return cache[device];
}

// Streaming multiprocessors of the current device.
inline int multiprocessor_count() {
  int device = 0;
  cudaGetDevice(&device);
  return multiprocessor_count(device);
}

// Enough blocks to cover `work` items at `items_per_block` each, capped at
// `blocks_per_sm` blocks for every SM; a grid-stride loop does the rest.
inline unsigned grid_size(int64_t work, int64_t items_per_block, int blocks_per_sm) {
  const int64_t needed = (work + items_per_block - 1) / items_per_block;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count()) * blocks_per_sm;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, cap)));
}

// Threads the current device holds at once: SMs x resident threads per SM.
inline int64_t resident_threads() {
  static int cache[kMaxDevices] = {};
  const int per_sm = per_device(cache, [](int device) {
    int threads = 0;
    cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device);
    return threads;
  });
  return int64_t{multiprocessor_count()} * per_sm;
}

// One block per `items_per_block` items of `work`, for kernels that take their items once
// rather than looping over a grid sized to the GPU (up to 2^31 - 1 blocks; a grid-stride
// loop in the kernel does what is left beyond).
inline unsigned covering_grid(int64_t work, int64_t items_per_block) {
  const int64_t needed = (work + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, INT32_MAX));
}

// Whether a grid-stride kernel's indices fit in int32: the largest offset it forms,
// `extent`, plus two grid strides of `blocks` x `items_per_block` (the loop's last step).
inline bool fits_int32(int64_t extent, unsigned blocks, int64_t items_per_block) {
  return extent + 2 * int64_t{blocks} * items_per_block <= INT32_MAX;
}

// Lets `kernel` take `bytes` of dynamic shared memory on the current device (beyond 48 KB it must be allowed),
// calling the runtime only when more than before is asked there. `allowed` is the kernel's
// own per-device array (see per_device).
inline cudaError_t allow_dynamic_shared_memory(const void* kernel, int bytes, int* allowed) {
  int device = 0;
  cudaGetDevice(&device);
  const bool remembered = device < kMaxDevices;
  if (remembered && allowed[device] >= bytes) return cudaSuccess;
  const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (error != cudaSuccess) {
    cudaGetLastError();  // returned here: not left for the next launch's check
  } else if (remembered) {
    allowed[device] = bytes;
  }
  return error;
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
