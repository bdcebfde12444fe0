// Warpgroup tensor-core products (wgmma, sm_90a): A from registers or shared memory, B from shared memory,
// fp32 accumulators. The instruction strings are CuTe's (cute/arch/mma_sm90_gmma.hpp); this file picks the
// one of a (type, N) pair and spells the fences around it.
//
// The four warps of a warpgroup each hold 16 rows of the 64-row A and D: warp w (= warp index % 4),
// lane 4 g + t has A's registers of mma_16816 (common/mma.cuh) for rows 16 w + g, 16 w + g + 8, and
// D's acc[4 j + {0, 1}] = D[16 w + g][8 j + 2 t, + 1], acc[4 j + {2, 3}] = D[16 w + g + 8][same].
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include <cute/arch/mma_sm90_gmma.hpp>

namespace oasr {

// Descriptor of a K-major B tile in shared memory without swizzle: core matrices of 8 rows x 16 bytes
// (contiguous), `k_stride` bytes apart along K and `row_stride` bytes apart along N.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t address, uint32_t k_stride, uint32_t row_stride) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(k_stride >> 4) << 16) |
         (static_cast<uint64_t>(row_stride >> 4) << 32);
}

// Descriptor of a K-major tile in shared memory as TMA writes it with the 128-byte swizzle: rows of 64
// 16-bit elements (128 bytes), 8-row atoms 1024 bytes apart, the tile 1024-byte aligned. The k-th 16-element
// slice of a row starts 32 k bytes in (`address` + 32 k).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// Orders this thread's register writes (A fragments, accumulators) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// Orders this thread's ordinary shared-memory stores before the async proxy's reads of them (wgmma's operands, a
// bulk copy's source); a barrier after it publishes them to the threads that issue those.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Waits until at most N committed groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator registers across a wgmma boundary; for A registers, from reusing
// them before the products that read them are known to be done (call it after that wait).
template <int N>
__device__ __forceinline__ void wgmma_fence_registers(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_fence_registers(uint32_t (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

namespace detail {

namespace gmma = cute::SM90::GMMA;
// CuTe's instructions for (T, N), K-major operands: A from registers (`rs`) or shared memory (`ss`).
template <typename T, int N>
struct Wgmma;
#define OASR_WGMMA(T, N, STEM)                                 \
  template <>                                                  \
  struct Wgmma<T, N> {                                         \
    using rs = gmma::STEM##_RS<gmma::Major::K, gmma::Major::K>; \
    using ss = gmma::STEM##_SS<gmma::Major::K, gmma::Major::K>; \
  };
OASR_WGMMA(nv_bfloat16, 32, MMA_64x32x16_F32BF16BF16)
OASR_WGMMA(nv_bfloat16, 64, MMA_64x64x16_F32BF16BF16)
OASR_WGMMA(nv_bfloat16, 128, MMA_64x128x16_F32BF16BF16)
OASR_WGMMA(nv_bfloat16, 192, MMA_64x192x16_F32BF16BF16)
OASR_WGMMA(nv_bfloat16, 256, MMA_64x256x16_F32BF16BF16)
OASR_WGMMA(half, 32, MMA_64x32x16_F32F16F16)
OASR_WGMMA(half, 64, MMA_64x64x16_F32F16F16)
OASR_WGMMA(half, 128, MMA_64x128x16_F32F16F16)
OASR_WGMMA(half, 192, MMA_64x192x16_F32F16F16)
OASR_WGMMA(half, 256, MMA_64x256x16_F32F16F16)
#undef OASR_WGMMA

template <typename Atom, int... I>
__device__ __forceinline__ void wgmma_rs(float* acc, const uint32_t (&a)[4], uint64_t b,
                                         std::integer_sequence<int, I...>) {
  Atom::fma(a[0], a[1], a[2], a[3], b, acc[I]...);
}

template <typename Atom, int... I>
__device__ __forceinline__ void wgmma_ss(float* acc, uint64_t a, uint64_t b, bool accumulate,
                                         std::integer_sequence<int, I...>) {
  Atom::fma(a, b, acc[I]..., accumulate ? gmma::ScaleOut::One : gmma::ScaleOut::Zero);
}

}  // namespace detail

// acc (64 x N) += A (64 x 16, registers) * B (16 x N, descriptor `b`), issued asynchronously.
template <typename T, int N>
__device__ __forceinline__ void wgmma_m64k16(float (&acc)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  detail::wgmma_rs<typename detail::Wgmma<T, N>::rs>(acc, a, b, std::make_integer_sequence<int, N / 2>{});
}

// acc[Offset, Offset + N / 2) (64 x N, a column range of wider accumulators) = A (64 x 16, descriptor `a`) *
// B (16 x N, descriptor `b`) + (accumulate ? that range : 0), issued asynchronously.
template <typename T, int N, int Offset, int M>
__device__ __forceinline__ void wgmma_ss_m64k16_part(float (&acc)[M], uint64_t a, uint64_t b, bool accumulate) {
  static_assert(Offset + N / 2 <= M);
  detail::wgmma_ss<typename detail::Wgmma<T, N>::ss>(acc + Offset, a, b, accumulate,
                                                         std::make_integer_sequence<int, N / 2>{});
}

// The same into the whole of acc (64 x N).
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss_m64k16(float (&acc)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
  wgmma_ss_m64k16_part<T, N, 0>(acc, a, b, accumulate);
}

}  // namespace oasr
