// Conversions between storage types and the fp32 every kernel computes in, and the fp32 primitives they share.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace oasr {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ half from_float<half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ nv_bfloat16 from_float<nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// tanh by the SFU's approximation (MUFU.TANH).
__device__ __forceinline__ float tanh_approx(float x) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));
  return t;
}

// 2^x by the SFU's approximation (MUFU.EX2; denormal results flush to 0, 2^-inf = 0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// h (1 + tanh(u)) in one SFU op and one FMA: the sigmoid-gated epilogues' form, since x sigmoid(y) is that with
// h = x / 2 and u = y / 2, and gelu_tanh is with h = x / 2 (common/activation.cuh). The SFU's 16 results per clock and
// SM bound such an epilogue: an exp and a reciprocal, two ops, made fp16's bias + SiLU gemm 1.15x slower (H200).
__device__ __forceinline__ float times_one_plus_tanh(float h, float u) { return fmaf(h, tanh_approx(u), h); }

}  // namespace oasr

#include <cstdint>

namespace oasr {

// lo and hi rounded to T (after a ReLU when Relu) in one register, lo in the low half: one cvt.
template <bool Relu = false>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi, nv_bfloat16) {
  uint32_t r;
  if constexpr (Relu) {
    asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}
template <bool Relu = false>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi, half) {
  uint32_t r;
  if constexpr (Relu) {
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// The inverse of round_pair: the two 16-bit elements of r as floats, the low half first.
__device__ __forceinline__ float2 unpack_pair(uint32_t r, half) {
  return __half22float2(*reinterpret_cast<const __half2*>(&r));
}
__device__ __forceinline__ float2 unpack_pair(uint32_t r, nv_bfloat16) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
}

// Division by a divisor fixed at launch, for dividends below 2^31: one multiply-high,
// one add and one shift instead of a ~20-instruction integer division
// (Granlund & Montgomery; multiplier = floor(2^32 * (2^shift - d) / d) + 1, shift = ceil(log2 d)).
struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  FastDivmod() = default;
  __host__ __device__ explicit FastDivmod(uint32_t d) : divisor(d) {
    shift = 0;
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  // n / divisor, for n < 2^31.
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return (__umulhi(n, multiplier) + n) >> shift;
  }
  // quotient and remainder, for n < 2^31.
  __device__ __forceinline__ void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

}  // namespace oasr
