// 128-bit vectors: the unit every memory-bound kernel loads and stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace oasr {

constexpr int kVecBytes = 16;

// Elements before the first 16-byte boundary of ptr (0 when already aligned).
template <typename T>
__host__ __device__ __forceinline__ int64_t elements_to_alignment(const void* ptr) {
  const auto misalignment = reinterpret_cast<uintptr_t>(ptr) % kVecBytes;
  return misalignment == 0 ? 0 : static_cast<int64_t>((kVecBytes - misalignment) / sizeof(T));
}

// Two pointers can share one vector path when they sit at the same offset from a
// 16-byte boundary and on whole elements.
template <typename T>
__host__ __device__ __forceinline__ bool same_vector_phase(const void* a, const void* b) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa % kVecBytes == pb % kVecBytes && pa % sizeof(T) == 0;
}

namespace vec_detail {
template <int kBytes>
struct Word;
template <>
struct Word<16> { using type = uint4; };
template <>
struct Word<8> { using type = uint2; };
template <>
struct Word<4> { using type = uint32_t; };
template <>
struct Word<2> { using type = uint16_t; };
}  // namespace vec_detail

// N elements of T moved as one naturally aligned transaction (N * sizeof(T) bytes:
// 2, 4, 8 or 16). Packed<T, Vec<T>::kSize> is the 128-bit vector, Packed<T, 1> one
// element: kernels templated on N get their vector and scalar paths from one body.
template <typename T, int N>
struct alignas(sizeof(T) * N) Packed {
  static constexpr int kSize = N;
  using WordT = typename vec_detail::Word<sizeof(T) * N>::type;
  T data[N];

  // One load and one store instruction of the full width (16-byte stores through the
  // st.global.wb.v4 intrinsic: with a plain assignment the compiler sometimes splits
  // them into 32- or 16-bit stores, which waste DRAM sectors).
  __device__ __forceinline__ static Packed load(const T* ptr) {
    const WordT bits = *reinterpret_cast<const WordT*>(ptr);
    Packed p;
    memcpy(p.data, &bits, sizeof(WordT));
    return p;
  }
  __device__ __forceinline__ void store(T* ptr) const {
    if constexpr (sizeof(WordT) == kVecBytes) {
      __stwb(reinterpret_cast<WordT*>(ptr), word());
    } else {
      *reinterpret_cast<WordT*>(ptr) = word();
    }
  }
  // The same for data touched once (ld/st.global.cs: evict-first in L1 and L2).
  __device__ __forceinline__ static Packed load_streaming(const T* ptr) {
    const WordT bits = __ldcs(reinterpret_cast<const WordT*>(ptr));
    Packed p;
    memcpy(p.data, &bits, sizeof(WordT));
    return p;
  }
  __device__ __forceinline__ void store_streaming(T* ptr) const { __stcs(reinterpret_cast<WordT*>(ptr), word()); }
  // The elements as one machine word.
  __device__ __forceinline__ WordT word() const {
    WordT bits;
    memcpy(&bits, data, sizeof(WordT));
    return bits;
  }
  __device__ __forceinline__ T& operator[](int i) { return data[i]; }
  __device__ __forceinline__ const T& operator[](int i) const { return data[i]; }
};

// The 128-bit vector: 16 / sizeof(T) elements in one transaction.
template <typename T>
using Vec = Packed<T, kVecBytes / static_cast<int>(sizeof(T))>;

// True when ptr sits on a 16-byte boundary.
__host__ __device__ __forceinline__ bool is_vector_aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % kVecBytes == 0;
}

}  // namespace oasr
