// Activations of the Conformer encoder, computed in fp32 on fp32/fp16/bf16 storage.
//
//   GLU:   out[r, j] = in[r, j] * sigmoid(in[r, C + j])   (in: [rows, 2C], out: [rows, C])
//   Swish: out[i]    = in[i] * sigmoid(in[i])             (SiLU, element-wise)
//   Bias + activation: out[r, j] = act(in[r, j] + bias[j])   (in, out: [rows, C]; out may be in)
//
// Both are memory-bound streams. Swish is a flat element-wise map (common/elementwise.cuh,
// shared with scale). GLU is built the same way, streaming loads and stores, block size
// and grid included, on a 2-D view with row strides (the last dimension contiguous): a
// "unit" is one vector of each half, one unit per thread per step of a grid-stride loop,
// 32-bit indices when they suffice. Its vector path needs C, both row strides and both
// base pointers to be multiples of one 16-byte vector; anything else takes the scalar
// path (same kernel body, one element per unit). The flat unit index is split into
// (row, column) with a FastDivmod on the 32-bit path, a 64-bit division otherwise.
//
// Bias + activation is the pass after a product whose own epilogue lacks them (cuBLAS has no SiLU): GLU's row walk,
// one unit a vector of one row. Its activations are common/activation.cuh's `activate_rounded` on fp16/bf16 (the
// forms the gemm epilogues use, so both backends round alike) and `activate` on fp32.
//
// The sigmoid and SiLU are common/activation.cuh's fp32-accurate forms (their limits are exact: e^-x = inf makes
// the reciprocal 0, so silu(x) = -0 for very negative x).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "oasr/common/activation.cuh"
#include "oasr/common/elementwise.cuh"
#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace activation {

namespace detail {
constexpr int kGluThreads = elementwise_detail::kThreads;
// Units (a vector of each half) each thread keeps in flight, as the map's one vector. The
// loop stays: written for one unit, the kernel compiles to different SASS.
constexpr int kGluUnroll = 1;

// (row, column-unit) of flat unit u: a FastDivmod (built from units_per_row) for 32-bit
// indices, a division otherwise.
__device__ __forceinline__ void split(int32_t u, FastDivmod div, int32_t, int32_t& row, int32_t& col) {
  uint32_t q, r;
  div.divmod(static_cast<uint32_t>(u), q, r);
  row = static_cast<int32_t>(q);
  col = static_cast<int32_t>(r);
}
__device__ __forceinline__ void split(int64_t u, FastDivmod, int64_t units_per_row, int64_t& row, int64_t& col) {
  row = u / units_per_row;
  col = u - row * units_per_row;
}

template <typename Index>
struct GluShape {
  Index num_units;
  Index units_per_row;
  Index cols;
  Index in_stride;
  Index out_stride;
};
}  // namespace detail

// One unit = N elements of each half (N = 16 bytes / sizeof(T) on the vector path, 1 on
// the scalar one).
template <typename T, int N, typename Index>
__global__ void __launch_bounds__(detail::kGluThreads)
    GluKernel(const T* input, T* output, detail::GluShape<Index> shape, FastDivmod row_div) {
  using P = Packed<T, N>;
  constexpr int kThreads = detail::kGluThreads;
  constexpr int kUnroll = detail::kGluUnroll;
  constexpr Index kChunk = Index{kThreads} * kUnroll;
  for (Index chunk = static_cast<Index>(blockIdx.x) * kChunk + threadIdx.x; chunk < shape.num_units;
       chunk += static_cast<Index>(gridDim.x) * kChunk) {
    P a[kUnroll], g[kUnroll];
    Index out_offset[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = chunk + u * kThreads;
      if (i < shape.num_units) {
        Index row, col;
        detail::split(i, row_div, shape.units_per_row, row, col);
        const T* src = input + row * shape.in_stride + col * N;
        a[u] = P::load_streaming(src);
        g[u] = P::load_streaming(src + shape.cols);
        out_offset[u] = row * shape.out_stride + col * N;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (chunk + u * kThreads < shape.num_units) {
        P y;
#pragma unroll
        for (int k = 0; k < N; ++k) y[k] = from_float<T>(to_float(a[u][k]) * sigmoid(to_float(g[u][k])));
        y.store_streaming(output + out_offset[u]);
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
  static int resident[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(GluKernel<T, kVec, int32_t>, kGluThreads, resident);
  const unsigned blocks = grid_size(num_units, int64_t{kGluThreads} * kGluUnroll, per_sm * elementwise_detail::kWaves);
  // The largest offset the kernel forms: the last row's start plus 2C, or a unit index.
  const int64_t extent = std::max((rows - 1) * std::max(in_stride, out_stride) + 2 * cols, num_units);
  const bool narrow = fits_int32(extent, blocks, int64_t{kGluThreads} * kGluUnroll);
  auto run = [&](auto vec_size) {
    constexpr int N = decltype(vec_size)::value;
    if (narrow) {
      const GluShape<int32_t> shape{static_cast<int32_t>(num_units), static_cast<int32_t>(units_per_row),
                                    static_cast<int32_t>(cols), static_cast<int32_t>(in_stride),
                                    static_cast<int32_t>(out_stride)};
      GluKernel<T, N><<<blocks, kGluThreads, 0, stream>>>(input, output, shape,
                                                          FastDivmod(static_cast<uint32_t>(units_per_row)));
    } else {
      const GluShape<int64_t> shape{num_units, units_per_row, cols, in_stride, out_stride};
      GluKernel<T, N><<<blocks, kGluThreads, 0, stream>>>(input, output, shape, FastDivmod());
    }
  };
  if (vector) {
    run(std::integral_constant<int, kVec>{});
  } else {
    run(std::integral_constant<int, 1>{});
  }
  return cudaGetLastError();
}

struct SiluOp {
  __device__ __forceinline__ float operator()(float x) const { return activate<Activation::kSilu>(x); }
};

// output[i] = silu(input[i]) for i in [0, n), contiguous. output may equal input.
// The streaming body is common/elementwise.cuh, shared with scale.
template <typename T>
cudaError_t Swish(const T* input, T* output, int64_t n, cudaStream_t stream) {
  return Map(input, output, n, SiluOp{}, stream);
}

// act(v) as the gemm epilogues compute it before rounding to T (fp32: the accurate forms; gelu_tanh has no
// `activate` form, so tanhf).
template <typename T, Activation A>
__device__ __forceinline__ float bias_activate(float v) {
  if constexpr (!std::is_same_v<T, float>) {
    return activate_rounded<A>(v);
  } else if constexpr (A == Activation::kGeluTanh) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  } else {
    return activate<A>(v);
  }
}

// One unit = N elements of one row (N = 16 bytes / sizeof(T) on the vector path, 1 on the scalar one); `bias` may
// be null (the activation alone). Each element is read and written by the same thread, so output may be input.
template <typename T, int N, typename Index, Activation A>
__global__ void __launch_bounds__(detail::kGluThreads)
    BiasActivationKernel(const T* input, const T* bias, T* output, detail::GluShape<Index> shape, FastDivmod row_div) {
  using P = Packed<T, N>;
  constexpr int kThreads = detail::kGluThreads;
  for (Index i = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x; i < shape.num_units;
       i += static_cast<Index>(gridDim.x) * kThreads) {
    Index row, col;
    detail::split(i, row_div, shape.units_per_row, row, col);
    const P x = P::load_streaming(input + row * shape.in_stride + col * N);
    P y;
    if (bias != nullptr) {
      const P b = P::load(bias + col * N);  // (a row of C, read by every row: kept in the caches)
#pragma unroll
      for (int k = 0; k < N; ++k) y[k] = from_float<T>(bias_activate<T, A>(to_float(x[k]) + to_float(b[k])));
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) y[k] = from_float<T>(bias_activate<T, A>(to_float(x[k])));
    }
    y.store_streaming(output + row * shape.out_stride + col * N);
  }
}

// input, output: rows x cols with row strides in_stride and out_stride (elements); bias: cols, or null.
template <typename T>
cudaError_t BiasActivation(const T* input, const T* bias, T* output, int64_t rows, int64_t cols, int64_t in_stride,
                           int64_t out_stride, Activation act, cudaStream_t stream) {
  using namespace detail;
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  constexpr int kVec = Vec<T>::kSize;
  const bool vector = cols % kVec == 0 && (rows == 1 || (in_stride % kVec == 0 && out_stride % kVec == 0)) &&
                      is_vector_aligned(input) && is_vector_aligned(output) &&
                      (bias == nullptr || is_vector_aligned(bias));
  const int n = vector ? kVec : 1;
  const int64_t units_per_row = cols / n;
  const int64_t num_units = rows * units_per_row;
  static int resident[kMaxDevices] = {};
  const int per_sm =
      resident_blocks_per_sm(BiasActivationKernel<T, kVec, int32_t, Activation::kSilu>, kGluThreads, resident);
  const unsigned blocks = grid_size(num_units, kGluThreads, per_sm * elementwise_detail::kWaves);
  const int64_t extent = std::max((rows - 1) * std::max(in_stride, out_stride) + cols, num_units);
  const bool narrow = fits_int32(extent, blocks, kGluThreads);
  auto run = [&](auto vec_size, auto activation) {
    constexpr int N = decltype(vec_size)::value;
    constexpr Activation A = decltype(activation)::value;
    if (narrow) {
      const GluShape<int32_t> shape{static_cast<int32_t>(num_units), static_cast<int32_t>(units_per_row),
                                    static_cast<int32_t>(cols), static_cast<int32_t>(in_stride),
                                    static_cast<int32_t>(out_stride)};
      BiasActivationKernel<T, N, int32_t, A><<<blocks, kGluThreads, 0, stream>>>(
          input, bias, output, shape, FastDivmod(static_cast<uint32_t>(units_per_row)));
    } else {
      const GluShape<int64_t> shape{num_units, units_per_row, cols, in_stride, out_stride};
      BiasActivationKernel<T, N, int64_t, A><<<blocks, kGluThreads, 0, stream>>>(input, bias, output, shape,
                                                                                FastDivmod());
    }
  };
  auto with = [&](auto activation) {
    if (vector) {
      run(std::integral_constant<int, kVec>{}, activation);
    } else {
      run(std::integral_constant<int, 1>{}, activation);
    }
  };
  switch (act) {
    case Activation::kNone: with(std::integral_constant<Activation, Activation::kNone>{}); break;
    case Activation::kSilu: with(std::integral_constant<Activation, Activation::kSilu>{}); break;
    case Activation::kRelu: with(std::integral_constant<Activation, Activation::kRelu>{}); break;
    case Activation::kGelu: with(std::integral_constant<Activation, Activation::kGelu>{}); break;
    case Activation::kGeluTanh: with(std::integral_constant<Activation, Activation::kGeluTanh>{}); break;
  }
  return cudaGetLastError();
}

}  // namespace activation
}  // namespace oasr
