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
// The second convolution is an implicit GEMM: M = the output pixels (t2, f2) of one utterance, N = the
// D output channels, K = 9 taps x D channels. A CTA owns 128 consecutive pixels and every output
// channel, and walks the input channels in chunks of 16. Its warps split the work:
//   - a producer warpgroup computes each chunk's y1 over the rows the pixels need (halo included) into
//     one of two y1 buffers on tensor cores (mma.sync: the 9 taps and the bias as a 10th tap are the K
//     of a 16-deep product whose A, the input patches, stays in registers across chunks; a warp issues
//     six tiles' products before it reads any, so they queue behind the wgmma work once, not one by
//     one); its first thread streams w2, packed by the caller as the wgmma's shared-memory image
//     of each chunk, in slices of three taps (one bulk copy, TMA, each) through a ring of six slots,
//     a chunk ahead;
//   - two consumer warpgroups (64 pixels each) run one wgmma m64nNk16 per tap: A from registers
//     (ldmatrix gathers each pixel's window from the y1 buffer), B = the tap's w2 slice; at the end
//     they stage relu(acc + b2) in shared memory as [e][pixel], for stores along f2.
// The y1 tile is stored as four parity planes (even/odd row x even/odd column), so the pixels of a tap
// read consecutive cells; the two 16-byte halves of a cell swap every four cells (conflict-free ldmatrix).
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
  const T* weight2 = nullptr;   // [D / 16][9][N / 8][2][8][8]: per chunk of 16 input channels c and tap, the
                                //   wgmma's B image of w2[e, c] (N = D rounded up to 64, zero rows past D)
  const T* bias2 = nullptr;     // [D]
  int64_t input_b_stride = 0, input_t_stride = 0, input_f_stride = 0;
  int batch = 0, frames = 0, features = 0, channels = 0;
  int t2 = 0, f2 = 0;           // output rows and columns
};

namespace detail {

constexpr int kSubThreads = 384;   // warpgroup 0 produces, 1 and 2 consume
constexpr int kProducerWarps = 4;
constexpr int kBM = 128;           // pixels per CTA
constexpr int kDK = 16;            // input channels per chunk: one k16 step per tap
constexpr int kCell = kDK * 2;     // bytes of one y1 cell (16 channels)
constexpr int kCachedTiles = 12;   // 16-cell conv1 tiles whose patches a producer warp keeps (F = 80: 45 tiles)
constexpr int kBatch = 6;          // conv1 tiles whose products a warp issues together
constexpr int kOutPitch = 136;     // halves per output channel of the staged output tile (conflict-free writes)
constexpr int kSliceTaps = 3;      // taps per w2 slice (one bulk copy)
constexpr int kSlots = 6;          // w2 slices in flight or in use

// Output channels rounded up to a wgmma width.
inline int subsampling_n(int d) { return (d + 63) / 64 * 64; }

// Shared-memory plan of one launch (byte offsets, 16-byte aligned): two y1 buffers, the w2 ring, conv1's
// B fragments ([D / 16][2][32 lanes] x 8 bytes) and b2 (fp32 [D]), the ring's mbarriers (full, then
// empty, per slot). The output tile reuses the ring.
struct SubsamplingPlan {
  SubsamplingPlan() = default;
  int width = 0;      // cells per plane row: F2 + 1
  int plane = 0;      // cells per plane: (rows the pixels span + 1) x width
  int cells = 0;      // the four planes, rounded up to a 16-cell conv1 tile
  int n = 0;          // output channels of the wgmma (D rounded up to 64)
  size_t y1_bytes = 0, slice_bytes = 0, ring_off = 0, table_off = 0, barrier_off = 0, bytes = 0;

  SubsamplingPlan(int t2, int f2, int d) {
    const int nt2 = std::min(t2, (kBM - 1) / f2 + 2);
    width = f2 + 1;
    plane = (nt2 + 1) * width;
    cells = (4 * plane + 15) / 16 * 16;
    n = subsampling_n(d);
    y1_bytes = static_cast<size_t>(cells) * kCell;
    slice_bytes = static_cast<size_t>(kSliceTaps) * n * kCell;
    ring_off = 2 * y1_bytes;
    table_off = ring_off + kSlots * slice_bytes;
    barrier_off = table_off + static_cast<size_t>(d / kDK) * 2 * 32 * 8 + static_cast<size_t>(d) * sizeof(float);
    bytes = barrier_off + 2 * kSlots * 8;
  }
};

// The dynamic shared memory of the launch.
__device__ __forceinline__ unsigned char* smem_base() {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  return smem_bytes;
}

// Byte offset of the 16-byte half `h` of y1 cell `s` (halves swap every four cells).
__device__ __forceinline__ uint32_t cell_offset(int s, int h) { return s * kCell + ((h ^ ((s >> 2) & 1)) << 4); }

__device__ __forceinline__ void named_sync(int id, int threads = kSubThreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads));
}
__device__ __forceinline__ void named_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kSubThreads) : "memory");
}
// Named barriers: y1 buffer s is full (1 + s), y1 buffer s is free again (3 + s), the consumers are done (5).
constexpr int kFull = 1, kEmpty = 3, kDone = 5;

// The 16-bit pattern of conv1's K entry k for channel c: taps 0..8, the bias at 9, zeros after.
template <typename T>
__device__ __forceinline__ uint16_t conv1_weight(const SubsamplingParams<T>& p, int c, int k) {
  const T* src = k < 9 ? p.weight1 + c * 9 + k : p.bias1 + c;
  return k <= 9 ? *reinterpret_cast<const uint16_t*>(src) : uint16_t{0};
}

// conv1's B fragments of chunk `chunk`, pair `nb` (channels 16 chunk + 8 nb + g) for one lane.
template <typename T>
__device__ __forceinline__ uint2 conv1_weights(const SubsamplingParams<T>& p, int chunk, int nb, int lane) {
  const int g = lane >> 2, t = lane & 3, c = chunk * kDK + 8 * nb + g;
  return make_uint2(pack_pair(conv1_weight(p, c, 2 * t), conv1_weight(p, c, 2 * t + 1)),
                    pack_pair(conv1_weight(p, c, 2 * t + 8), conv1_weight(p, c, 2 * t + 9)));
}

// conv1's A fragment for cells 16 mt + g and + 8: each cell's 3x3 input patch (K = tap), 1 for the bias;
// zeros for the cells past the edges, whose outputs nobody reads.
template <typename T>
__device__ __forceinline__ void conv1_patches(uint32_t (&a)[4], const SubsamplingParams<T>& p,
                                              const SubsamplingPlan& plan, int mt, int lane, int y1_row0) {
  const int g = lane >> 2, t = lane & 3;
  const T* x = p.input + static_cast<int64_t>(blockIdx.y) * p.input_b_stride;
  uint16_t v[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int s = mt * 16 + g + 8 * h;
    const int pl = s / plan.plane, rem = s - pl * plan.plane, r = rem / plan.width;
    const int row = y1_row0 + 2 * r + (pl >> 1), col = 2 * (rem - r * plan.width) + (pl & 1);
    const bool valid = pl < 4 && row < (p.frames - 1) / 2 && col < (p.features - 1) / 2;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int k = 2 * t + (q & 1) + 8 * (q >> 1);
      uint16_t bits = k == 9 ? one_bits<T>() : uint16_t{0};
      if (k < 9 && valid) {
        const T value = x[(2 * row + k / 3) * p.input_t_stride + (2 * col + k % 3) * p.input_f_stride];
        bits = *reinterpret_cast<const uint16_t*>(&value);
      }
      v[h][q] = bits;
    }
  }
  a[0] = pack_pair(v[0][0], v[0][1]);
  a[1] = pack_pair(v[1][0], v[1][1]);
  a[2] = pack_pair(v[0][2], v[0][3]);
  a[3] = pack_pair(v[1][2], v[1][3]);
}

// conv1 of the 16-cell tiles first, first + kProducerWarps, ... (n of them, A fragments a) for the chunk's
// 16 channels (B fragments w) into the y1 buffer: every product first, then the stores.
template <typename T, int kN>
__device__ __forceinline__ void conv1_tiles(const uint32_t (&a)[kN][4], int first, int n, const uint2 (&w)[2],
                                            int lane, uint32_t y1) {
  const int g = lane >> 2, t = lane & 3;
  float c[kN][2][4];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if (i >= n) break;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      const uint32_t b[2] = {w[nb].x, w[nb].y};
      c[i][nb][0] = c[i][nb][1] = c[i][nb][2] = c[i][nb][3] = 0.0f;
      mma_16816(c[i][nb], a[i], b, T{});
    }
  }
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if (i >= n) break;
    const int s = (first + kProducerWarps * i) * 16 + g;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(y1 + cell_offset(s, nb) + 4 * t),
                   "r"(round_pair<true>(c[i][nb][0], c[i][nb][1], T{})));
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(y1 + cell_offset(s + 8, nb) + 4 * t),
                   "r"(round_pair<true>(c[i][nb][2], c[i][nb][3], T{})));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------

// The three w2 slices of `chunk` into their ring slots, once the slots are free (one thread).
template <typename T>
__device__ __forceinline__ void load_slices(const SubsamplingParams<T>& p, const SubsamplingPlan& plan, uint32_t smem,
                                            int chunk) {
  const uint32_t full = smem + plan.barrier_off, empty = full + 8 * kSlots;
#pragma unroll
  for (int q = chunk * (9 / kSliceTaps); q < (chunk + 1) * (9 / kSliceTaps); ++q) {
    const int slot = q % kSlots, use = q / kSlots;
    if (use > 0) mbarrier_wait(empty + 8 * slot, (use - 1) & 1);
    bulk_copy(smem + plan.ring_off + slot * plan.slice_bytes, p.weight2 + q * plan.slice_bytes / sizeof(T),
              plan.slice_bytes, full + 8 * slot);
  }
}

// Warpgroup 0: each chunk's w2 slices and y1 (warp w owns the 16-cell tiles w, w + kProducerWarps, ...).
template <typename T>
__device__ __forceinline__ void produce(const SubsamplingParams<T>& p, const SubsamplingPlan& plan, uint32_t smem,
                                        int t2a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, tiles = plan.cells / 16;
  const uint2* table = reinterpret_cast<const uint2*>(smem_base() + plan.table_off);
  const int cached = min(kCachedTiles, (tiles - warp + kProducerWarps - 1) / kProducerWarps);
  uint32_t a[kCachedTiles / kBatch][kBatch][4];
#pragma unroll
  for (int i = 0; i < kCachedTiles; ++i)
    if (i < cached) conv1_patches(a[i / kBatch][i % kBatch], p, plan, warp + kProducerWarps * i, lane, 2 * t2a);

  for (int chunk = 0; chunk * kDK < p.channels; ++chunk) {
    const int stage = chunk & 1;
    const uint32_t y1 = smem + stage * plan.y1_bytes;
    if (chunk >= 2) named_sync(kEmpty + stage);  // chunk - 2's y1 buffer and w2 slots are free
    if (threadIdx.x == 0) load_slices(p, plan, smem, chunk);
    const uint2 w[2] = {table[(chunk * 2) * 32 + lane], table[(chunk * 2 + 1) * 32 + lane]};
#pragma unroll
    for (int b = 0; b < kCachedTiles / kBatch; ++b)
      conv1_tiles<T>(a[b], warp + kProducerWarps * kBatch * b, cached - b * kBatch, w, lane, y1);
    for (int t = warp + kProducerWarps * kCachedTiles; t < tiles; t += kProducerWarps) {  // past the cached tiles
      uint32_t extra[1][4];
      conv1_patches(extra[0], p, plan, t, lane, 2 * t2a);
      conv1_tiles<T>(extra, t, 1, w, lane, y1);
    }
    named_arrive(kFull + stage);
  }
}

// Warpgroups 1 and 2: 64 pixels x N channels each, one wgmma per tap and chunk; then the epilogue.
template <typename T, int N>
__device__ __forceinline__ void consume(const SubsamplingParams<T>& p, const SubsamplingPlan& plan, uint32_t smem,
                                        int t2a, int m0) {
  const int tid = threadIdx.x - 32 * kProducerWarps, lane = tid & 31, warp = tid >> 5;  // consumer warp 0..7
  const int D = p.channels, F2 = p.f2, pixels = p.t2 * F2, chunks = D / kDK;
  // ldmatrix: lane 8 j + r gives row (j & 1) * 8 + r, half j >> 1 of its warp's 16 x 16 A block.
  const int m = min(m0 + warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), pixels - 1);
  const int m_t2 = m / F2, pix = (m_t2 - t2a) * plan.width + (m - m_t2 * F2), half_ = lane >> 4;

  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  uint32_t a[2][4];
  const uint32_t full = smem + plan.barrier_off, empty = full + 8 * kSlots;
  const int slices = chunks * (9 / kSliceTaps);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int stage = chunk & 1;
    const uint32_t y1 = smem + stage * plan.y1_bytes;
    named_sync(kFull + stage);
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int q = chunk * (9 / kSliceTaps) + tap / kSliceTaps, slot = q % kSlots;
      if (tap % kSliceTaps == 0) mbarrier_wait(full + 8 * slot, (q / kSlots) & 1);
      const int i = tap / 3, j = tap % 3;
      const int s = pix + ((i & 1) * 2 + (j & 1)) * plan.plane + (i >> 1) * plan.width + (j >> 1);
      load_matrices<4, false>(a[tap & 1], y1 + cell_offset(s, half_));
      wgmma_fence();
      wgmma_fence_registers(acc);
      const uint32_t b = smem + plan.ring_off + slot * plan.slice_bytes + (tap % kSliceTaps) * N * kCell;
      wgmma_m64k16<T, N>(acc, a[tap & 1], wgmma_desc(b, 128, 256));
      wgmma_commit();
      wgmma_fence_registers(acc);
      wgmma_wait<1>();  // the previous tap's product is done: its A buffer, slice and y1 buffer are free
      if (tap % kSliceTaps == 0 && q >= 1 && q - 1 + kSlots < slices) mbarrier_arrive(empty + 8 * ((q - 1) % kSlots));
      if (tap == 0 && chunk >= 1 && chunk + 1 < chunks) named_arrive(kEmpty + (stage ^ 1));
    }
  }
  wgmma_wait<0>();
  wgmma_fence_registers(acc);

  // relu(acc + b2[e]) -> the tile [e][pixel] in the ring (both warpgroups done with it), then along f2 to
  // out[b, t2, e * F2 + f2].
  named_sync(kDone, 256);
  const int g = lane >> 2, t = lane & 3;
  const float* b2 = reinterpret_cast<const float*>(smem_base() + plan.table_off + D / kDK * 64 * 8);
  T* tile = reinterpret_cast<T*>(smem_base() + plan.ring_off);
#pragma unroll
  for (int nb = 0; nb < N / 8; ++nb) {
    const int e = nb * 8 + 2 * t;
    const float bias0 = b2[min(e, D - 1)], bias1 = b2[min(e + 1, D - 1)];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * 16 + g + 8 * h;
      tile[e * kOutPitch + row] = from_float<T>(fmaxf(acc[4 * nb + 2 * h] + bias0, 0.0f));
      tile[(e + 1) * kOutPitch + row] = from_float<T>(fmaxf(acc[4 * nb + 2 * h + 1] + bias1, 0.0f));
    }
  }
  named_sync(kDone, 256);
  const int row = tid & (kBM - 1), mm = m0 + row;
  if (mm >= pixels) return;
  const int t2 = mm / F2;
  T* out = p.output + (static_cast<int64_t>(blockIdx.y) * p.t2 + t2) * D * F2 + (mm - t2 * F2);
  for (int e = tid >> 7; e < D; e += 2) out[static_cast<int64_t>(e) * F2] = tile[e * kOutPitch + row];
}

template <typename T, int N>
__global__ void __launch_bounds__(kSubThreads, 1) SubsamplingKernel(SubsamplingParams<T> p, SubsamplingPlan plan) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_base()));
  const int m0 = blockIdx.x * kBM, t2a = m0 / p.f2;
  uint2* table = reinterpret_cast<uint2*>(smem_base() + plan.table_off);
  for (int i = threadIdx.x; i < p.channels / kDK * 64; i += kSubThreads)
    table[i] = conv1_weights(p, i >> 6, (i >> 5) & 1, i & 31);
  float* b2 = reinterpret_cast<float*>(table + p.channels / kDK * 64);
  for (int i = threadIdx.x; i < p.channels; i += kSubThreads) b2[i] = to_float(p.bias2[i]);
  if (threadIdx.x < kSlots) {
    const uint32_t full = smem + static_cast<uint32_t>(plan.barrier_off) + 8 * threadIdx.x;
    mbarrier_init(full, 1);
    mbarrier_init(full + 8 * kSlots, 256);  // every consumer thread
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 32 * kProducerWarps) {
    produce<T>(p, plan, smem, t2a);
  } else {
    consume<T, N>(p, plan, smem, t2a, m0);
  }
#endif
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Launcher
// ---------------------------------------------------------------------------------------

// Shared memory one launch needs (bytes): the Python API refuses shapes beyond the GPU's opt-in limit.
inline size_t SubsamplingSmemBytes(int t2, int f2, int d) { return detail::SubsamplingPlan(t2, f2, d).bytes; }

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
  const detail::SubsamplingPlan plan(p.t2, p.f2, p.channels);
  switch (plan.n) {
    case 64: return SubsamplingLaunch<T, 64>(p, plan, stream);
    case 128: return SubsamplingLaunch<T, 128>(p, plan, stream);
    case 192: return SubsamplingLaunch<T, 192>(p, plan, stream);
    default: return SubsamplingLaunch<T, 256>(p, plan, stream);
  }
}

}  // namespace conv2d
}  // namespace oasr
