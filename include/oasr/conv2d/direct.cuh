// Direct 2-D convolution on NHWC tensors for few input channels (IC = 1, or C not a multiple of 8),
// fp32 accumulation on fp16/bf16 storage, bias and activation fused.
//
//   out[n, p, q, k] = act(bias[k] + sum_{r, s, c} weight[k, r, s, c] * x[n, p * sh - ph + r, q * sw - pw + s, c])
//
// x is zero outside [0, H) x [0, W) (the padding). Two kernels:
//
// * Few taps (R * S * C <= 15, K % 8 == 0, a 16-byte aligned output: the spectrogram's 3x3 IC = 1
//   conv). It is a pure write problem (256 outputs per input sample at K = 256), and 9 fp32 FMAs per
//   output would take about as long to issue as the writes take, so the products run on tensor cores:
//   a GEMM of M = pixels, N = K and one k16 step whose columns are the taps, then the bias (a column of
//   ones in A against a row of biases in B), then zeros. A warp owns 16 pixels x 256 channels at a time
//   (blockIdx.y slices K beyond 256); its B fragments (weights and bias, staged once through shared
//   memory) sit in registers for its whole life; it gathers the A fragments straight from the
//   (L2-resident) input, the next tile's loads in flight while this tile is stored. B's columns are
//   permuted within each 32 channels so that lane (g, t)'s accumulators over four n8 tiles are channels
//   8t .. 8t + 7 of pixels g and g + 8: one 16-byte store each, no shuffle. A store instruction writes
//   64 contiguous bytes of each of 8 pixels; the next 32 channels' stores, two instructions later,
//   complete those 128-byte lines.
// * Generic (any R, S, C): a thread owns V consecutive output channels (V = 8 for 16-bit types: one
//   16-byte store; V = 1 when K % 8 or the output's alignment forbid it) and loops over pixels;
//   threadIdx.x walks the channel groups, threadIdx.y the pixels, blockIdx.y slices K. The block's
//   slice of weights is staged once in shared memory as fp32 [R * S * C][slice].
// Stores are streaming (evict-first): the output is written once and not read back here.
// Strides: input any element strides with contiguous channels; weight [K, R, S, C] and output
// [N, P, Q, K] contiguous.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/activation.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mma.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace conv2d {

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
  Activation activation = Activation::kNone;
};

namespace detail {

// Generic kernel.
constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kMaxSmemBytes = 48 * 1024;  // its weight slice (no opt-in needed)

// Few-taps kernel.
constexpr int kMmaThreads = 128;          // 4 warps, each on its own tiles
constexpr int kMaxMmaTaps = 15;           // one k16 step, the 16th column for the bias
constexpr int kTileM = 16;                // pixels of a warp's tile
constexpr int kGroupN = 32;               // channels per group: 4 n8 tiles, 64 bytes per pixel
constexpr int kGroups = 8;                // groups per warp: 256 channels, B fragments in 64 registers
constexpr int kWarpN = kGroups * kGroupN;


// Output pixel index -> (n, p, q).
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
// Few-taps kernel (tensor cores)
// ---------------------------------------------------------------------------------------

// A lane's four A columns (taps 2t, 2t + 1, 2t + 8, 2t + 9): where each reads the input, or the value it
// holds instead (1 for the bias column, 0 past it; such columns get a row offset no pixel reaches).
struct TapColumns {
  static constexpr int kNowhere = -(1 << 30);
  int offset[4];  // r * h_stride + s * w_stride + c (DirectConv2dUsesTensorCores: below 2^31)
  int r[4], s[4];
  uint16_t fill[4];

  template <typename T>
  __device__ __forceinline__ TapColumns(const DirectConv2dParams<T>& prm, int t) {
    const int taps = prm.r * prm.s * prm.c;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tap = 2 * t + (i & 1) + 8 * (i >> 1);
      const int rs = tap / prm.c, c = tap - rs * prm.c;
      r[i] = tap < taps ? rs / prm.s : kNowhere;
      s[i] = rs % prm.s;
      offset[i] = tap < taps ? static_cast<int>(r[i] * prm.input_h_stride + s[i] * prm.input_w_stride + c) : 0;
      fill[i] = tap == taps ? one_bits<T>() : uint16_t{0};
    }
  }
};

// Issues the loads of one tile's A elements: v[h][i] = column i of pixel row g + 8h (0 past the pixels).
template <typename T>
__device__ __forceinline__ void gather_taps(const DirectConv2dParams<T>& prm, const PixelMap& map,
                                            const TapColumns& col, uint32_t tile, uint32_t pixels, int g,
                                            uint16_t (&v)[2][4]) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(prm.input);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t pix = tile * kTileM + g + 8 * h;
    const bool valid = pix < pixels;
    int n, p, q;
    map.map(valid ? pix : 0, n, p, q);
    const int h0 = p * prm.stride_h - prm.pad_h, w0 = q * prm.stride_w - prm.pad_w;
    const int64_t base = n * prm.input_n_stride + h0 * prm.input_h_stride + w0 * prm.input_w_stride;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int ih = h0 + col.r[i], iw = w0 + col.s[i];
      const bool ok = ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w;
      v[h][i] = !valid ? uint16_t{0} : ok ? __ldg(x + base + col.offset[i]) : col.fill[i];
    }
  }
}

template <typename T, Activation kActivation>
__global__ void __launch_bounds__(kMmaThreads, 4) FewTapsConv2dKernel(DirectConv2dParams<T> prm, PixelMap map,
                                                                       uint32_t pixels) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int taps = prm.r * prm.s * prm.c;
  const int k_base = blockIdx.y * kWarpN;
  const uint16_t* weight = reinterpret_cast<const uint16_t*>(prm.weight);
  const uint16_t* bias = reinterpret_cast<const uint16_t*>(prm.bias);

  // The block's weights, once, as 16 columns per channel (taps, bias, zeros) in shared memory: read from
  // global memory in its order, then as aligned 32-bit fragment words (rows padded to 9 words: at most
  // 2-way bank conflicts among a warp's 8 channels).
  constexpr int kRowHalves = 18;
  __shared__ __align__(16) uint16_t w_rows[kWarpN * kRowHalves];
  for (int i = threadIdx.x; i < kWarpN * 16; i += kMmaThreads) {
    const int row = i >> 4, tap = i & 15, ch = k_base + row;
    const bool is_weight = ch < prm.k && tap < taps;
    const bool is_bias = ch < prm.k && tap == taps && bias != nullptr;
    w_rows[row * kRowHalves + tap] =
        is_weight ? weight[static_cast<int64_t>(ch) * taps + tap] : is_bias ? bias[ch] : uint16_t{0};
  }
  __syncthreads();

  // B fragments, in registers for the kernel's life: rows 2t, 2t + 1 (b[.][.][0]) and 2t + 8, 2t + 9
  // (b[.][.][1]) of column g of n8 tile j of a group, which is the group's channel 8 (g / 2) + 2j + g % 2
  // (the permutation that makes lane (g, t)'s accumulators over the group's four tiles its channels
  // 8t .. 8t + 7).
  const uint32_t* w_words = reinterpret_cast<const uint32_t*>(w_rows);
  uint32_t b[kGroups][4][2];
#pragma unroll
  for (int gr = 0; gr < kGroups; ++gr) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = gr * kGroupN + 8 * (g >> 1) + 2 * j + (g & 1);
      b[gr][j][0] = w_words[row * (kRowHalves / 2) + t];
      b[gr][j][1] = w_words[row * (kRowHalves / 2) + t + 4];
    }
  }

  const TapColumns col(prm, t);
  const uint32_t tiles = (pixels + kTileM - 1) / kTileM;
  const uint32_t warps = gridDim.x * (kMmaThreads / 32);
  uint32_t tile = blockIdx.x * (kMmaThreads / 32) + (threadIdx.x >> 5);
  uint16_t v[2][4];
  if (tile < tiles) gather_taps(prm, map, col, tile, pixels, g, v);
  for (; tile < tiles; tile += warps) {
    const uint32_t a[4] = {pack_pair(v[0][0], v[0][1]), pack_pair(v[1][0], v[1][1]), pack_pair(v[0][2], v[0][3]),
                           pack_pair(v[1][2], v[1][3])};
    if (tile + warps < tiles) gather_taps(prm, map, col, tile + warps, pixels, g, v);  // in flight meanwhile
    const uint32_t pix = tile * kTileM + g;
    T* out = prm.output + static_cast<int64_t>(pix) * prm.k + k_base + 8 * t;
#pragma unroll
    for (int gr = 0; gr < kGroups; ++gr) {
      if (k_base + gr * kGroupN >= prm.k) break;
      float acc[4][4] = {};
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_16816(acc[j], a, b[gr][j], T{});
      if (k_base + gr * kGroupN + 8 * t >= prm.k) continue;  // (K % 8 == 0: whole chunks)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (pix + 8 * h >= pixels) continue;
        Packed<T, 8> o;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          o[2 * j] = from_float<T>(activate<kActivation>(acc[j][2 * h]));
          o[2 * j + 1] = from_float<T>(activate<kActivation>(acc[j][2 * h + 1]));
        }
        o.store_streaming(out + static_cast<int64_t>(8 * h) * prm.k + gr * kGroupN);
      }
    }
  }
}

template <typename T, Activation kActivation>
cudaError_t LaunchFewTaps(const DirectConv2dParams<T>& p, PixelMap map, uint32_t pixels, cudaStream_t stream) {
  static int resident[kMaxDevices] = {};
  const auto kernel = FewTapsConv2dKernel<T, kActivation>;
  const int per_sm = resident_blocks_per_sm(kernel, kMmaThreads, resident);
  const unsigned gy = static_cast<unsigned>((p.k + kWarpN - 1) / kWarpN);
  const int64_t tiles = (static_cast<int64_t>(pixels) + kTileM - 1) / kTileM;
  const unsigned gx = grid_size(tiles, kMmaThreads / 32, std::max(1, per_sm / static_cast<int>(gy)));
  kernel<<<dim3(gx, gy), kMmaThreads, 0, stream>>>(p, map, pixels);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// Generic kernel (CUDA cores)
// ---------------------------------------------------------------------------------------

template <typename T, int V, Activation kActivation>
__global__ void __launch_bounds__(kThreads) DirectConv2dKernel(DirectConv2dParams<T> prm, PixelMap map,
                                                                 uint32_t pixels) {
  extern __shared__ float smem_weights[];  // [taps][blockDim.x * V]
  const int R = prm.r, S = prm.s, C = prm.c;
  const int taps = R * S * C;
  const int slice = blockDim.x * V;                     // channels of this block
  const int k0 = blockIdx.y * slice + threadIdx.x * V;  // this thread's first channel
  const int kbase = blockIdx.y * slice;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int i = tid; i < taps * slice; i += blockDim.x * blockDim.y) {
    const int tap = i / slice, kk = i - tap * slice;
    smem_weights[i] = kbase + kk < prm.k ? to_float(prm.weight[static_cast<int64_t>(kbase + kk) * taps + tap]) : 0.0f;
  }
  __syncthreads();
  if (k0 >= prm.k) return;  // (V = 1 tails: a slice past K)

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
    for (int r = 0; r < R; ++r) {
      const int ih = h0 + r;
      if (ih < 0 || ih >= prm.h) continue;
      for (int s = 0; s < S; ++s) {
        const int iw = w0 + s;
        if (iw < 0 || iw >= prm.w) continue;
        const T* xp = x + ih * prm.input_h_stride + iw * prm.input_w_stride;
        const float* wp = smem_weights + ((r * S + s) * C) * slice + threadIdx.x * V;
        for (int c = 0; c < C; ++c, wp += slice) {
          const float xv = to_float(xp[c]);
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] = fmaf(xv, wp[v], acc[v]);
        }
      }
    }
    Packed<T, V> o;
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = from_float<T>(activate<kActivation>(acc[v]));
    o.store_streaming(prm.output + static_cast<int64_t>(pix) * prm.k + k0);
  }
}

template <typename T, int V, Activation kActivation>
cudaError_t LaunchGeneric(const DirectConv2dParams<T>& p, PixelMap map, uint32_t pixels, cudaStream_t stream) {
  const int groups = (p.k + V - 1) / V;  // channel groups of V
  const int taps = p.r * p.s * p.c;
  const int fit = kMaxSmemBytes / (taps * V * static_cast<int>(sizeof(float)));  // channel groups whose weights fit
  const int bx = std::max(1, std::min({groups, kThreads, fit}));
  const int by = std::max(1, kThreads / bx);
  const unsigned gy = static_cast<unsigned>((groups + bx - 1) / bx);
  const unsigned gx = grid_size(pixels, by, std::max(1, kBlocksPerSm / static_cast<int>(gy)));
  const size_t smem = static_cast<size_t>(taps) * bx * V * sizeof(float);
  DirectConv2dKernel<T, V, kActivation><<<dim3(gx, gy), dim3(bx, by), smem, stream>>>(p, map, pixels);
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

// Whether the tensor-core kernel runs these sizes (otherwise the generic one does): few taps, whole
// 16-byte chunks of output channels, and a window whose offsets fit in int32.
template <typename T>
bool DirectConv2dUsesTensorCores(const DirectConv2dParams<T>& p) {
  const int64_t window = (p.r - 1) * p.input_h_stride + (p.s - 1) * p.input_w_stride + p.c;
  return p.r * p.s * p.c <= detail::kMaxMmaTaps && p.k % 8 == 0 && is_vector_aligned(p.output) && window < INT32_MAX;
}

template <typename T>
cudaError_t DirectConv2d(const DirectConv2dParams<T>& p, cudaStream_t stream) {
  if (p.n == 0 || p.p == 0 || p.q == 0 || p.k == 0) return cudaSuccess;
  using namespace detail;
  constexpr int V = kVecBytes / static_cast<int>(sizeof(T));
  const uint32_t pixels = static_cast<uint32_t>(static_cast<int64_t>(p.n) * p.p * p.q);
  const PixelMap map{FastDivmod(static_cast<uint32_t>(p.q)), FastDivmod(static_cast<uint32_t>(p.p))};
  const bool mma = DirectConv2dUsesTensorCores(p);
  const bool vec = p.k % V == 0 && is_vector_aligned(p.output) &&
                   static_cast<int64_t>(p.r) * p.s * p.c * V * static_cast<int64_t>(sizeof(float)) <= kMaxSmemBytes;
  switch (p.activation) {
    case Activation::kRelu:
      return mma ? LaunchFewTaps<T, Activation::kRelu>(p, map, pixels, stream)
             : vec ? LaunchGeneric<T, V, Activation::kRelu>(p, map, pixels, stream)
                   : LaunchGeneric<T, 1, Activation::kRelu>(p, map, pixels, stream);
    case Activation::kSilu:
      return mma ? LaunchFewTaps<T, Activation::kSilu>(p, map, pixels, stream)
             : vec ? LaunchGeneric<T, V, Activation::kSilu>(p, map, pixels, stream)
                   : LaunchGeneric<T, 1, Activation::kSilu>(p, map, pixels, stream);
    default:
      return mma ? LaunchFewTaps<T, Activation::kNone>(p, map, pixels, stream)
             : vec ? LaunchGeneric<T, V, Activation::kNone>(p, map, pixels, stream)
                   : LaunchGeneric<T, 1, Activation::kNone>(p, map, pixels, stream);
  }
}

}  // namespace conv2d
}  // namespace oasr
