// Row normalisations over the last dimension, fp32 math on fp32/fp16/bf16 storage.
//
//   LayerNorm: y = (x - mean(x)) * rsqrt(var(x) + eps) * w (+ b)   var: biased, two-pass
//   RMSNorm:   y = x * rsqrt(mean(x^2) + eps) * w (+ b)
//   Fused residual forms: x = residual + alpha * input (fp32, one fma), optionally
//   written to residual_out (rounded once), then normalised.
//
// A row is read from DRAM once: each thread keeps its share of the row in registers as
// loaded (RowSlice; the fused forms keep input and residual and redo the one fma), so
// the two-pass statistics (mean, then the sum of squared deviations from it) and the
// output all come from registers. Four kernels, picked on the row length in "units"
// (N elements moved together: N = 16 bytes / sizeof(T) on the vector path, 1 on the
// scalar path):
//
//   * WarpNormKernel  (units <= 32 x 4): a group of `lanes` threads per row (a power of
//     two <= 32, the smallest with <= 4 units per thread), 128 / lanes rows per block of
//     128 threads, reductions by xor shuffles inside the group. Each block converts the
//     weight and bias to fp32 into shared memory once (SharedAffine), while its first
//     rows load. Conformer sizes land here: fp16 C=256 -> 8 lanes x 4 vectors, C=512 ->
//     16 x 4, C=1024 -> 32 x 4. When the rows are few (groups of 4 units would keep under
//     a quarter of the GPU's resident threads busy), the vector path halves the units per
//     thread, down to 1, and rows that then need more than a warp go to the block kernel:
//     fp16 (8, 200, 1024) -> one block of 128 threads x 1 vector per row.
//   * BlockNormKernel (vector path, C <= 16384): one block per row, with the fewest units
//     per thread (1, 2, 4, ... up to 32 elements) that keep it at 128 threads, then up
//     to 512 threads; reductions by warp shuffles plus one shared-memory exchange.
//     fp32 C=1024 -> 128 threads x 2 vectors.
//   * SmemNormKernel  (scalar path beyond 128 elements, vector path beyond 16384): one
//     block per row; each thread parks its units of the row in dynamic shared memory as
//     fp32 (it reads back only what it wrote, so no barrier is needed for the cache), up
//     to the opt-in shared memory per block (~227 KB: C <= ~58000).
//   * LoopNormKernel  (longer rows): one block per row, scalar, re-reads the row (from L2)
//     for each pass. Correct for any length, not tuned.
//
// Why, on the H200 (Conformer shapes and 1 GiB): the staged affine made the warp kernel
// up to 13% faster (fused (16, 1500, 1024) fp16 +6%); spreading few rows over more
// threads, up to 29% (fused (8, 200, 1024) bf16); streaming loads and stores, 0.5-14% on
// the Conformer shapes. What else was tried: dev/norm/RESULTS.md.
//
// The warp and block kernels' grids cover the rows once; the smem and loop kernels'
// resident blocks loop over them. The vector path needs C, every row stride and every
// pointer (input, residual, output, residual_out, weight, bias) to be multiples of one
// 16-byte vector; otherwise the same kernels run with N = 1.
//
// In place is safe (output == input, residual_out == residual, ...): every element is
// read and written by the same thread, all reads before any write.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/reduce.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace norm {

// ---------------------------------------------------------------------------------------
// Data layout
// ---------------------------------------------------------------------------------------

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
// Warp kernel: 128-thread blocks (256 were up to 3% slower, 64 up to 7% on few rows of
// C=256) and at most 4 units per thread (beat 8); the vector path halves the units per
// thread while its threads would be fewer than 1 / kSpreadBelow of the resident threads.
constexpr int kWarpKernelThreads = 128;
constexpr int kWarpMaxUnitsPerThread = 4;
constexpr int kSpreadBelow = 4;
// Resident blocks the warp kernel asks ptxas for: 40 warps per SM (32 fused). Left to
// itself ptxas chose fewer warps at some block sizes; 48 warps were up to 3% slower.
constexpr int warp_min_blocks(bool add) { return (add ? 1024 : 1280) / kWarpKernelThreads; }
// Block kernel: the fewest units per thread, up to kBlockElementsPerThread elements, that
// keep it at kBlockTargetThreads, then up to kMaxBlockThreads threads.
constexpr int kBlockElementsPerThread = 32;
constexpr int kBlockTargetThreads = 128;
constexpr int kMaxBlockThreads = 512;
constexpr int kSmemThreads = 512;
constexpr int kLoopThreads = 512;

// This thread's units first, first + step, ... (kUnits of them) of one row, kept as
// loaded and converted to fp32 at each use: fp32 copies took more registers and were
// slower. Every load is in bounds and unconditional: units past the row repeat its last
// unit, which the passes over the slice skip, and inactive rows read row 0, whose results
// are never stored. Rows are streamed (evict-first loads), as are the outputs.
template <typename T, int N, int kUnits, bool kAdd>
struct RowSlice {
  using P = Packed<T, N>;
  P in[kUnits];
  P res[kAdd ? kUnits : 1];

  __device__ __forceinline__ void load(const NormParams<T>& p, int64_t row, bool active, int first, int step) {
    const int units = static_cast<int>(p.cols / N);
    const int64_t safe_row = active ? row : 0;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int64_t offset = static_cast<int64_t>(min(first + k * step, units - 1)) * N;
      in[k] = P::load_streaming(p.input + safe_row * p.input_stride + offset);
      if constexpr (kAdd) res[k] = P::load_streaming(p.residual + safe_row * p.residual_stride + offset);
    }
  }
  // The value normalised: input, or residual + alpha * input (one fma, the same each call).
  __device__ __forceinline__ float value(const NormParams<T>& p, int k, int i) const {
    if constexpr (kAdd) return fmaf(p.alpha, at_use(in[k][i]), at_use(res[k][i]));
    return at_use(in[k][i]);
  }
  // bf16 -> fp32 is a 16-bit shift, which the compiler would compute once and keep (the
  // row twice, once as fp32); an opaque conversion is redone at each use instead.
  __device__ __forceinline__ static float at_use(T x) {
    if constexpr (std::is_same_v<T, nv_bfloat16>) {
      float f;
      asm volatile("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(__bfloat16_as_ushort(x)));
      return f;
    } else {
      return to_float(x);
    }
  }
};

// The affine (weight and optional bias), as the output pass reads it: unit u's N weights
// (weight_at) and biases (bias_at). GlobalAffine reads global memory and converts at each
// use; SharedAffine reads the fp32 copy its block staged in shared memory.
template <typename T, int N>
struct GlobalAffine {
  const T* weight;
  const T* bias;  // or null
  __device__ __forceinline__ void stage(const NormParams<T>&) const {}
  __device__ __forceinline__ bool has_bias() const { return bias != nullptr; }
  __device__ __forceinline__ Packed<T, N> weight_at(int u) const { return Packed<T, N>::load(weight + int64_t{u} * N); }
  __device__ __forceinline__ Packed<T, N> bias_at(int u) const { return Packed<T, N>::load(bias + int64_t{u} * N); }
};

// Weight and bias converted to fp32 once per block and kept in the block's dynamic shared
// memory (cols floats each, the bias after the weight), in planes of kWidth floats (plane
// j holds elements j * kWidth .. of every unit), so that lanes reading consecutive units
// read consecutive 16-byte words: no bank conflicts.
template <int N>
struct SharedAffine {
  static constexpr int kWidth = N < 4 ? N : 4;
  static constexpr int kPlanes = N / kWidth;
  using F = Packed<float, kWidth>;
  struct Floats {
    float v[N];
    __device__ __forceinline__ float operator[](int i) const { return v[i]; }
  };
  int units;
  bool with_bias;

  // Plane j of unit u of the weight (which = 0) or of the bias (which = 1).
  __device__ __forceinline__ float* slot(int which, int j, int u) const {
    extern __shared__ float staged_affine[];
    return staged_affine + which * units * N + (j * units + u) * kWidth;
  }
  __device__ __forceinline__ bool has_bias() const { return with_bias; }
  __device__ __forceinline__ Floats get(int which, int u) const {
    Floats v;
#pragma unroll
    for (int j = 0; j < kPlanes; ++j) {
      const F f = F::load(slot(which, j, u));
#pragma unroll
      for (int i = 0; i < kWidth; ++i) v.v[j * kWidth + i] = f[i];
    }
    return v;
  }
  __device__ __forceinline__ Floats weight_at(int u) const { return get(0, u); }
  __device__ __forceinline__ Floats bias_at(int u) const { return get(1, u); }

  // The block's threads convert the weight (and bias) into shared memory; ends with a barrier.
  template <typename T>
  __device__ __forceinline__ void stage(const NormParams<T>& p) const {
    const GlobalAffine<T, N> source{p.weight, p.bias};
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
      put(0, u, source.weight_at(u));
      if (with_bias) put(1, u, source.bias_at(u));
    }
    __syncthreads();
  }
  template <typename P>
  __device__ __forceinline__ void put(int which, int u, const P& packed) const {
#pragma unroll
    for (int j = 0; j < kPlanes; ++j) {
      F f;
#pragma unroll
      for (int i = 0; i < kWidth; ++i) f[i] = to_float(packed[j * kWidth + i]);
      // A plain store: Packed::store is a global-memory (st.global) instruction.
      *reinterpret_cast<typename F::WordT*>(slot(which, j, u)) = f.word();
    }
  }
};

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

// out[u * N + i] = (x(i) - mean) * rstd * w (+ b) for the N elements of unit u.
template <typename T, int N, typename Value, typename Affine>
__device__ __forceinline__ void store_normalized(T* out, int u, float mean, float rstd, Value&& x,
                                                 const Affine& affine) {
  using P = Packed<T, N>;
  P y;
  const auto w = affine.weight_at(u);
  if (affine.has_bias()) {
    const auto b = affine.bias_at(u);
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = from_float<T>(fmaf((x(i) - mean) * rstd, to_float(w[i]), to_float(b[i])));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = from_float<T>((x(i) - mean) * rstd * to_float(w[i]));
  }
  y.store_streaming(out + static_cast<int64_t>(u) * N);
}

// The body of the warp and block kernels: rows base + group, base + row_step + group, ...
// for base < rows (a bound uniform over the block, so whole warps always reduce together),
// each held in a RowSlice of units first, first + step, ... The affine is staged once,
// while the first row's loads are in flight. Threads of inactive rows (row >= rows) still
// join the reductions.
template <typename T, int N, int kUnits, bool kAdd, typename AllReduce, typename Affine>
__device__ __forceinline__ void normalize_rows(const NormParams<T>& p, int64_t base, int64_t row_step, int group,
                                               int first, int step, AllReduce&& allreduce, const Affine& affine) {
  using P = Packed<T, N>;
  const float cols_f = static_cast<float>(p.cols);  // sums are divided (exact mean of a constant row)
  for (int64_t block_base = base; block_base < p.rows; block_base += row_step) {
    const int64_t row = block_base + group;
    const bool active = row < p.rows;
    RowSlice<T, N, kUnits, kAdd> x;
    x.load(p, row, active, first, step);
    if (block_base == base) affine.stage(p);
    const int units = static_cast<int>(p.cols / N);

    if constexpr (kAdd) {
      if (p.residual_out != nullptr) {
#pragma unroll
        for (int k = 0; k < kUnits; ++k) {
          const int u = first + k * step;
          if (active && u < units) {
            P s;
#pragma unroll
            for (int i = 0; i < N; ++i) s[i] = from_float<T>(x.value(p, k, i));
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
        if (first + k * step < units) {
#pragma unroll
          for (int i = 0; i < N; ++i) sum += x.value(p, k, i);
        }
      }
      mean = allreduce(sum) / cols_f;
    }
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      if (first + k * step < units) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const float d = x.value(p, k, i) - mean;
          squares = fmaf(d, d, squares);
        }
      }
    }
    const float rstd = rsqrtf(allreduce(squares) / cols_f + p.eps);

#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int u = first + k * step;
      if (active && u < units) {
        store_normalized<T, N>(p.output + row * p.output_stride, u, mean, rstd,
                               [&](int i) { return x.value(p, k, i); }, affine);
      }
    }
  }
}
}  // namespace detail

// Groups of 2^lanes_log2 threads, one row each.
template <typename T, int N, int kUnits, bool kAdd>
__global__ void __launch_bounds__(detail::kWarpKernelThreads, detail::warp_min_blocks(kAdd))
    WarpNormKernel(NormParams<T> p, int lanes_log2) {
  const int lanes = 1 << lanes_log2;
  const int rows_per_block = detail::kWarpKernelThreads >> lanes_log2;
  detail::normalize_rows<T, N, kUnits, kAdd>(
      p, static_cast<int64_t>(blockIdx.x) * rows_per_block, static_cast<int64_t>(gridDim.x) * rows_per_block,
      threadIdx.x >> lanes_log2, threadIdx.x & (lanes - 1), lanes,
      [lanes](float v) { return warp_allreduce_sum(v, lanes); },
      detail::SharedAffine<N>{static_cast<int>(p.cols / N), p.bias != nullptr});
}

// One block per row.
template <typename T, int N, int kUnits, bool kAdd>
__global__ void __launch_bounds__(detail::kMaxBlockThreads) BlockNormKernel(NormParams<T> p) {
  __shared__ float partials[2][kWarpSize];
  int parity = 0;
  detail::normalize_rows<T, N, kUnits, kAdd>(p, blockIdx.x, gridDim.x, 0, threadIdx.x, blockDim.x, [&](float v) {
    const float total = block_allreduce_sum(v, partials[parity]);
    parity ^= 1;
    return total;
  }, detail::GlobalAffine<T, N>{p.weight, p.bias});
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
      detail::store_normalized<T, N>(out, u, mean, rstd, [&](int i) { return row_cache[u * N + i]; },
                                     detail::GlobalAffine<T, N>{p.weight, p.bias});
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

// ---------------------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------------------

namespace detail {

// Rows of `units` units: the smallest group of lanes with at most max_per_thread units
// per thread, then the kernel holding that many (1, 2 or kWarpMaxUnitsPerThread).
template <typename T, int N, bool kAdd>
cudaError_t launch_warp(const NormParams<T>& p, int64_t units, int max_per_thread, cudaStream_t stream) {
  int lanes_log2 = 0;
  while ((int64_t{max_per_thread} << lanes_log2) < units) ++lanes_log2;
  const int64_t per_thread = (units + (1 << lanes_log2) - 1) >> lanes_log2;
  const unsigned blocks = covering_grid(p.rows, kWarpKernelThreads >> lanes_log2);
  const size_t staged_bytes = (p.bias != nullptr ? 2 : 1) * p.cols * sizeof(float);  // staged affine: <= 8 KB
  if (per_thread <= 1) {
    WarpNormKernel<T, N, 1, kAdd><<<blocks, kWarpKernelThreads, staged_bytes, stream>>>(p, lanes_log2);
  } else if (per_thread <= 2) {
    WarpNormKernel<T, N, 2, kAdd><<<blocks, kWarpKernelThreads, staged_bytes, stream>>>(p, lanes_log2);
  } else {
    WarpNormKernel<T, N, kWarpMaxUnitsPerThread, kAdd><<<blocks, kWarpKernelThreads, staged_bytes, stream>>>(
        p, lanes_log2);
  }
  return cudaGetLastError();
}

// The fewest units per thread (a power of two <= kMaxUnits) that keep the block at or
// under kBlockTargetThreads, else kMaxUnits; rows of up to kMaxBlockThreads * kMaxUnits units.
template <typename T, int N, bool kAdd, int kUnits = 1>
cudaError_t launch_block(const NormParams<T>& p, int64_t units, cudaStream_t stream) {
  constexpr int kMaxUnits = std::max(kBlockElementsPerThread / N, 1);
  if constexpr (kUnits < kMaxUnits) {
    if (units > int64_t{kBlockTargetThreads} * kUnits) return launch_block<T, N, kAdd, kUnits * 2>(p, units, stream);
  }
  const int64_t threads = (units + kUnits - 1) / kUnits;
  const int warps = static_cast<int>((threads + kWarpSize - 1) / kWarpSize);
  BlockNormKernel<T, N, kUnits, kAdd><<<covering_grid(p.rows, 1), warps * kWarpSize, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int N, bool kAdd>
cudaError_t launch_smem(const NormParams<T>& p, size_t smem_bytes, cudaStream_t stream) {
  auto kernel = SmemNormKernel<T, N, kAdd>;
  static int allowed[kMaxDevices] = {};
  cudaError_t status = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), static_cast<int>(smem_bytes),
                                                   allowed);
  if (status != cudaSuccess) return status;
  const int64_t units = p.cols / N;
  const int threads =
      static_cast<int>(std::min<int64_t>(kSmemThreads, (units + kWarpSize - 1) / kWarpSize * kWarpSize));
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
  int warp_units = kWarpMaxUnitsPerThread;  // halved on the vector path while the threads would be too few
  if constexpr (N > 1) {
    const int64_t busy = resident_threads() / kSpreadBelow;
    while (warp_units > 1 && p.rows * ((units + warp_units - 1) / warp_units) < busy) warp_units /= 2;
  }
  if (units <= int64_t{kWarpSize} * warp_units) return launch_warp<T, N, kAdd>(p, units, warp_units, stream);
  if constexpr (N > 1) {
    if (units <= int64_t{kMaxBlockThreads} * (kBlockElementsPerThread / N)) {
      return launch_block<T, N, kAdd>(p, units, stream);
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
