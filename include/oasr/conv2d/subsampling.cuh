// The speech encoder's front end in one pass (WeNet's Conv2dSubsampling4): two 3x3 stride-2
// convolutions with bias and ReLU, the first one's output never written to global memory.
//
//   y1[b, t1, f1, c] = relu(b1[c] + sum_{i,j} w1[c, i, j] * x[b, 2 t1 + i, 2 f1 + j])          (1 -> D)
//   y2[b, t2, f2, e] = relu(b2[e] + sum_{i,j,c} w2[i, j, e, c] * y1[b, 2 t2 + i, 2 f2 + j, c])  (D -> D)
//   out[b, t2, e * F2 + f2] = y2[b, t2, f2, e]   (torch's NCHW result, transposed and flattened)
//
// y1 is rounded to the storage type, as the unfused torch module stores it. No padding: T1 =
// (T - 1) // 2, T2 = (T1 - 1) // 2, likewise F.
//
// Layout of the work. The second convolution is an implicit GEMM: M = the output pixels (t2, f2) of
// one utterance, N = the D output channels, K = 9 taps x D channels. A CTA (8 warps, 2 x 4, each a
// 64 x 64 tile of m16n8k16 tensor-core products, fp32 accumulators) owns BM = 128 consecutive pixels
// and every output channel (D <= 256). It loops over the input channels in chunks of 16:
//   1. cp.async starts copying the chunk's slice of w2 ([9][D][16]) into shared memory;
//   2. meanwhile the CTA computes the first convolution for those 16 channels over the rows of y1
//      its pixels need (halo included) into shared memory, from the input rows it staged once (fp32)
//      and w1, b1 (fp32, staged once; a thread keeps one channel's 9 taps in registers);
//   3. then nine k16 steps (one per tap) of tensor-core products read A straight from the y1 tile
//      (the pixel's window offset plus the tap's) and B from the w2 slice.
// Shared-memory rows are padded (20 and 24 halves) so that the fragment loads of a warp hit 32
// distinct banks. The epilogue adds b2, applies ReLU and writes out[b, t2, e * F2 + f2].
// Requires D % 16 == 0, D <= 256, an sm_80+ GPU (mma.sync, cp.async).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/math.cuh"
#include "oasr/common/mma.cuh"

namespace oasr {
namespace conv2d {

// ---------------------------------------------------------------------------------------
// Data layout
// ---------------------------------------------------------------------------------------

template <typename T>
struct SubsamplingParams {
  T* output = nullptr;          // [B, T2, D * F2], contiguous
  const T* input = nullptr;     // [B, T, F], element strides below
  const T* weight1 = nullptr;   // [D, 3, 3] (torch's [D, 1, 3, 3]), contiguous
  const T* bias1 = nullptr;     // [D]
  const T* weight2 = nullptr;   // [3, 3, D (out), D (in)], contiguous (torch's [D, D, 3, 3] permuted)
  const T* bias2 = nullptr;     // [D]
  int64_t input_b_stride = 0, input_t_stride = 0, input_f_stride = 0;
  int batch = 0, frames = 0, features = 0, channels = 0;
  int t2 = 0, f2 = 0;           // output rows and columns
};

namespace detail {

constexpr int kSubThreads = 256;
constexpr int kBM = 128;        // pixels per CTA
constexpr int kMaxD = 256;      // output channels per CTA: all of them
constexpr int kDK = 16;         // input channels per chunk (one k16 step per tap)
constexpr int kAStride = 20;    // halves per y1 cell (16 + 4 padding): conflict-free A fragments
constexpr int kBStride = 24;    // halves per w2 row (16 + 8 padding, 16-byte rows): conflict-free B

// Shared-memory plan of one launch (bytes from the base, all 16-byte aligned).
struct SubsamplingSmem {
  SubsamplingSmem() = default;
  int nt2 = 0;                  // most output rows a CTA's pixels span
  int y1_rows = 0, y1_cols = 0; // y1 tile: rows x cols cells of kAStride halves
  int x_rows = 0, x_cols = 0;   // staged input (fp32)
  size_t w1_off = 0, x_off = 0, a_off = 0, b_off = 0, bytes = 0;

  static size_t align16(size_t v) { return (v + 15) / 16 * 16; }
  SubsamplingSmem(int t2, int f2, int d) {
    nt2 = std::min(t2, (kBM - 1) / f2 + 2);
    y1_rows = 2 * nt2 + 1;
    y1_cols = 2 * f2 + 1;
    x_rows = 2 * y1_rows + 1;
    x_cols = 2 * y1_cols + 1;
    w1_off = 0;  // w1 [D][9] then b1 [D], fp32
    x_off = align16(w1_off + static_cast<size_t>(d) * 10 * sizeof(float));
    a_off = align16(x_off + static_cast<size_t>(x_rows) * x_cols * sizeof(float));
    b_off = align16(a_off + static_cast<size_t>(y1_rows) * y1_cols * kAStride * 2);
    bytes = b_off + static_cast<size_t>(9) * d * kBStride * 2;
  }
};

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
}

// ---------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kSubThreads, 1) SubsamplingKernel(SubsamplingParams<T> prm, SubsamplingSmem plan) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* w1s = reinterpret_cast<float*>(smem + plan.w1_off);  // [D][9], then b1 [D]
  float* b1s = w1s + prm.channels * 9;
  float* xs = reinterpret_cast<float*>(smem + plan.x_off);   // [x_rows][x_cols]
  T* as = reinterpret_cast<T*>(smem + plan.a_off);           // y1 chunk [y1_rows][y1_cols][kAStride]
  T* bs = reinterpret_cast<T*>(smem + plan.b_off);           // w2 chunk [9][D][kBStride]

  const int D = prm.channels, F2 = prm.f2;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int m_base = (warp >> 2) * 64, n_base = (warp & 3) * 64;
  const int b = blockIdx.y;
  const int pixels = prm.t2 * F2;
  const int m0 = blockIdx.x * kBM;
  const int t2a = m0 / F2;                       // first output row of the tile
  const int x_row0 = 4 * t2a;                    // first input row staged (y1 row 2 * t2a)

  // Stage w1, b1 and the input rows (fp32), once.
  for (int i = tid; i < D * 9; i += kSubThreads) w1s[i] = to_float(prm.weight1[i]);
  for (int i = tid; i < D; i += kSubThreads) b1s[i] = to_float(prm.bias1[i]);
  const T* x = prm.input + b * prm.input_b_stride;
  for (int i = tid; i < plan.x_rows * plan.x_cols; i += kSubThreads) {
    const int r = i / plan.x_cols, c = i - r * plan.x_cols;
    const int t = x_row0 + r;
    xs[i] = t < prm.frames ? to_float(x[t * prm.input_t_stride + c * prm.input_f_stride]) : 0.0f;
  }

  // Each thread's 8 A rows (4 m-tiles x {g, g + 8}): the y1 cell offset of its pixel's window.
  int a_off[4][2];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = min(m0 + m_base + mt * 16 + g + 8 * h, pixels - 1);  // rows past the end: not stored
      const int t2 = m / F2, f2 = m - t2 * F2;
      a_off[mt][h] = ((2 * (t2 - t2a)) * plan.y1_cols + 2 * f2) * kAStride;
    }
  }

  float acc[4][8][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  const int y1_cells = plan.y1_rows * plan.y1_cols;
  for (int c0 = 0; c0 < D; c0 += kDK) {
    // 1. w2[:, :, :, c0:c0+16] -> bs, in flight during step 2.
    for (int i = tid; i < 9 * D * 2; i += kSubThreads) {
      const int row = i >> 1, half_ = i & 1;  // row = tap * D + e
      cp_async_16(bs + row * kBStride + half_ * 8, prm.weight2 + static_cast<int64_t>(row) * D + c0 + half_ * 8);
    }
    __syncthreads();  // (the first chunk: w1s, xs staged)
    // 2. y1 for channels c0 .. c0 + 15 over the tile's rows, rounded to T as torch stores it. A thread's
    //    channel is fixed (tid % 16: the stride is a multiple of 16), so its 9 taps and bias sit in
    //    registers; the 16 lanes of a cell read the same input samples (one broadcast each).
    {
      const int c = tid & (kDK - 1);
      float w[9];
#pragma unroll
      for (int j = 0; j < 9; ++j) w[j] = w1s[(c0 + c) * 9 + j];
      const float bias = b1s[c0 + c];
      for (int cell = tid >> 4; cell < y1_cells; cell += kSubThreads / kDK) {
        const int r = cell / plan.y1_cols, col = cell - r * plan.y1_cols;
        const float* xp = xs + (2 * r) * plan.x_cols + 2 * col;
        float v = bias;
#pragma unroll
        for (int ii = 0; ii < 3; ++ii)
#pragma unroll
          for (int jj = 0; jj < 3; ++jj) v = fmaf(xp[ii * plan.x_cols + jj], w[ii * 3 + jj], v);
        as[cell * kAStride + c] = from_float<T>(fmaxf(v, 0.0f));
      }
    }
    cp_async_wait_all();
    __syncthreads();
    // 3. Nine k16 steps, one per tap.
#pragma unroll 1
    for (int tap = 0; tap < 9; ++tap) {
      const int tap_off = ((tap / 3) * plan.y1_cols + tap % 3) * kAStride + 2 * tq;
      uint32_t a[4][4];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const T* lo = as + a_off[mt][0] + tap_off;
        const T* hi = as + a_off[mt][1] + tap_off;
        a[mt][0] = *reinterpret_cast<const uint32_t*>(lo);
        a[mt][1] = *reinterpret_cast<const uint32_t*>(hi);
        a[mt][2] = *reinterpret_cast<const uint32_t*>(lo + 8);
        a[mt][3] = *reinterpret_cast<const uint32_t*>(hi + 8);
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int e = n_base + nt * 8 + g;
        if (n_base + nt * 8 >= D) break;  // warp-uniform: D % 16 == 0
        const T* bp = bs + (tap * D + e) * kBStride + 2 * tq;
        uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(bp), *reinterpret_cast<const uint32_t*>(bp + 8)};
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) mma_16816(acc[mt][nt], a[mt], bf, T{});
      }
    }
    __syncthreads();  // as and bs are rewritten by the next chunk
  }

  // Epilogue: relu(acc + b2[e]) -> out[b, t2, e * F2 + f2].
  T* out = prm.output + static_cast<int64_t>(b) * prm.t2 * D * F2;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + m_base + mt * 16 + g + 8 * h;
      if (m >= pixels) continue;
      const int t2 = m / F2, f2 = m - t2 * F2;
      T* row = out + static_cast<int64_t>(t2) * D * F2 + f2;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int e = n_base + nt * 8 + 2 * tq;
        if (e >= D) break;
        row[static_cast<int64_t>(e) * F2] = from_float<T>(fmaxf(acc[mt][nt][2 * h] + to_float(prm.bias2[e]), 0.0f));
        row[static_cast<int64_t>(e + 1) * F2] =
            from_float<T>(fmaxf(acc[mt][nt][2 * h + 1] + to_float(prm.bias2[e + 1]), 0.0f));
      }
    }
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Launcher
// ---------------------------------------------------------------------------------------

// Shared memory one launch needs (bytes): the Python API refuses shapes beyond the GPU's opt-in limit.
inline size_t SubsamplingSmemBytes(int t2, int f2, int d) { return detail::SubsamplingSmem(t2, f2, d).bytes; }

template <typename T>
cudaError_t Subsampling(const SubsamplingParams<T>& p, cudaStream_t stream) {
  if (p.batch == 0 || p.t2 == 0 || p.f2 == 0) return cudaSuccess;
  if (p.channels % detail::kDK != 0 || p.channels > detail::kMaxD) return cudaErrorInvalidValue;
  const detail::SubsamplingSmem plan(p.t2, p.f2, p.channels);
  cudaError_t status = cudaFuncSetAttribute(detail::SubsamplingKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(plan.bytes));
  if (status != cudaSuccess) return status;
  const int pixels = p.t2 * p.f2;
  dim3 grid((pixels + detail::kBM - 1) / detail::kBM, p.batch);
  detail::SubsamplingKernel<T><<<grid, detail::kSubThreads, plan.bytes, stream>>>(p, plan);
  return cudaGetLastError();
}

}  // namespace conv2d
}  // namespace oasr
