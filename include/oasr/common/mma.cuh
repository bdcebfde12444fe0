// Warp-level tensor-core products (mma.sync m16n8k16 and m16n8k8, sm_80+) on 16-bit operands, fp32 accumulators,
// and the 8x8 matrix moves between shared memory and their fragments (ldmatrix, stmatrix: sm_90).
//
// Fragments of one m16n8k16 product, for lane = 4 g + t (g = lane / 4, t = lane % 4), each register
// two 16-bit elements, the lower column in the low half:
//   a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]                                 (A 16x16, B 16x8)
//   c[0..1] = C[g][2t, 2t+1]   c[2..3] = C[g+8][2t, 2t+1]                            (C 16x8, fp32)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace oasr {

// c += a * b (the last argument selects the operand type).
__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, const uint32_t* b, half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, const uint32_t* b, nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c += a * b for m16n8k8: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], b[0] = B[2t, 2t+1][g].
__device__ __forceinline__ void mma_1688(float* c, const uint32_t* a, uint32_t b, half) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

__device__ __forceinline__ void mma_1688(float* c, const uint32_t* a, uint32_t b, nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

// N (1, 2 or 4) 8x8 matrices of 16-bit elements between shared memory and fragments. Lane 8 j + r
// gives the shared address of row r of matrix j (16 contiguous bytes); register j of lane 4 g + t
// holds row g, columns 2t, 2t+1 of matrix j, or with kTrans rows 2t, 2t+1 of column g (a transpose).
template <int N, bool kTrans>
__device__ __forceinline__ void load_matrices(uint32_t (&r)[N], uint32_t address) {
  if constexpr (N == 1 && kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(address));
  } else if constexpr (N == 1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(address));
  } else if constexpr (N == 2 && kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(address));
  } else if constexpr (N == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
  } else if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
  }
}

// The inverse of load_matrices<N, false>: register j of lane 4 g + t to row g, columns 2t, 2t+1 of matrix j.
template <int N>
__device__ __forceinline__ void store_matrices(const uint32_t (&r)[N], uint32_t address) {
  if constexpr (N == 1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(address), "r"(r[0]) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1,%2};\n" ::"r"(address), "r"(r[0]), "r"(r[1])
                 : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(address), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
  }
}

// Two 16-bit elements as one fragment register, `lo` in the low half.
__device__ __forceinline__ uint32_t pack_pair(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// The bits of 1.0 in a 16-bit storage type.
template <typename T>
__device__ __forceinline__ uint16_t one_bits();
template <>
__device__ __forceinline__ uint16_t one_bits<half>() { return 0x3C00; }
template <>
__device__ __forceinline__ uint16_t one_bits<nv_bfloat16>() { return 0x3F80; }

}  // namespace oasr
