// Activations of the Conformer encoder, computed in fp32 on fp32/fp16/bf16 storage.
//
//   GLU:   out[r, j] = in[r, j] * sigmoid(in[r, C + j])   (in: [rows, 2C], out: [rows, C])
//   Swish: out[i]    = in[i] * sigmoid(in[i])             (SiLU, element-wise)
//
// Both are memory-bound streams, built like the scale kernel: 128-bit loads and stores,
// kUnroll vectors in flight per thread, a grid-stride loop over a grid of as many blocks
// as are resident on the GPU at once (occupancy query, cached per kernel and device).
//
// GLU works on a 2-D view with row strides (the last dimension contiguous). Its vector
// path needs C, both row strides and both base pointers to be multiples of one 16-byte
// vector; anything else takes the scalar path (same kernel body, one element per
// access). The flat unit index is split into (row, column) with a FastDivmod when the
// unit count fits in 31 bits, a 64-bit division otherwise.
//
// Swish is a flat element-wise map (common/elementwise.cuh, shared with scale).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/elementwise.cuh"
#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace activation {

namespace detail {
constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // vectors (of each operand) each thread keeps in flight

// x / (1 + e^-x): IEEE division, so x -> -inf gives -0 rather than NaN from inf/inf in
// the sigmoid form; __expf is ex2.approx (relative error ~2^-21 for |x| < 100).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// (row, column-unit) of flat unit u.
template <bool kFastDiv>
__device__ __forceinline__ void split(int64_t u, FastDivmod div, int64_t units_per_row, int64_t& row,
                                      int64_t& col) {
  if constexpr (kFastDiv) {
    uint32_t q, r;
    div.divmod(static_cast<uint32_t>(u), q, r);
    row = q;
    col = r;
  } else {
    row = u / units_per_row;
    col = u - row * units_per_row;
  }
}
}  // namespace detail

// One unit = N elements (N = 16 bytes / sizeof(T) on the vector path, 1 on the scalar one).
template <typename T, int N, bool kFastDiv>
__global__ void __launch_bounds__(detail::kThreads)
    GluKernel(const T* input, T* output, int64_t num_units, int64_t units_per_row,
              FastDivmod row_div, int64_t cols, int64_t in_stride, int64_t out_stride) {
  using P = Packed<T, N>;
  constexpr int kUnroll = detail::kUnroll;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  for (int64_t base = thread; base < num_units; base += stride * kUnroll) {
    P a[kUnroll], g[kUnroll];
    int64_t out_offset[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < num_units) {
        int64_t row, col;
        detail::split<kFastDiv>(i, row_div, units_per_row, row, col);
        const T* src = input + row * in_stride + col * N;
        a[u] = P::load(src);
        g[u] = P::load(src + cols);
        out_offset[u] = row * out_stride + col * N;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < num_units) {
        P y;
#pragma unroll
        for (int k = 0; k < N; ++k) y[k] = from_float<T>(to_float(a[u][k]) * detail::sigmoid(to_float(g[u][k])));
        y.store(output + out_offset[u]);
      }
    }
  }
}

// input: rows x (>= 2 * cols) with row stride in_stride (elements); output: rows x cols
// with row stride out_stride. The halves are input[:, :cols] and input[:, cols:2*cols].
template <typename T>
cudaError_t GLU(const T* input, T* output, int64_t rows, int64_t cols, int64_t in_stride, int64_t out_stride,
                cudaStream_t stream) {
  using namespace detail;
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  constexpr int kVec = Vec<T>::kSize;
  const bool vector = cols % kVec == 0 && (rows == 1 || (in_stride % kVec == 0 && out_stride % kVec == 0)) &&
                      is_vector_aligned(input) && is_vector_aligned(output);
  const int n = vector ? kVec : 1;
  const int64_t units_per_row = cols / n;
  const int64_t num_units = rows * units_per_row;
  const bool fast_div = num_units < (int64_t{1} << 31);
  const FastDivmod row_div(fast_div ? static_cast<uint32_t>(units_per_row) : 1u);
#define OASR_GLU_LAUNCH(N_, FAST_)                                                                           \
  do {                                                                                                       \
    static int cache[kMaxDevices] = {};                                                                      \
    auto kernel = GluKernel<T, N_, FAST_>;                                                                   \
    const unsigned blocks =                                                                                  \
        grid_size(num_units, int64_t{kThreads} * kUnroll, resident_blocks_per_sm(kernel, kThreads, cache)); \
    kernel<<<blocks, kThreads, 0, stream>>>(input, output, num_units, units_per_row, row_div, cols, in_stride, \
                                            out_stride);                                                     \
  } while (0)
  if (vector) {
    if (fast_div) OASR_GLU_LAUNCH(kVec, true); else OASR_GLU_LAUNCH(kVec, false);
  } else {
    if (fast_div) OASR_GLU_LAUNCH(1, true); else OASR_GLU_LAUNCH(1, false);
  }
#undef OASR_GLU_LAUNCH
  return cudaGetLastError();
}

struct SiluOp {
  __device__ __forceinline__ float operator()(float x) const { return detail::silu(x); }
};

// output[i] = silu(input[i]) for i in [0, n), contiguous. output may equal input.
// The streaming body is common/elementwise.cuh, shared with scale.
template <typename T>
cudaError_t Swish(const T* input, T* output, int64_t n, cudaStream_t stream) {
  return Map(input, output, n, SiluOp{}, stream);
}

}  // namespace activation
}  // namespace oasr
