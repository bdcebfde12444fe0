// Depthwise convolution over time on channels-last [B, T, C] tensors, fp32 accumulation on fp32/fp16/bf16 storage;
// the streaming step and its state update.
//
//   out[b, o, c] = act(bias[c] + sum_k weight[k, c] * x[b, o + k - left, c]),  o < T + left + right - K + 1
//
// x is zero outside [0, T) (the padding) and where mask[b, t] is false (WeNet's mask_pad). The streaming step
// convolves the frames (state ++ chunk), state [B, K-1, C] holding the left context, and then replaces the state by
// the last K-1 frames of (state ++ chunk).
//
// Three paths, the first that applies:
//   1. conv1d/tensor_core.cuh: fp16/bf16 without a streaming state, K <= 65, views staged in 16-byte copies: per
//      channel a Toeplitz product on tensor cores (mma.m16n8k16);
//   2. conv1d/staged.cuh: K = 15 and 31 (fp32, or the streaming step) on such views: frames staged in shared memory
//      by cp.async, taps and accumulators in registers; a step that one tile covers writes its state too;
//   3. conv1d/direct.cuh: everything else: each lane loads its frames itself; and the state update after a step.
// Each path's header says how it lays out the work; the measurements behind the choice: dev/conv1d/RESULTS.md.
#pragma once

#include <cuda_runtime.h>

#include "oasr/conv1d/direct.cuh"
#include "oasr/conv1d/staged.cuh"
#include "oasr/conv1d/tensor_core.cuh"

namespace oasr {
namespace conv1d {

// out = act(depthwise_conv(x) + bias) with the frames of p (see DepthwiseConv1dParams), by the first path that
// applies; with s.state (the streaming step) the state is updated too. `info` receives what a staged or
// tensor-core launch asked for (for the launcher's error message).
template <typename T>
cudaError_t DepthwiseConv1d(const DepthwiseConv1dParams<T>& p, const staged::StepState<T>& s, cudaStream_t stream,
                            staged::LaunchInfo* info = nullptr) {
  if constexpr (sizeof(T) != 2) {
    return staged::DepthwiseConv1dStaged(p, s, stream, info);
  } else {
    if (p.batch <= 0 || p.channels <= 0 || p.out_len <= 0) return cudaSuccess;
    if (!tensor::detail::applies(p, s)) return staged::DepthwiseConv1dStaged(p, s, stream, info);
    return tensor::detail::launch_for_chunks(p, stream, info);
  }
}

}  // namespace conv1d
}  // namespace oasr
