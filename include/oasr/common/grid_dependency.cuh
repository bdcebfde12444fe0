// Programmatic dependent launch (sm90+): a kernel launched with programmatic stream serialization may start
// while the kernel ahead of it in the stream still runs, hiding its launch; these order the two where it matters.
#pragma once

#include <cuda_runtime.h>

namespace oasr {

// Lets the next kernel in the stream, if launched with programmatic stream serialization, start now (it
// still waits for this grid's completion at its grid_dependency_wait). A no-op before sm90.
__device__ __forceinline__ void grid_dependency_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the grids this one depends on have completed and their writes are visible. A no-op when the
// grid was launched without programmatic stream serialization (the stream already ordered it) or before sm90.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches `kernel` (a __global__ function's address) with `args` in clusters of `cluster` blocks; when `pdl`,
// with programmatic stream serialization: the kernel must call grid_dependency_wait before it touches
// anything the work ahead of it in `stream` writes, or that this work still reads.
inline cudaError_t launch_kernel(const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                 bool pdl, void** args, dim3 cluster = dim3(1, 1, 1)) {
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count++].val.clusterDim = {cluster.x, cluster.y, cluster.z};
  }
  if (pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelExC(&config, kernel, args);
}

}  // namespace oasr
