// Programmatic dependent launch (sm90+): a kernel launched with programmatic stream serialization may start
// while the kernel before it in the stream still runs; these order the two where it matters.
#pragma once

namespace oasr {

// Lets the next kernel in the stream, if launched with programmatic stream serialization, start now (it
// still waits for this grid's completion at its grid_dependency_wait). A no-op before sm90.
__device__ __forceinline__ void grid_dependency_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the kernels this grid depends on have completed and their writes are visible. A no-op when
// the grid was launched without programmatic stream serialization (the stream already ordered it) or before sm90.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace oasr
