// The speech encoder's front end in one pass (WeNet's Conv2dSubsampling4): two 3x3 stride-2
// convolutions with bias and ReLU, the first one's output never written to memory.
//
//   y1[b, t1, f1, c] = relu(b1[c] + sum_{i,j} w1[c, i, j] * x[b, 2 t1 + i, 2 f1 + j])          (1 -> D)
//   y2[b, t2, f2, e] = relu(b2[e] + sum_{i,j,c} w2[i, j, e, c] * y1[b, 2 t2 + i, 2 f2 + j, c])  (D -> D)
//   out[b, t2, e * F2 + f2] = y2[b, t2, f2, e]   (torch's NCHW result, transposed and flattened)
//
// y1 is rounded to the storage type, as the unfused torch module stores it. No padding: T1 =
// (T - 1) // 2, T2 = (T1 - 1) // 2, likewise F.
//
// The second convolution is an implicit GEMM: M = the output pixels (t2, f2) of one utterance, N = the
// D output channels, K = 9 taps x D channels. A CTA owns 128 consecutive pixels and every output
// channel; each of its two warpgroups takes 64 pixels and walks K in steps of (tap, 32 input channels):
//   - the step's y1 is one wgmma m64n32k16: A = each pixel's 3x3 input patch under the tap (the bias as a
//     10th tap), B = w1. Its accumulators, rounded with ReLU, are register for register the A fragments
//     of the step's two conv2 products, so y1 never leaves registers. Each y1 value is computed once per
//     tap that reads it (9/4 times on average): 1/16 more tensor work than conv2 itself;
//   - the step's conv2 products (wgmma m64nNk16, B = the w2 slices of the tap and 16-channel chunk) are
//     queued behind the next step's y1 product, whose rounding then runs while they do.
// w2, packed by the caller as the wgmma's shared-memory image of each chunk and tap (input channels
// padded to N with zeros, so every step has two products), streams through a ring of eight steps' slices
// by bulk copies (TMA), each refilled by thread 0 two steps after its last use. No branch of the loop
// differs between threads (thread 0's copies are predicated): ptxas serialises the wgmma around one. A
// ninth, loading warp would cap the registers at 168 (three warps on one scheduler), too few. The output is
// staged in the output's order and written a row at a time by bulk copies (TMA) that drain as the CTA ends. (A
// persistent form, one CTA per SM taking tiles in turn with the ring running on between them, was 11% slower:
// dev/conv2d/RESULTS.md.)
// Requires D % 16 == 0, D <= 256, an sm_90a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mma.cuh"
#include "oasr/common/tma.cuh"
#include "oasr/common/wgmma.cuh"

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
  const T* weight2 = nullptr;   // [N / 16][9][N / 8][2][8][8]: per chunk of 16 input channels c and tap, the
                                //   wgmma's B image of w2[e, c] (N = D rounded up to 64, zeros past D)
  const T* bias2 = nullptr;     // [D]
  int64_t input_b_stride = 0, input_t_stride = 0, input_f_stride = 0;
  int batch = 0, channels = 0;
  int t2 = 0, f2 = 0;           // output rows and columns
};

namespace detail {

constexpr int kSubThreads = 256;            // two warpgroups of 64 pixels
constexpr int kBM = 128;                    // pixels per CTA
constexpr int kDK = 16;                     // input channels per conv2 product (k16)
constexpr int kStepChannels = 32;           // input channels per step: one conv1 product's N
constexpr int kStepChunks = kStepChannels / kDK;
constexpr int kSlots = 8;                   // steps' w2 slices in the ring
constexpr int kLag = 2;                     // steps between a slot's last use and its refill

// Output channels rounded up to a wgmma width.
inline int subsampling_n(int d) { return (d + 63) / 64 * 64; }

// Shared-memory plan of one launch (byte offsets, 16-byte aligned): the w2 ring, each thread's input patches
// ([9 taps][consumers] x 16 bytes), w1 as conv1's B image ([N / 8][2][8][8], the bias at k = 9), b2 (fp32 [N]),
// the ring's mbarriers (full, then empty, per slot; then one nobody waits on). The output is staged where the ring
// was, in blocks of channels in the output's order; the ring is made large enough for blocks of 8 (F2 beyond 64).
struct SubsamplingPlan {
  SubsamplingPlan() = default;
  int n = 0;  // output channels of the wgmma (D rounded up to 64)
  size_t slot_bytes = 0, ring_bytes = 0, patch_off = 0, w1_off = 0, b2_off = 0, barrier_off = 0, bytes = 0;

  SubsamplingPlan(int f2, int d) {
    n = subsampling_n(d);
    slot_bytes = static_cast<size_t>(kStepChunks) * n * kDK * 2;
    const size_t rows = (kBM - 1) / f2 + 2;  // output rows a CTA's pixels can touch
    ring_bytes = std::max(kSlots * slot_bytes, (rows * f2 * 8 * 2 + 15) / 16 * 16);
    patch_off = ring_bytes;
    w1_off = patch_off + 9 * kSubThreads * 16;
    b2_off = w1_off + static_cast<size_t>(n) * kDK * 2;
    barrier_off = b2_off + static_cast<size_t>(n) * sizeof(float);
    bytes = barrier_off + (2 * kSlots + 1) * 8;
  }
};

// The dynamic shared memory of the launch.
__device__ __forceinline__ unsigned char* smem_base() {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  return smem_bytes;
}

// conv1's B row of channel c (< N) as two 16-byte rows of w1's image (core matrices (c / 8, 0) and (c / 8, 1),
// row c % 8): K entries 0..8 the taps, 9 the bias, zeros after and past D.
template <typename T>
__device__ __forceinline__ void store_conv1_weights(const SubsamplingParams<T>& p, int c, unsigned char* image) {
  uint16_t v[16] = {};
  if (c < p.channels) {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(p.weight1) + c * 9;
#pragma unroll
    for (int k = 0; k < 9; ++k) v[k] = w[k];
    v[9] = reinterpret_cast<const uint16_t*>(p.bias1)[c];
  }
  uint4* row = reinterpret_cast<uint4*>(image + (c / 8) * 256 + (c % 8) * 16);
  row[0] = make_uint4(pack_pair(v[0], v[1]), pack_pair(v[2], v[3]), pack_pair(v[4], v[5]), pack_pair(v[6], v[7]));
  row[8] = make_uint4(pack_pair(v[8], v[9]), 0u, 0u, 0u);
}

// conv1's A fragments (mma_16816's layout, common/wgmma.cuh) of this thread's pixels m (rows g, g + 8 of its
// warp, lane 4 g + t) under each of conv2's taps (i, j), into patches[tap] ([9][threads] x 16 bytes): the 3x3
// input patch of y1 pixel (2 t2 + i, 2 f2 + j) along K, 1 at the bias. K entries 2 t, 2 t + 1 and, for t = 0
// alone, 8 and the bias are a lane's. Offsets within an utterance fit 32 bits (the launcher's caller checks).
template <typename T>
__device__ __forceinline__ void store_patches(const SubsamplingParams<T>& p, const int (&m)[2], int t,
                                              uint4* patches) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.input + static_cast<int64_t>(blockIdx.y) * p.input_b_stride);
  const int ts = static_cast<int>(p.input_t_stride), fs = static_cast<int>(p.input_f_stride);
  const int k0 = 2 * t, k1 = 2 * t + 1;
  const int off0 = k0 / 3 * ts + k0 % 3 * fs, off1 = k1 / 3 * ts + k1 % 3 * fs, off8 = t == 0 ? 2 * ts + 2 * fs : 0;
  int origin[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t2 = m[h] / p.f2, f2 = m[h] - t2 * p.f2;
    origin[h] = 4 * t2 * ts + 4 * f2 * fs;
  }
  const uint16_t bias = t == 0 ? one_bits<T>() : uint16_t{0};
#pragma unroll
  for (int tap = 0; tap < 9; ++tap) {
    const int shift = 2 * (tap / 3) * ts + 2 * (tap % 3) * fs;
    uint16_t v[2][3];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint16_t* px = x + origin[h] + shift;
      v[h][0] = px[off0];
      v[h][1] = px[off1];
      v[h][2] = t == 0 ? px[off8] : uint16_t{0};
    }
    patches[tap * kSubThreads] = make_uint4(pack_pair(v[0][0], v[0][1]), pack_pair(v[1][0], v[1][1]),
                                            pack_pair(v[0][2], bias), pack_pair(v[1][2], bias));
  }
}

// ---------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------

// Where a launch's shared memory and steps are; step s is tap s / groups, channels 32 (s % groups) on.
struct Steps {
  uint32_t ring, patches, w1, full, empty;
  int groups, count;
};

// Step s's w2 slices (its tap, two chunks) into its ring slot, announced on the slot's full barrier, by the
// threads with `issue` set.
template <typename T>
__device__ __forceinline__ void load_step(const SubsamplingParams<T>& p, const SubsamplingPlan& plan,
                                          const Steps& st, int s, bool issue) {
  const int tap = s / st.groups, chunk0 = (s - tap * st.groups) * kStepChunks, slot = s % kSlots;
  const uint32_t slice = plan.n * kDK * 2, full = st.full + 8 * slot;
  mbarrier_arrive_expect_tx(full, kStepChunks * slice, issue);
#pragma unroll
  for (int c = 0; c < kStepChunks; ++c)
    bulk_copy(st.ring + slot * plan.slot_bytes + c * slice, p.weight2 + ((chunk0 + c) * 9 + tap) * plan.n * kDK,
              slice, full, issue);
}

// Issues step s's conv1 product into d1 (64 pixels x 32 channels): this thread's patch of the step's tap
// times w1's channels of the step.
template <typename T>
__device__ __forceinline__ void issue_conv1(float (&d1)[kStepChannels / 2], uint32_t (&patch)[4], const Steps& st,
                                            int s) {
  const int tap = s / st.groups, group = s - tap * st.groups;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(patch[0]), "=r"(patch[1]), "=r"(patch[2]), "=r"(patch[3])
               : "r"(st.patches + tap * kSubThreads * 16));
#pragma unroll
  for (int i = 0; i < kStepChannels / 2; ++i) d1[i] = 0.0f;
  wgmma_fence();
  wgmma_m64k16<T, kStepChannels>(d1, patch, wgmma_desc(st.w1 + group * kStepChannels / 8 * 256, 128, 256));
  wgmma_commit();
  wgmma_fence_registers(d1);
}

// y1 of a step (conv1's accumulators d1) with ReLU, rounded to T: conv2's A fragments of the step's chunks.
template <typename T>
__device__ __forceinline__ void round_y1(const float (&d1)[kStepChannels / 2], uint32_t (&a)[kStepChunks][4]) {
#pragma unroll
  for (int c = 0; c < kStepChunks; ++c)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[c][r] = round_pair<true>(d1[8 * c + 2 * r], d1[8 * c + 2 * r + 1], T{});
}

// One step of a warpgroup: conv2 of step s (A = y1 in a2[B]) queued behind step s + 1's conv1 product,
// whose result is then rounded into a2[B ^ 1].
template <typename T, int N, int B>
__device__ __forceinline__ void step(const SubsamplingParams<T>& p, const SubsamplingPlan& plan, const Steps& st,
                                     float (&acc)[N / 2], float (&d1)[kStepChannels / 2],
                                     uint32_t (&a2)[2][kStepChunks][4], uint32_t (&patch)[4], int s) {
  const bool next = s + 1 < st.count;
  if (next) issue_conv1<T>(d1, patch, st, s + 1);
  const int slot = s % kSlots;
  mbarrier_wait(st.full + 8 * slot, (s / kSlots) & 1);
  const uint32_t b = st.ring + slot * plan.slot_bytes;
  wgmma_fence();
  wgmma_fence_registers(acc);
#pragma unroll
  for (int c = 0; c < kStepChunks; ++c) wgmma_m64k16<T, N>(acc, a2[B][c], wgmma_desc(b + c * N * kDK * 2, 128, 256));
  wgmma_commit();
  wgmma_fence_registers(acc);
  if (next) {
    wgmma_wait<1>();  // step s + 1's conv1 and step s - 1's conv2 are done
  } else {
    wgmma_wait<0>();
  }
  wgmma_fence_registers(d1);
  wgmma_fence_registers(patch);  // the A registers of the products just done, kept until now
#pragma unroll
  for (int c = 0; c < kStepChunks; ++c) wgmma_fence_registers(a2[B ^ 1][c]);
  // Step s - 1's slot is free as far as this thread goes (step 0 arrives on the spare barrier); step
  // s - kLag's, once every thread is done with it, takes step s - kLag + kSlots.
  mbarrier_arrive(st.empty + 8 * (s >= 1 ? (s - 1) % kSlots : kSlots));
  if (s >= kLag && s - kLag + kSlots < st.count) {
    mbarrier_wait(st.empty + 8 * ((s - kLag) % kSlots), ((s - kLag) / kSlots) & 1);
    load_step(p, plan, st, s - kLag + kSlots, threadIdx.x == 0);
  }
  if (next) round_y1<T>(d1, a2[B ^ 1]);
}

// Channels e0..e0 + count of the output rows t2a..t2a + rows that the CTA's pixels (m0..m_end) touch, staged in the
// output's order (stage[r * pitch + (e - e0) * F2 + f2]; count and pitch multiples of 8) to out[b, t2a + r, e * F2 +
// f2]. A row wholly the CTA's, with `output` 16-byte aligned, is one bulk copy by a thread of its own (the caller
// waits for its reads before the staging is written again); the CTA's elements of the others are stored one by one.
template <typename T>
__device__ __forceinline__ void store_block(const SubsamplingParams<T>& p, const uint16_t* stage, int pitch, int e0,
                                            int count, int m0, int m_end, int t2a, int rows) {
  const int F2 = p.f2, seg = count * F2;
  const bool aligned = (reinterpret_cast<uintptr_t>(p.output) & 15) == 0;
  uint16_t* out = reinterpret_cast<uint16_t*>(p.output) +
                  (static_cast<int64_t>(blockIdx.y) * p.t2 + t2a) * p.channels * F2 + e0 * F2;
  for (int r = 0; r < rows; ++r) {
    const int first = (t2a + r) * F2, fa = max(0, m0 - first), fb = min(F2, m_end - first);
    uint16_t* dst = out + static_cast<int64_t>(r) * p.channels * F2;
    if (fa == 0 && fb == F2 && aligned) {
      if (threadIdx.x == r % kSubThreads)
        bulk_store(dst, static_cast<uint32_t>(__cvta_generic_to_shared(stage + r * pitch)), seg * 2);
      continue;
    }
    for (int j = threadIdx.x; j < seg; j += kSubThreads) {
      const int f2 = j % F2;
      if (f2 >= fa && f2 < fb) dst[j] = stage[r * pitch + j];
    }
  }
  bulk_store_commit();
}

template <typename T, int N>
__global__ void __launch_bounds__(kSubThreads, 1) SubsamplingKernel(SubsamplingParams<T> p, SubsamplingPlan plan) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_base()));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, D = p.channels, F2 = p.f2;
  const int pixels = p.t2 * F2, m0 = blockIdx.x * kBM;
  Steps st;
  st.ring = smem;
  st.patches = smem + static_cast<uint32_t>(plan.patch_off) + tid * 16;
  st.w1 = smem + static_cast<uint32_t>(plan.w1_off);
  st.full = smem + static_cast<uint32_t>(plan.barrier_off);
  st.empty = st.full + 8 * kSlots;
  st.groups = N / kStepChannels;
  st.count = 9 * st.groups;
  unsigned char* base = smem_base();
  float* b2 = reinterpret_cast<float*>(base + plan.b2_off);
  const int g = lane >> 2, t = lane & 3;
  if (tid == 0) {
    for (int i = 0; i < kSlots; ++i) mbarrier_init(st.full + 8 * i, 1);
    for (int i = 0; i <= kSlots; ++i) mbarrier_init(st.empty + 8 * i, kSubThreads);
    mbarrier_init_fence();
    for (int s = 0; s < min(kSlots, st.count); ++s) load_step(p, plan, st, s, true);
  }
  if (tid < N) store_conv1_weights(p, tid, base + plan.w1_off);
  fence_async_shared();  // w1's image is a wgmma operand
  for (int i = tid; i < D; i += kSubThreads) b2[i] = to_float(p.bias2[i]);
  // This thread's rows: pixels past the end repeat the last one (their outputs are not stored).
  const int row = m0 + warp * 16 + g;
  const int m[2] = {min(row, pixels - 1), min(row + 8, pixels - 1)};
  store_patches(p, m, t, reinterpret_cast<uint4*>(base + plan.patch_off) + tid);
  __syncthreads();

  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  float d1[kStepChannels / 2];
  uint32_t a2[2][kStepChunks][4], patch[4];
  issue_conv1<T>(d1, patch, st, 0);
  wgmma_wait<0>();
  wgmma_fence_registers(d1);
  round_y1<T>(d1, a2[0]);
  for (int s = 0; s < st.count; s += 2) {
    step<T, N, 0>(p, plan, st, acc, d1, a2, patch, s);
    step<T, N, 1>(p, plan, st, acc, d1, a2, patch, s + 1);  // the step count, 9 x (N / 32), is even
  }
  wgmma_wait<0>();
  wgmma_fence_registers(acc);

  // relu(acc + b2[e]) staged in the ring (both warpgroups done with it) in the output's order, as many channels
  // at a time as fit, then stored (store_block), mostly by bulk copies: the CTA waits only for them to read the staging.
  const int m_end = min(m0 + kBM, pixels), t2a = m0 / F2, rows = (m_end - 1) / F2 - t2a + 1;
  const int block = min(N, static_cast<int>(plan.ring_bytes / (rows * F2 * 2)) / 8 * 8);
  uint16_t* stage = reinterpret_cast<uint16_t*>(base);
  int at[2];  // where this thread's pixels go in a staged row block (-1: past the end)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int mm = row + 8 * h, t2 = mm / F2;
    at[h] = mm < m_end ? (t2 - t2a) * block * F2 + (mm - t2 * F2) : -1;
  }
  for (int e0 = 0; e0 < D; e0 += block) {
    bulk_store_wait_read();
    __syncthreads();
#pragma unroll
    for (int nb = 0; nb < N / 8; ++nb) {
      const int e = nb * 8 + 2 * t;
      if (e < e0 || e >= min(e0 + block, D)) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (at[h] < 0) continue;
        const uint32_t v = round_pair<true>(acc[4 * nb + 2 * h] + b2[e], acc[4 * nb + 2 * h + 1] + b2[e + 1], T{});
        stage[at[h] + (e - e0) * F2] = static_cast<uint16_t>(v);
        stage[at[h] + (e + 1 - e0) * F2] = static_cast<uint16_t>(v >> 16);
      }
    }
    fence_async_shared();  // the staging is read by bulk copies
    __syncthreads();
    store_block(p, stage, block * F2, e0, min(block, D - e0), m0, m_end, t2a, rows);
  }
  bulk_store_wait_read();  // the shared memory outlives the copies' reads
#endif
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Launcher
// ---------------------------------------------------------------------------------------

// Shared memory one launch needs (bytes): the Python API refuses shapes beyond the GPU's opt-in limit.
inline size_t SubsamplingSmemBytes(int f2, int d) {
  return detail::SubsamplingPlan(f2, d).bytes;
}

template <typename T, int N>
cudaError_t SubsamplingLaunch(const SubsamplingParams<T>& p, const detail::SubsamplingPlan& plan, cudaStream_t stream) {
  const auto kernel = detail::SubsamplingKernel<T, N>;
  static int allowed[kMaxDevices] = {};
  cudaError_t status = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), static_cast<int>(plan.bytes),
                                                   allowed);
  if (status != cudaSuccess) return status;
  const dim3 grid((p.t2 * p.f2 + detail::kBM - 1) / detail::kBM, p.batch);
  kernel<<<grid, detail::kSubThreads, plan.bytes, stream>>>(p, plan);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Subsampling(const SubsamplingParams<T>& p, cudaStream_t stream) {
  if (p.batch == 0 || p.t2 == 0 || p.f2 == 0) return cudaSuccess;
  if (p.channels % detail::kDK != 0 || p.channels > 256) return cudaErrorInvalidValue;
  const detail::SubsamplingPlan plan(p.f2, p.channels);
  switch (plan.n) {
    case 64: return SubsamplingLaunch<T, 64>(p, plan, stream);
    case 128: return SubsamplingLaunch<T, 128>(p, plan, stream);
    case 192: return SubsamplingLaunch<T, 192>(p, plan, stream);
    default: return SubsamplingLaunch<T, 256>(p, plan, stream);
  }
}

}  // namespace conv2d
}  // namespace oasr
