// Direct 2-D convolution on NHWC tensors for few input channels (IC = 1, or C not a multiple of 8),
// fp32 accumulation on fp16/bf16 storage, bias and activation fused.
//
//   out[n, p, q, k] = act(bias[k] + sum_{r, s, c} weight[k, r, s, c] * x[n, p * sh - ph + r, q * sw - pw + s, c])
//
// x is zero outside [0, H) x [0, W) (the padding). With IC = 1 the convolution is a pure write
// problem (Conformer's first subsampling conv writes 256 outputs per input sample), so the kernel is
// built around the store:
//
// Layout of the work. A thread owns V consecutive output channels (V = 8 for 16-bit types: one
// 16-byte store) for its whole life and loops over output pixels; threadIdx.x walks the channel
// groups of a block's slice of K (consecutive lanes store consecutive 16-byte chunks of one pixel,
// so a warp writes whole 128-byte lines), threadIdx.y walks pixels, blockIdx.y slices K.
// * Exact kernel (3x3, IC = 1, the front end): the thread's 9 x V weights sit in registers as fp32,
//   loaded once; per pixel it reads 9 input samples (the same addresses across the lanes of a pixel:
//   one broadcast transaction each, from L1) and issues 9 x V FFMA and one streaming 16-byte store.
// * Generic kernel (any R, S, C): the block's slice of weights is staged once in shared memory as
//   fp32 [R * S * C][slice] (a thread reads its V weights of a tap as one vector), the taps loop at
//   run time.
// Output stores are streaming (evict-first): the output is written once and not read back here.
// Vector path: K % V == 0 and a 16-byte aligned output; otherwise V = 1.
// Strides: input any element strides with contiguous channels; weight [K, R, S, C] and output
// [N, P, Q, K] contiguous.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace conv2d {

enum Activation : int { kNone = 0, kRelu = 1, kSilu = 2 };

// ---------------------------------------------------------------------------------------
// Data layout
// ---------------------------------------------------------------------------------------

template <typename T>
struct DirectConv2dParams {
  T* output = nullptr;         // [N, P, Q, K], contiguous
  const T* input = nullptr;    // [N, H, W, C], channels contiguous
  const T* weight = nullptr;   // [K, R, S, C], contiguous
  const T* bias = nullptr;     // [K] or null
  int64_t input_n_stride = 0, input_h_stride = 0, input_w_stride = 0;  // in elements
  int n = 0, h = 0, w = 0, c = 0;
  int k = 0, r = 0, s = 0;
  int p = 0, q = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int activation = kNone;
};

namespace detail {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kMaxSmemBytes = 48 * 1024;  // the generic kernel's weight slice (no opt-in needed)

template <int kActivation>
__device__ __forceinline__ float activate(float v) {
  if constexpr (kActivation == kRelu) return fmaxf(v, 0.0f);
  if constexpr (kActivation == kSilu) return __fdividef(v, 1.0f + __expf(-v));
  return v;
}

// Output pixel index -> (n, p, q) and the top-left input corner of its window.
struct PixelMap {
  FastDivmod q_div, p_div;
  __device__ __forceinline__ void map(uint32_t pix, int& n, int& p, int& q) const {
    uint32_t np, qq, nn, pp;
    q_div.divmod(pix, np, qq);
    p_div.divmod(np, nn, pp);
    n = static_cast<int>(nn);
    p = static_cast<int>(pp);
    q = static_cast<int>(qq);
  }
};

// ---------------------------------------------------------------------------------------
// Kernel: kR, kS, kC > 0 hold the weights in registers (exact kernel), 0 stages them in shared memory.
// ---------------------------------------------------------------------------------------

template <typename T, int V, int kR, int kS, int kC, int kActivation>
__global__ void __launch_bounds__(kThreads) DirectConv2dKernel(DirectConv2dParams<T> prm, PixelMap map,
                                                                 uint32_t pixels) {
  constexpr bool kExact = kR > 0;
  extern __shared__ float smem_weights[];  // generic kernel: [taps][blockDim.x * V]
  const int R = kExact ? kR : prm.r, S = kExact ? kS : prm.s, C = kExact ? kC : prm.c;
  const int taps = R * S * C;
  const int slice = blockDim.x * V;             // channels of this block
  const int k0 = blockIdx.y * slice + threadIdx.x * V;  // this thread's first channel
  const bool active = k0 < prm.k;               // (V = 1 tails: a slice past K)

  float wreg[kExact ? kR * kS * kC : 1][V];
  if constexpr (kExact) {
#pragma unroll
    for (int t = 0; t < kR * kS * kC; ++t) {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        wreg[t][v] = active ? to_float(prm.weight[static_cast<int64_t>(k0 + v) * taps + t]) : 0.0f;
      }
    }
  } else {
    const int kbase = blockIdx.y * slice;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    for (int i = tid; i < taps * slice; i += blockDim.x * blockDim.y) {
      const int t = i / slice, kk = i - t * slice;
      smem_weights[i] = kbase + kk < prm.k ? to_float(prm.weight[static_cast<int64_t>(kbase + kk) * taps + t]) : 0.0f;
    }
    __syncthreads();
  }
  if (!active) return;

  float bias[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bias[v] = prm.bias != nullptr ? to_float(prm.bias[k0 + v]) : 0.0f;

  const uint32_t step = gridDim.x * blockDim.y;
  for (uint32_t pix = blockIdx.x * blockDim.y + threadIdx.y; pix < pixels; pix += step) {
    int n, p, q;
    map.map(pix, n, p, q);
    const int h0 = p * prm.stride_h - prm.pad_h, w0 = q * prm.stride_w - prm.pad_w;
    const T* x = prm.input + n * prm.input_n_stride;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = bias[v];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int ih = h0 + r;
      const bool row_ok = ih >= 0 && ih < prm.h;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int iw = w0 + s;
        const bool ok = row_ok && iw >= 0 && iw < prm.w;
        const T* xp = x + ih * prm.input_h_stride + iw * prm.input_w_stride;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float xv = ok ? to_float(xp[c]) : 0.0f;
          const int t = (r * S + s) * C + c;
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float wv = kExact ? wreg[kExact ? t : 0][v] : smem_weights[t * slice + threadIdx.x * V + v];
            acc[v] = fmaf(xv, wv, acc[v]);
          }
        }
      }
    }
    T* out = prm.output + static_cast<int64_t>(pix) * prm.k + k0;
    Packed<T, V> o;
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = from_float<T>(activate<kActivation>(acc[v]));
    o.store_streaming(out);
  }
}

template <typename T, int V, int kR, int kS, int kC>
cudaError_t Launch(const DirectConv2dParams<T>& p, cudaStream_t stream) {
  const int groups = (p.k + V - 1) / V;                  // channel groups of V
  const int taps = p.r * p.s * p.c;
  int bx = std::min(groups, detail::kThreads);
  if (kR == 0) bx = std::max(1, std::min(bx, kMaxSmemBytes / (taps * V * static_cast<int>(sizeof(float)))));
  const int by = std::max(1, detail::kThreads / bx);
  const uint32_t pixels = static_cast<uint32_t>(static_cast<int64_t>(p.n) * p.p * p.q);
  const unsigned gy = static_cast<unsigned>((groups + bx - 1) / bx);
  const unsigned gx = grid_size(pixels, by, std::max(1, kBlocksPerSm / static_cast<int>(gy)));
  const size_t smem = kR == 0 ? static_cast<size_t>(taps) * bx * V * sizeof(float) : 0;
  PixelMap map{FastDivmod(static_cast<uint32_t>(p.q)), FastDivmod(static_cast<uint32_t>(p.p))};
  dim3 grid(gx, gy), block(bx, by);
  switch (p.activation) {
    case kRelu: DirectConv2dKernel<T, V, kR, kS, kC, kRelu><<<grid, block, smem, stream>>>(p, map, pixels); break;
    case kSilu: DirectConv2dKernel<T, V, kR, kS, kC, kSilu><<<grid, block, smem, stream>>>(p, map, pixels); break;
    default: DirectConv2dKernel<T, V, kR, kS, kC, kNone><<<grid, block, smem, stream>>>(p, map, pixels); break;
  }
  return cudaGetLastError();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Launcher
// ---------------------------------------------------------------------------------------

// The generic kernel's weight slice must fit in 48 KiB: R * S * C * 4 bytes per output channel
// (the Python API sends larger filters elsewhere).
inline bool DirectConv2dFits(int r, int s, int c) {
  return static_cast<int64_t>(r) * s * c * static_cast<int64_t>(sizeof(float)) <= detail::kMaxSmemBytes;
}

template <typename T>
cudaError_t DirectConv2d(const DirectConv2dParams<T>& p, cudaStream_t stream) {
  if (p.n == 0 || p.p == 0 || p.q == 0 || p.k == 0) return cudaSuccess;
  constexpr int V = kVecBytes / static_cast<int>(sizeof(T));
  const bool vec = p.k % V == 0 && is_vector_aligned(p.output);
  const bool exact = p.r == 3 && p.s == 3 && p.c == 1;
  const bool vec_fits = static_cast<int64_t>(p.r) * p.s * p.c * V * static_cast<int64_t>(sizeof(float)) <=
                        detail::kMaxSmemBytes;
  if (vec && exact) return detail::Launch<T, V, 3, 3, 1>(p, stream);
  if (exact) return detail::Launch<T, 1, 3, 3, 1>(p, stream);
  if (vec && vec_fits) return detail::Launch<T, V, 0, 0, 0>(p, stream);
  return detail::Launch<T, 1, 0, 0, 0>(p, stream);
}

}  // namespace conv2d
}  // namespace oasr
