// Implicit-GEMM convolution on NHWC tensors with every output channel in one CTA (sm_90a): K = 256 output
// channels, C a multiple of 64 input channels, any filter, stride and padding; bias and activation fused.
//
//   out[n, p, q, k] = act(bias[k] + sum_{r, s, c} weight[k, r, s, c] * x[n, p * sh - ph + r, q * sw - pw + s, c])
//
// GEMM view: M = the output pixels N x P x Q, N = the 256 output channels, K = R x S x C, walked in steps of
// (tap, 64 input channels). A CTA owns 128 consecutive pixels and all 256 channels, so each input row it gathers
// serves every output channel (CUTLASS's sm90 conv keeps one consumer warpgroup: 64 x 256 tiles at most).
// Each of its two warpgroups takes 64 pixels:
//   - A (its pixels' 64 channels under the step's tap) is gathered by the warpgroup's own threads with 16-byte
//     cp.async (zeros in the padding), into a ring of four stages in the 128-byte swizzled layout wgmma reads;
//   - B (the step's 64 x 256 slice of the KRSC weight, a box of a 2-D tensor map over [K, R S C]) streams through
//     a ring of four slots by TMA, each refilled by thread 0 two steps after its last use (predicated copies,
//     every thread waiting: a branch of one thread in the loop makes ptxas serialise the wgmma around it);
//   - four wgmma m64n256k16 per step, both operands from shared memory.
// The epilogue adds the bias in fp32, applies the activation, rounds once and stages the tile in the same
// swizzled layout, from which four TMA boxes store it (rows past the last pixel are clipped by the tensor map).
// Requires K == 256, C % 64 == 0, 16-byte aligned tensors, an sm_90a GPU.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/cp_async.cuh"
#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mbarrier.cuh"
#include "oasr/common/tma.cuh"
#include "oasr/common/wgmma.cuh"
#include "oasr/conv2d/direct.cuh"

namespace oasr {
namespace conv2d {

// ---------------------------------------------------------------------------------------
// Data layout
// ---------------------------------------------------------------------------------------

template <typename T>
struct WideConv2dParams {
  CUtensorMap weight_map;      // [K, R S C] K-major: boxes of 64 x 256, 128-byte swizzle
  CUtensorMap output_map;      // [N P Q, K]: boxes of 64 x 128, 128-byte swizzle
  const T* input = nullptr;    // [N, H, W, C], contiguous
  const T* bias = nullptr;     // [K] or null
  int h = 0, w = 0, c = 0;
  int r = 0, s = 0;
  int p = 0, q = 0;
  int pixels = 0;              // N P Q
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

namespace wide {

constexpr int kThreads = 256;  // two warpgroups of 64 pixels
constexpr int kBM = 128;       // pixels per CTA
constexpr int kBN = 256;       // output channels
constexpr int kBK = 64;        // input channels per step: one 128-byte swizzle row
constexpr int kStages = 4;     // A stages and B slots
constexpr int kLag = 2;        // steps between a B slot's last use and its refill

// Shared memory (each tile 1024-byte aligned, as the swizzle needs): the A stages, the B slots (whose first
// 64 KB stage the output after the products), the bias (fp32), the full and empty mbarriers of the slots and a
// spare one.
constexpr uint32_t kABytes = kBM * kBK * 2;  // 16 KB: both warpgroups' rows
constexpr uint32_t kBBytes = kBN * kBK * 2;  // 32 KB
constexpr uint32_t kBOffset = kStages * kABytes;
constexpr uint32_t kBias = kBOffset + kStages * kBBytes;
constexpr uint32_t kBarriers = kBias + kBN * 4;
constexpr uint32_t kSmemBytes = 1024 + kBarriers + (2 * kStages + 1) * 8;  // 1024: room to align the base

__device__ __forceinline__ unsigned char* smem_base() {
  extern __shared__ unsigned char smem_bytes[];
  return smem_bytes + ((1024 - __cvta_generic_to_shared(smem_bytes) % 1024) % 1024);
}

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte swizzled tile.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// The four warps of warpgroup `wg` (named barriers 1 and 2; 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_sync(int wg) {
  if (wg == 0) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  }
}

// Where this thread's A copies come from: pixel (n, p, q) of the CTA's row `row` (-1 rows past the end), the
// input offset of its top-left tap, and which 4 of the row's 8 chunks it copies.
struct Gather {
  int64_t origin;  // element offset of input[n, p sh - ph, q sw - pw, 0]
  int h0, w0;      // p sh - ph, q sw - pw
  int row, chunk0;
  bool valid;
};

// The step's 64 channels of this thread's pixel under the step's tap into A stage `stage`: four 16-byte copies,
// zeros where the tap falls in the padding or the pixel is past the end.
template <typename T>
__device__ __forceinline__ void gather(const WideConv2dParams<T>& p, const Gather& g, uint32_t stage, int step,
                                       int channel_steps) {
  const int tap = step / channel_steps, c0 = (step - tap * channel_steps) * kBK;
  const int i = tap / p.s, j = tap - i * p.s;
  const int hh = g.h0 + i, ww = g.w0 + j;
  const bool inside = g.valid && hh >= 0 && hh < p.h && ww >= 0 && ww < p.w;
  const T* src = p.input + (inside ? g.origin + (static_cast<int64_t>(i) * p.w + j) * p.c + c0 : 0);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int chunk = g.chunk0 + k;
    cp_async_16(stage + swizzled(g.row, chunk), src + chunk * 8, inside ? 16 : 0);
  }
}

// Step `step`'s B slice into its slot, by the threads with `issue` set.
template <typename T>
__device__ __forceinline__ void load_weights(const WideConv2dParams<T>& p, uint32_t smem, int step, bool issue) {
  const int slot = step % kStages;
  const uint32_t full = smem + kBarriers + 8 * slot;
  mbarrier_arrive_expect_tx(full, kBBytes, issue);
  tma_load(smem + kBOffset + slot * kBBytes, &p.weight_map, full, step * kBK, 0, issue);
}

// ---------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------

template <typename T, int kActivation>
__global__ void __launch_bounds__(kThreads, 1) WideConv2dKernel(const __grid_constant__ WideConv2dParams<T> p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  unsigned char* base = smem_base();
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(base));
  const uint32_t full = smem + kBarriers, empty = full + 8 * kStages;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;
  const int channel_steps = p.c / kBK, steps = p.r * p.s * channel_steps;
  if (tid == 0) {
    tma_prefetch(&p.weight_map);
    for (int i = 0; i < kStages; ++i) mbarrier_init(full + 8 * i, 1);
    for (int i = 0; i <= kStages; ++i) mbarrier_init(empty + 8 * i, kThreads);
    mbarrier_init_fence();
    for (int s = 0; s < min(kStages, steps); ++s) load_weights(p, smem, s, true);
  }
  float* bias = reinterpret_cast<float*>(base + kBias);
  bias[tid] = p.bias != nullptr ? to_float(p.bias[tid]) : 0.0f;

  Gather g;
  g.row = wg * 64 + (tid & 127) / 2;
  g.chunk0 = (tid & 1) * 4;
  const int pixel = blockIdx.x * kBM + g.row;
  g.valid = pixel < p.pixels;
  {
    const int pq = p.p * p.q, n = g.valid ? pixel / pq : 0, rest = g.valid ? pixel - n * pq : 0;
    const int pp = rest / p.q, qq = rest - pp * p.q;
    g.h0 = pp * p.stride_h - p.pad_h;
    g.w0 = qq * p.stride_w - p.pad_w;
    g.origin = ((static_cast<int64_t>(n) * p.h + g.h0) * p.w + g.w0) * p.c;
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {  // A of the first steps (empty groups past the last step)
    if (s < steps) gather(p, g, smem + s * kABytes, s, channel_steps);
    cp_async_commit();
  }
  __syncthreads();  // the barriers are initialised, the bias is in

  float acc[kBN / 2];
  const uint32_t a_rows = wg * 64 * 128;  // this warpgroup's rows of an A stage
  for (int s = 0; s < steps; ++s) {
    const int slot = s % kStages;
    cp_async_wait<kStages - 2>();  // this thread's copies of step s have landed
    fence_async_shared();          // and are visible to wgmma (the async proxy)
    warpgroup_sync(wg);            // so are the warpgroup's
    mbarrier_wait(full + 8 * slot, (s / kStages) & 1);
    const uint32_t a = smem + slot * kABytes + a_rows, b = smem + kBOffset + slot * kBBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      wgmma_ss_m64k16<T, kBN>(acc, wgmma_desc_sw128(a + 32 * ks), wgmma_desc_sw128(b + 32 * ks), s > 0 || ks > 0);
    }
    wgmma_commit();
    wgmma_wait<1>();  // step s - 1's products are done: its A stage and B slot are free
    wgmma_fence_registers(acc);
    // Step s - 1's slot is free as far as this thread goes (step 0 arrives on the spare barrier); step s - kLag's,
    // once every thread is done with it, takes step s - kLag + kStages.
    mbarrier_arrive(empty + 8 * (s >= 1 ? (s - 1) % kStages : kStages));
    if (s >= kLag && s - kLag + kStages < steps) {
      mbarrier_wait(empty + 8 * ((s - kLag) % kStages), ((s - kLag) / kStages) & 1);
      load_weights(p, smem, s - kLag + kStages, tid == 0);
    }
    const int next = s + kStages - 1;  // into step s - 1's A stage
    if (next < steps) gather(p, g, smem + (next % kStages) * kABytes, next, channel_steps);
    cp_async_commit();
  }
  wgmma_wait<0>();
  wgmma_fence_registers(acc);
  cp_async_wait<0>();
  __syncthreads();  // the other warpgroup's last products are done with the B slots too

  // act(acc + bias) rounded, staged in the first two B slots (every product is done with them) as four 64-channel
  // boxes of 128 rows, then stored by TMA. Lane (g, t) of warp w holds rows 16 w + g (+ 8), channels 8 j + 2 t, + 1.
  const uint32_t stage = smem + kBOffset;
  const int gr = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int e = 8 * j + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * warp + gr + 8 * h;  // warp 4..7: rows 64..127
      const float lo = detail::activate<kActivation>(acc[4 * j + 2 * h] + bias[e]);
      const float hi = detail::activate<kActivation>(acc[4 * j + 2 * h + 1] + bias[e + 1]);
      const uint32_t v = round_pair(lo, hi, T{});
      const uint32_t at = stage + (e / kBK) * (kBM * 128) + swizzled(row, (e % kBK) / 8) + (e % 8) * 2;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(v) : "memory");
    }
  }
  fence_async_shared();  // the staging is read by TMA
  __syncthreads();
  if (tid == 0) {
#pragma unroll
    for (int box = 0; box < kBN / kBK; ++box) {
      tma_store(&p.output_map, stage + box * kBM * 128, box * kBK, blockIdx.x * kBM);
    }
    bulk_store_commit();
    bulk_store_wait_read();  // the shared memory outlives the copies' reads
  }
#endif
}

}  // namespace wide

// ---------------------------------------------------------------------------------------
// Launcher
// ---------------------------------------------------------------------------------------

// Encodes the tensor maps of `weight` ([K = 256, R, S, C]) and `output` ([pixels, 256]) into `p` and launches
// on `stream`. cudaErrorInvalidValue when a map cannot be encoded (a pointer not 16-byte aligned).
template <typename T>
cudaError_t WideConv2d(WideConv2dParams<T>& p, const T* weight, T* output, int activation, cudaStream_t stream) {
  if (p.pixels == 0) return cudaSuccess;
  const CUtensorMapDataType type =
      std::is_same_v<T, half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t k_total = static_cast<uint64_t>(p.r) * p.s * p.c;
  const uint64_t w_dims[2] = {k_total, wide::kBN}, w_strides[1] = {k_total * 2};
  const uint32_t w_box[2] = {wide::kBK, wide::kBN};
  const uint64_t o_dims[2] = {wide::kBN, static_cast<uint64_t>(p.pixels)}, o_strides[1] = {wide::kBN * 2};
  const uint32_t o_box[2] = {wide::kBK, wide::kBM};
  if (!encode_tensor_map(&p.weight_map, type, weight, 2, w_dims, w_strides, w_box) ||
      !encode_tensor_map(&p.output_map, type, output, 2, o_dims, o_strides, o_box)) {
    return cudaErrorInvalidValue;
  }
  const auto launch = [&](auto kernel) {
    static int allowed[kMaxDevices] = {};
    cudaError_t status = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel),
                                                     static_cast<int>(wide::kSmemBytes), allowed);
    if (status != cudaSuccess) return status;
    const unsigned grid = static_cast<unsigned>((p.pixels + wide::kBM - 1) / wide::kBM);
    kernel<<<grid, wide::kThreads, wide::kSmemBytes, stream>>>(p);
    return cudaGetLastError();
  };
  switch (activation) {
    case kRelu: return launch(wide::WideConv2dKernel<T, kRelu>);
    case kSilu: return launch(wide::WideConv2dKernel<T, kSilu>);
    default: return launch(wide::WideConv2dKernel<T, kNone>);
  }
}

}  // namespace conv2d
}  // namespace oasr
