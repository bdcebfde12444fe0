// Launching CUTLASS 3.x kernels without the device adapters' per-call runtime work.
//
// A CUTLASS adapter's initialize() sets the kernel's dynamic shared memory attribute on every call, and CUTLASS
// looks up the driver's cuTensorMapEncode* entry points each time it encodes a TMA descriptor (one per
// operand): host time on every call. run_cutlass sets the attribute once per device, and
// the CUTLASS families are built with CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL (oasr/jit/cutlass.py), so that CUTLASS
// calls those two driver functions by name; this header defines them, forwarding to the entry points looked up
// once. They are weak (one per module, whichever of its sources include this) and hidden (nothing outside the
// module binds to them), so no module links -lcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cutlass/cutlass.h>
#include <cutlass/device_kernel.h>

#include "launch.cuh"
#include "tma.cuh"

#define OASR_DRIVER_SHIM extern "C" __attribute__((weak, visibility("hidden")))

OASR_DRIVER_SHIM CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                                 void* base, const cuuint64_t* dims, const cuuint64_t* strides,
                                                 const cuuint32_t* box, const cuuint32_t* element_strides,
                                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                 CUtensorMapL2promotion promotion, CUtensorMapFloatOOBfill fill) {
  static const auto encode = oasr::driver_function<decltype(&::cuTensorMapEncodeTiled)>("cuTensorMapEncodeTiled");
  return encode == nullptr ? CUDA_ERROR_NOT_FOUND
                           : encode(map, type, rank, base, dims, strides, box, element_strides, interleave, swizzle,
                                    promotion, fill);
}

OASR_DRIVER_SHIM CUresult cuTensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                                  void* base, const cuuint64_t* dims, const cuuint64_t* strides,
                                                  const int* lower_corner, const int* upper_corner,
                                                  cuuint32_t channels, cuuint32_t pixels,
                                                  const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                                  CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                                                  CUtensorMapFloatOOBfill fill) {
  static const auto encode = oasr::driver_function<decltype(&::cuTensorMapEncodeIm2col)>("cuTensorMapEncodeIm2col");
  return encode == nullptr ? CUDA_ERROR_NOT_FOUND
                           : encode(map, type, rank, base, dims, strides, lower_corner, upper_corner, channels,
                                    pixels, element_strides, interleave, swizzle, promotion, fill);
}

#undef OASR_DRIVER_SHIM

namespace oasr {

// Launches `Kernel` (a CUTLASS 3.x GEMM or conv kernel) on `stream` from the arguments of its adapter `Adapter`
// (GemmUniversalAdapter or ConvUniversalAdapter), as the adapter's initialize() and run() do, the shared memory
// attribute set once per device. The caller has checked that the kernel needs no workspace.
template <class Adapter, class Kernel>
cudaError_t run_cutlass(const typename Adapter::Arguments& args, cudaStream_t stream) {
  static int allowed[kMaxDevices] = {};
  const cudaError_t error = allow_dynamic_shared_memory(reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>),
                                                        static_cast<int>(Kernel::SharedStorageSize), allowed);
  if (error != cudaSuccess) return error;
  if (Kernel::initialize_workspace(args, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
  if (Adapter::run(params, stream) != cutlass::Status::kSuccess) {
    const cudaError_t launch = cudaGetLastError();
    return launch != cudaSuccess ? launch : cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

}  // namespace oasr
