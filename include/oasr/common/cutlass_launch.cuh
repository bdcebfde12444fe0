// Launching a CUTLASS 3.x device adapter (GemmUniversalAdapter, ConvUniversalAdapter) per call without its
// initialize(), which also sets the kernel's shared-memory attribute through the driver on every call.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/cutlass.h>
#include <cutlass/device_kernel.h>

#include "launch.cuh"

namespace oasr {

// Runs `Adapter`'s kernel `Kernel` with `args` on `stream`: its parameters (the TMA descriptors among them) built
// per call, its dynamic shared memory allowed once per device. For kernels that need no workspace.
template <class Adapter, class Kernel>
cudaError_t run_cutlass(typename Adapter::Arguments const& args, cudaStream_t stream) {
  constexpr int kSmem = Kernel::SharedStorageSize;
  if constexpr (kSmem >= (48 << 10)) {
    static int allowed[kMaxDevices] = {};
    per_device(allowed, [](int) {  // a refusal shows as the launch's error
      cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      return 1;
    });
  }
  typename Adapter::Params params = Kernel::to_underlying_arguments(args, nullptr);
  if (Adapter::run(params, stream) != cutlass::Status::kSuccess) {
    const cudaError_t error = cudaGetLastError();
    return error != cudaSuccess ? error : cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

}  // namespace oasr
