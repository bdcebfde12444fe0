// The activations the families fuse after their products or their bias, each defined once, and their names.
//
// Two forms of the sigmoid-gated ones: `activate` keeps fp32 outputs accurate (sigmoid from __expf and a fast
// reciprocal, relative error ~2^-21), `activate_rounded` is for results rounded to fp16 or bf16, where one SFU op
// (tanh.approx: absolute error below 3.6e-6 in the sigmoid, a hundredth of fp16's rounding of O(1) outputs) is cheaper.
#pragma once

#include <cuda_runtime.h>

#include "oasr/common/math.cuh"

namespace oasr {

// The host passes activations by name ("relu", "gelu", "gelu_tanh", "silu"; none for no activation): csrc's
// activation_from_name maps them to this enum once per call. (The order is the one conv1d's kernels, which switch
// on it per chunk, were measured with.)
enum class Activation : int { kNone, kSilu, kRelu, kGelu, kGeluTanh };

__device__ __forceinline__ float sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }

// The fp32-accurate forms (gelu is erf's GELU).
template <Activation A>
__device__ __forceinline__ float activate(float v) {
  static_assert(A != Activation::kGeluTanh, "gelu_tanh runs only rounded to 16 bits (activate_rounded)");
  if constexpr (A == Activation::kSilu) return v * sigmoid(v);
  if constexpr (A == Activation::kRelu) return fmaxf(v, 0.0f);
  if constexpr (A == Activation::kGelu) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  return v;
}

// SiLU, x sigmoid(x), as h (1 + tanh(h)) with h = x / 2 (sigmoid(x) = (1 + tanh(x / 2)) / 2): one SFU op.
__device__ __forceinline__ float fast_silu(float x) {
  const float h = 0.5f * x;
  return times_one_plus_tanh(h, h);
}

// The forms for results rounded to fp16 or bf16: SiLU and gelu_tanh through the SFU's tanh.
template <Activation A>
__device__ __forceinline__ float activate_rounded(float v) {
  if constexpr (A == Activation::kSilu) {
    return fast_silu(v);
  } else if constexpr (A == Activation::kGeluTanh) {
    return times_one_plus_tanh(0.5f * v, 0.7978845608f * (v + 0.044715f * v * v * v));
  } else {
    return activate<A>(v);
  }
}

}  // namespace oasr
