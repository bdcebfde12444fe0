// Row normalisations over the last dimension, fp32 math on fp32/fp16/bf16 storage.
//
//   LayerNorm: y = (x - mean(x)) * rsqrt(var(x) + eps) * w (+ b)   var: biased, two-pass
//   RMSNorm:   y = x * rsqrt(mean(x^2) + eps) * w (+ b)
//   Fused residual forms: x = residual + alpha * input (fp32, one fma), optionally
//   written to residual_out (rounded once), then normalised.
//
// A row is read from DRAM once: each thread keeps its share of the row in fp32 registers,
// so the two-pass statistics (mean, then the sum of squared deviations from it) and the
// output all come from registers. Three kernels, picked on the row length in "units"
// (N elements moved together: N = 16 bytes / sizeof(T) on the vector path, 1 on the
// scalar path):
//
//   * WarpNormKernel  (units <= 128): a group of `lanes` threads per row (a power of two
//     <= 32, the smallest with <= 4 units per thread), 256 / lanes rows per block of 256
//     threads, reductions by xor shuffles inside the group. Conformer sizes land here:
//     fp16 C=256 -> 8 lanes x 4 vectors, C=512 -> 16 x 4, C=1024 -> 32 x 4.
//   * BlockNormKernel (vector path, C <= 16384): one block per row, 32 / N units per
//     thread (32 fp32 registers of row data), blockDim = the units / (32 / N) rounded up
//     to a warp multiple (<= 512); reductions by warp shuffles plus one shared-memory
//     exchange.
//   * SmemNormKernel  (scalar path beyond 128 elements, vector path beyond 16384): one
//     block per row; each thread parks its units of the row in dynamic shared memory as
//     fp32 (it reads back only what it wrote, so no barrier is needed for the cache), up
//     to the opt-in shared memory per block (~227 KB: C <= ~58000).
//   * LoopNormKernel  (longer rows): one block per row, scalar, re-reads the row (from L2)
//     for each pass. Correct for any length, not tuned.
//
// Grids are persistent: blocks resident on every SM (occupancy query, cached) loop over
// the rows. The vector path needs C, every row stride and every pointer (input, residual,
// output, residual_out, weight, bias) to be multiples of one 16-byte vector; otherwise
// the same kernels run with N = 1.
//
// In place is safe (output == input, residual_out == residual, ...): every element is
// read and written by the same thread, all reads before any write.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/reduce.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace norm {

// Strides are in elements, between consecutive rows; the last dimension is contiguous.
template <typename T>
struct NormParams {
  T* output = nullptr;
  T* residual_out = nullptr;     // fused forms only; may be null
  const T* input = nullptr;
  const T* residual = nullptr;   // non-null selects the fused residual form
  const T* weight = nullptr;     // [cols]
  const T* bias = nullptr;       // [cols] or null
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t output_stride = 0;
  int64_t residual_out_stride = 0;
  int64_t input_stride = 0;
  int64_t residual_stride = 0;
  float eps = 1e-5f;
  float alpha = 1.0f;            // x = residual + alpha * input
  bool rms = false;              // RMSNorm instead of LayerNorm
};

namespace detail {
constexpr int kWarpKernelThreads = 256;
constexpr int kWarpMaxUnitsPerThread = 4;
constexpr int kWarpMaxUnits = kWarpSize * kWarpMaxUnitsPerThread;
constexpr int kBlockElementsPerThread = 32;
constexpr int kMaxBlockThreads = 512;
constexpr int kSmemThreads = 512;
constexpr int kLoopThreads = 512;

// Normalises one row whose units first, first + step, ... (kUnits of them) belong to
// this thread. Threads of inactive rows (row >= rows) still join the reductions.
template <typename T, int N, int kUnits, bool kAdd, typename AllReduce>
__device__ __forceinline__ void normalize_row(const NormParams<T>& p, int64_t row, bool active, int first, int step,
                                              float cols_f, AllReduce&& allreduce) {
  using P = Packed<T, N>;
  const int units = static_cast<int>(p.cols / N);
  float x[kUnits][N];
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int u = first + k * step;
    if (active && u < units) {
      const P v = P::load(p.input + row * p.input_stride + static_cast<int64_t>(u) * N);
      if constexpr (kAdd) {
        const P r = P::load(p.residual + row * p.residual_stride + static_cast<int64_t>(u) * N);
#pragma unroll
        for (int i = 0; i < N; ++i) x[k][i] = fmaf(p.alpha, to_float(v[i]), to_float(r[i]));
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) x[k][i] = to_float(v[i]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) x[k][i] = 0.0f;
    }
  }

  if constexpr (kAdd) {
    if (p.residual_out != nullptr) {
#pragma unroll
      for (int k = 0; k < kUnits; ++k) {
        const int u = first + k * step;
        if (active && u < units) {
          P s;
#pragma unroll
          for (int i = 0; i < N; ++i) s[i] = from_float<T>(x[k][i]);
          s.store(p.residual_out + row * p.residual_out_stride + static_cast<int64_t>(u) * N);
        }
      }
    }
  }

  float mean = 0.0f;
  if (!p.rms) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
#pragma unroll
      for (int i = 0; i < N; ++i) sum += x[k][i];  // units past the row hold 0
    }
    mean = allreduce(sum) / cols_f;
  }
  float squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    if (first + k * step < units) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float d = x[k][i] - mean;
        squares = fmaf(d, d, squares);
      }
    }
  }
  const float rstd = rsqrtf(allreduce(squares) / cols_f + p.eps);

#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int u = first + k * step;
    if (active && u < units) {
      const P w = P::load(p.weight + static_cast<int64_t>(u) * N);
      P y;
      if (p.bias != nullptr) {
        const P b = P::load(p.bias + static_cast<int64_t>(u) * N);
#pragma unroll
        for (int i = 0; i < N; ++i) y[i] = from_float<T>(fmaf((x[k][i] - mean) * rstd, to_float(w[i]), to_float(b[i])));
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) y[i] = from_float<T>((x[k][i] - mean) * rstd * to_float(w[i]));
      }
      y.store(p.output + row * p.output_stride + static_cast<int64_t>(u) * N);
    }
  }
}
}  // namespace detail

// Groups of 2^lanes_log2 threads, one row each.
template <typename T, int N, int kUnits, bool kAdd>
__global__ void __launch_bounds__(detail::kWarpKernelThreads) WarpNormKernel(NormParams<T> p, int lanes_log2) {
  const int lanes = 1 << lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const int rows_per_block = detail::kWarpKernelThreads >> lanes_log2;
  const int group = threadIdx.x >> lanes_log2;
  const float cols_f = static_cast<float>(p.cols);  // sums are divided (exact mean of a constant row)
  // The loop bound is uniform over the block, so whole warps always shuffle together.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < p.rows;
       base += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t row = base + group;
    detail::normalize_row<T, N, kUnits, kAdd>(p, row, row < p.rows, lane, lanes, cols_f,
                                              [lanes](float v) { return warp_allreduce_sum(v, lanes); });
  }
}

// One block per row.
template <typename T, int N, int kUnits, bool kAdd>
__global__ void __launch_bounds__(detail::kMaxBlockThreads) BlockNormKernel(NormParams<T> p) {
  __shared__ float partials[2][kWarpSize];
  int parity = 0;
  const float cols_f = static_cast<float>(p.cols);  // sums are divided (exact mean of a constant row)
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    detail::normalize_row<T, N, kUnits, kAdd>(p, row, true, threadIdx.x, blockDim.x, cols_f, [&](float v) {
      const float total = block_allreduce_sum(v, partials[parity]);
      parity ^= 1;
      return total;
    });
  }
}

// One block per row, the row cached in shared memory (cols floats of dynamic smem).
template <typename T, int N, bool kAdd>
__global__ void __launch_bounds__(detail::kSmemThreads) SmemNormKernel(NormParams<T> p) {
  using P = Packed<T, N>;
  extern __shared__ float row_cache[];
  __shared__ float partials[2][kWarpSize];
  int parity = 0;
  auto allreduce = [&](float v) {
    const float total = block_allreduce_sum(v, partials[parity]);
    parity ^= 1;
    return total;
  };
  const int units = static_cast<int>(p.cols / N);
  const float cols_f = static_cast<float>(p.cols);  // sums are divided (exact mean of a constant row)
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* in = p.input + row * p.input_stride;
    float sum = 0.0f;
#pragma unroll 4
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = P::load(in + static_cast<int64_t>(u) * N);
      float x[N];
      if constexpr (kAdd) {
        const P r = P::load(p.residual + row * p.residual_stride + static_cast<int64_t>(u) * N);
#pragma unroll
        for (int i = 0; i < N; ++i) x[i] = fmaf(p.alpha, to_float(v[i]), to_float(r[i]));
        if (p.residual_out != nullptr) {
          P s;
#pragma unroll
          for (int i = 0; i < N; ++i) s[i] = from_float<T>(x[i]);
          s.store(p.residual_out + row * p.residual_out_stride + static_cast<int64_t>(u) * N);
        }
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) x[i] = to_float(v[i]);
      }
#pragma unroll
      for (int i = 0; i < N; ++i) {
        row_cache[u * N + i] = x[i];
        sum += x[i];
      }
    }
    const float mean = p.rms ? 0.0f : allreduce(sum) / cols_f;
    float squares = 0.0f;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float d = row_cache[u * N + i] - mean;
        squares = fmaf(d, d, squares);
      }
    }
    const float rstd = rsqrtf(allreduce(squares) / cols_f + p.eps);
    T* out = p.output + row * p.output_stride;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
      const P w = P::load(p.weight + static_cast<int64_t>(u) * N);
      P y;
      if (p.bias != nullptr) {
        const P b = P::load(p.bias + static_cast<int64_t>(u) * N);
#pragma unroll
        for (int i = 0; i < N; ++i) {
          y[i] = from_float<T>(fmaf((row_cache[u * N + i] - mean) * rstd, to_float(w[i]), to_float(b[i])));
        }
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) y[i] = from_float<T>((row_cache[u * N + i] - mean) * rstd * to_float(w[i]));
      }
      y.store(out + static_cast<int64_t>(u) * N);
    }
  }
}

// One block per row, any length: the row is read again for each pass.
template <typename T, bool kAdd>
__global__ void __launch_bounds__(detail::kLoopThreads) LoopNormKernel(NormParams<T> p) {
  __shared__ float partials[2][kWarpSize];
  const float cols_f = static_cast<float>(p.cols);  // sums are divided (exact mean of a constant row)
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* in = p.input + row * p.input_stride;
    const T* res = kAdd ? p.residual + row * p.residual_stride : nullptr;
    auto value = [&](int64_t j) {
      float v = to_float(in[j]);
      if constexpr (kAdd) v = fmaf(p.alpha, v, to_float(res[j]));
      return v;
    };
    float mean = 0.0f;
    if (!p.rms) {
      float sum = 0.0f;
      for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) sum += value(j);
      mean = block_allreduce_sum(sum, partials[0]) / cols_f;
    }
    float squares = 0.0f;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) {
      const float d = value(j) - mean;
      squares = fmaf(d, d, squares);
    }
    const float rstd = rsqrtf(block_allreduce_sum(squares, partials[1]) / cols_f + p.eps);
    T* out = p.output + row * p.output_stride;
    T* res_out = kAdd && p.residual_out != nullptr ? p.residual_out + row * p.residual_out_stride : nullptr;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) {
      const float v = value(j);
      if (res_out != nullptr) res_out[j] = from_float<T>(v);
      const float n = (v - mean) * rstd;
      out[j] = from_float<T>(p.bias != nullptr ? fmaf(n, to_float(p.weight[j]), to_float(p.bias[j]))
                                               : n * to_float(p.weight[j]));
    }
    // partials[0] is written again only after the barrier inside the second reduction,
    // partials[1] only after the barrier inside the next row's first (or, for RMS, a
    // fresh barrier below).
    if (p.rms) __syncthreads();
  }
}

namespace detail {

template <typename T, int N, int kUnits, bool kAdd>
cudaError_t launch_warp(const NormParams<T>& p, int lanes_log2, cudaStream_t stream) {
  static int cache[kMaxDevices] = {};
  auto kernel = WarpNormKernel<T, N, kUnits, kAdd>;
  const int per_sm = resident_blocks_per_sm(kernel, kWarpKernelThreads, cache);
  const unsigned blocks = grid_size(p.rows, kWarpKernelThreads >> lanes_log2, per_sm);
  kernel<<<blocks, kWarpKernelThreads, 0, stream>>>(p, lanes_log2);
  return cudaGetLastError();
}

template <typename T, int N, bool kAdd>
cudaError_t launch_block(const NormParams<T>& p, int threads, cudaStream_t stream) {
  constexpr int kUnits = kBlockElementsPerThread / N;
  static int cache[kMaxBlockThreads / kWarpSize + 1][kMaxDevices] = {};
  auto kernel = BlockNormKernel<T, N, kUnits, kAdd>;
  const int per_sm = resident_blocks_per_sm(kernel, threads, cache[threads / kWarpSize]);
  const unsigned blocks = grid_size(p.rows, 1, per_sm);
  kernel<<<blocks, threads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int N, bool kAdd>
cudaError_t launch_smem(const NormParams<T>& p, size_t smem_bytes, cudaStream_t stream) {
  auto kernel = SmemNormKernel<T, N, kAdd>;
  static size_t allowed[kMaxDevices] = {};  // dynamic shared memory the kernel is opted in to
  int device = 0;
  cudaGetDevice(&device);
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  cudaError_t status = cudaSuccess;
  if (smem_bytes > allowed[device]) {
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    if (status != cudaSuccess) return status;
    allowed[device] = smem_bytes;
  }
  const int64_t units = p.cols / N;
  const int threads = static_cast<int>(std::min<int64_t>(kSmemThreads, (units + kWarpSize - 1) / kWarpSize * kWarpSize));
  int per_sm = 0;
  status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes);
  if (status != cudaSuccess) return status;
  const unsigned blocks = grid_size(p.rows, 1, std::max(per_sm, 1));
  kernel<<<blocks, threads, smem_bytes, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, bool kAdd>
cudaError_t launch_loop(const NormParams<T>& p, cudaStream_t stream) {
  static int cache[kMaxDevices] = {};
  auto kernel = LoopNormKernel<T, kAdd>;
  const int per_sm = resident_blocks_per_sm(kernel, kLoopThreads, cache);
  const unsigned blocks = grid_size(p.rows, 1, per_sm);
  kernel<<<blocks, kLoopThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

// Opt-in shared memory per block of the current device, less what the kernels declare.
inline size_t max_dynamic_smem() {
  static int cache[kMaxDevices] = {};
  return static_cast<size_t>(per_device(cache, [](int device) {
    int bytes = 0;
    cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    return bytes - 1024;
  }));
}

template <typename T, int N, bool kAdd>
cudaError_t launch(const NormParams<T>& p, cudaStream_t stream) {
  const int64_t units = p.cols / N;
  if (units <= kWarpMaxUnits) {
    int lanes_log2 = 0;  // smallest group with at most kWarpMaxUnitsPerThread units per thread
    while ((int64_t{kWarpMaxUnitsPerThread} << lanes_log2) < units) ++lanes_log2;
    const int64_t per_thread = (units + (1 << lanes_log2) - 1) >> lanes_log2;
    if (per_thread <= 1) return launch_warp<T, N, 1, kAdd>(p, lanes_log2, stream);
    if (per_thread <= 2) return launch_warp<T, N, 2, kAdd>(p, lanes_log2, stream);
    return launch_warp<T, N, 4, kAdd>(p, lanes_log2, stream);
  }
  if constexpr (N > 1) {
    constexpr int kUnits = kBlockElementsPerThread / N;
    if (units <= int64_t{kMaxBlockThreads} * kUnits) {
      const int64_t threads = (units + kUnits - 1) / kUnits;
      return launch_block<T, N, kAdd>(p, static_cast<int>((threads + kWarpSize - 1) / kWarpSize * kWarpSize),
                                       stream);
    }
  }
  const int64_t smem_bytes = p.cols * static_cast<int64_t>(sizeof(float));
  if (smem_bytes <= static_cast<int64_t>(max_dynamic_smem())) {
    return launch_smem<T, N, kAdd>(p, static_cast<size_t>(smem_bytes), stream);
  }
  return launch_loop<T, kAdd>(p, stream);
}

template <typename T>
bool vectorizable(const NormParams<T>& p) {
  constexpr int k = Vec<T>::kSize;
  auto pointer_ok = [](const void* q) { return q == nullptr || is_vector_aligned(q); };
  auto stride_ok = [&](int64_t s) { return p.rows <= 1 || s % k == 0; };
  return p.cols % k == 0 && pointer_ok(p.input) && pointer_ok(p.output) && pointer_ok(p.residual) &&
         pointer_ok(p.residual_out) && pointer_ok(p.weight) && pointer_ok(p.bias) && stride_ok(p.input_stride) &&
         stride_ok(p.output_stride) && (p.residual == nullptr || stride_ok(p.residual_stride)) &&
         (p.residual_out == nullptr || stride_ok(p.residual_out_stride));
}

}  // namespace detail

// LayerNorm / RMSNorm (p.rms) of every row, fused with the residual add when p.residual
// is set. Any row length; one DRAM read per element up to ~58000 elements (fp32 smem cache).
template <typename T>
cudaError_t Norm(const NormParams<T>& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  constexpr int kVec = Vec<T>::kSize;
  const bool vector = detail::vectorizable(p);
  if (p.residual != nullptr) {
    return vector ? detail::launch<T, kVec, true>(p, stream) : detail::launch<T, 1, true>(p, stream);
  }
  return vector ? detail::launch<T, kVec, false>(p, stream) : detail::launch<T, 1, false>(p, stream);
}

}  // namespace norm
}  // namespace oasr
