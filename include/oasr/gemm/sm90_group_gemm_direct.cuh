// Hopper (sm90a) grouped GEMM that reads the group offsets itself: D[rows of g] = A[rows of g] . B[g]^T
// (+ bias[g]), one kernel, no setup kernel and no per-group TMA descriptors.
//
// Layout: as sm90_group_gemm.cuh. A is [L, K] row-major (the groups' rows concatenated), `offsets` [G] int32
// each group's end row (cumulative, on the device), B is [G, N, K] K-major, D is [L, N] row-major, bias [G, N].
//
// A tile is 128 consecutive rows starting at a row of its group: group g's tiles start at its first row, so
// its last tile may run into the next group's rows, which are computed and not stored. So A is one 2-D TMA
// descriptor over [L, K] read at any row, B one 3-D descriptor over [G, N, K], and D is stored from the
// accumulators under a row predicate (TMA could not clip a store at a group's end).
//
// Each CTA first turns the offsets into a table of every group's first tile, start and end row in shared
// memory (one block-wide scan; offsets that decrease or leave [0, L] are clamped as group_rows does and
// raise the error flag), then walks the tiles u = blockIdx.x, + gridDim.x, ... with the N tiles of a row
// block consecutive (they share its A rows in L2). Tiles are 128 x 128, two CTAs per SM. A producer warp
// streams the (A, B) k-blocks by TMA into a ring of three stages, each with a "full" and an "empty"
// mbarrier; two consumer warpgroups take 64 rows of each tile with wgmma (m64 n128 k16, both operands from
// shared memory, 128-byte swizzle), keep one k-block's products in flight and store their rows with the
// bias added in fp32. (Warpgroups taking whole tiles in turns, one CTA per SM, measured slower on every
// shape: dev/README.md.)
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "oasr/common/grid_dependency.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mbarrier.cuh"
#include "oasr/common/tma.cuh"
#include "oasr/common/wgmma.cuh"
#include "sm90_group_gemm.cuh"

namespace oasr::gemm {

namespace direct {

constexpr int kBM = 128, kBN = 128, kBK = 64;  // kBK: one 128-byte swizzle row of 16-bit elements
constexpr int kConsumers = 256;                // two warpgroups
constexpr int kThreads = kConsumers + 32;      // and the producer warp

// The CUDA type of a CUTLASS 16-bit element (the kernel's arithmetic is CUDA's, the API's types CUTLASS's).
template <class Element>
using Native = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, half, nv_bfloat16>;

// Shared memory: the stages' A tiles, then their B tiles (each 1024-byte aligned, as the swizzle needs), the
// full and empty mbarriers, each warpgroup's bias rows, then the group table: first tile [G + 1], start row
// [G], end row [G].
template <class Element, int Stages>
struct Plan {
  static constexpr uint32_t kABytes = kBM * kBK * sizeof(Element);
  static constexpr uint32_t kBBytes = kBN * kBK * sizeof(Element);
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kBOffset = Stages * kABytes;
  static constexpr uint32_t kBarriers = Stages * kStageBytes;
  static constexpr uint32_t kBias = kBarriers + 2 * Stages * 8;       // fp32 [warpgroup][tile parity][kBN]
  static constexpr uint32_t kTable = kBias + 2 * 2 * kBN * sizeof(float);
  static size_t bytes(int groups) { return 1024 + kTable + 4 * (3 * static_cast<size_t>(groups) + 1); }
};

template <class Element>
struct Params {
  CUtensorMap a;  // [L, K]: boxes of kBK x kBM
  CUtensorMap b;  // [G, N, K]: boxes of kBK x kBN x 1
  const int32_t* offsets;
  Element* d;
  int64_t ldd;
  const Element* bias;  // [G][N] or null
  int64_t group_stride_bias;
  int* error;
  int groups, rows, n, k;
};

// Fills the group table; returns the total number of row tiles. Every thread takes part (block barriers).
template <class Element>
__device__ __forceinline__ int group_table(const Params<Element>& p, int* first, int* start, int* end) {
  constexpr int kWarps = kThreads / 32;
  __shared__ int warp_sums[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int carry = 0;
  bool bad = false;
  for (int base = 0; base < p.groups; base += kThreads) {
    const int g = base + threadIdx.x;
    int count = 0;
    if (g < p.groups) {
      int s, e;
      bool clamped;
      group_rows(p.offsets, g, p.rows, s, e, clamped);
      bad |= clamped;
      start[g] = s;
      end[g] = e;
      count = (e - s + kBM - 1) / kBM;
    }
    int inclusive = count;  // a warp's inclusive scan, then the warps before it
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += x;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    int before = carry, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      before += w < warp ? warp_sums[w] : 0;
      total += warp_sums[w];
    }
    if (g < p.groups) first[g + 1] = before + inclusive;
    carry += total;
    __syncthreads();  // warp_sums is rewritten by the next chunk
  }
  if (threadIdx.x == 0) first[0] = 0;
  if (__syncthreads_or(bad) && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(p.error, 1);
  return carry;
}

// Tile u: group g, its first row, the group's end row, the first column.
struct Tile {
  int g, row0, end, n0;
};

__device__ __forceinline__ Tile locate(int u, int n_tiles, int groups, const int* first, const int* start,
                                       const int* end) {
  const int m = u / n_tiles;
  int lo = 0, hi = groups - 1;  // the last group whose first tile is <= m (empty groups share their successor's)
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (first[mid] <= m) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return Tile{lo, start[lo] + (m - first[lo]) * kBM, end[lo], (u - m * n_tiles) * kBN};
}

template <class Element, int Stages>
__device__ __forceinline__ void produce(const Params<Element>& p, uint32_t smem, int units, int n_tiles,
                                        int k_blocks, const int* first, const int* start, const int* end) {
  using P = Plan<Element, Stages>;
  const uint32_t full = smem + P::kBarriers, empty = full + 8 * Stages;
  int it = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Tile t = locate(u, n_tiles, p.groups, first, start, end);
    for (int kb = 0; kb < k_blocks; ++kb, ++it) {
      const int slot = it % Stages;
      if (it >= Stages) mbarrier_wait(empty + 8 * slot, (it / Stages - 1) & 1);  // its last use was released
      mbarrier_arrive_expect_tx(full + 8 * slot, P::kStageBytes);
      tma_load(smem + slot * P::kABytes, &p.a, full + 8 * slot, kb * kBK, t.row0);
      tma_load(smem + P::kBOffset + slot * P::kBBytes, &p.b, full + 8 * slot, kb * kBK, t.n0, t.g);
    }
  }
}

// v[i] for a lane-dependent i, as selects (a dynamic index would put v in local memory).
__device__ __forceinline__ uint32_t pick(const uint32_t (&v)[4], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}

// Stores 8 consecutive elements (four pairs `w`) of one row at column `c`, those before column `n` only.
template <class T>
__device__ __forceinline__ void store_row(T* row, int c, int n, const uint32_t (&w)[4]) {
  if (c + 8 <= n) {
    *reinterpret_cast<uint4*>(row + c) = make_uint4(w[0], w[1], w[2], w[3]);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (c + e < n) {
      const uint32_t pair = w[e / 2];
      const auto bits = static_cast<unsigned short>(e % 2 ? pair >> 16 : pair & 0xffff);
      if constexpr (std::is_same_v<T, half>) {
        row[c + e] = __ushort_as_half(bits);
      } else {
        row[c + e] = __ushort_as_bfloat16(bits);
      }
    }
  }
}

// One row's pairs of four 8-column blocks (accumulators acc[first + 4 i], + 1, bias b[2 i], + 1) exchanged
// among the row's four lanes: lane q ends with block q whole in `w`. Round k: lane q sends its pair of block
// (q + k) % 4 and receives, from lane (q - k) % 4, that lane's pair of block q.
template <class T, int N>
__device__ __forceinline__ void exchange(uint32_t (&w)[4], const float (&acc)[N], int first, const float (&b)[8],
                                         int q, int lane) {
  uint32_t v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = 0;  // each is set by exactly one round
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = round_pair(acc[first + 4 * i] + b[2 * i], acc[first + 4 * i + 1] + b[2 * i + 1], T{});
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t y = __shfl_sync(0xffffffffu, pick(v, (q + k) & 3), (lane & ~3) | ((q - k) & 3));
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = i == ((q - k) & 3) ? y : w[i];
  }
}

// The warp's 16 rows from row `rows` of the tile, `bias` (the tile's kBN columns) added, rounded once. The
// accumulators hold pairs of columns (lane 4 g + t: columns 8 j + 2 t, + 1 of rows g and g + 8); four lanes of
// a row swap their pairs of four 8-column blocks so that each stores one block whole: 16-byte stores covering
// whole 32-byte sectors.
// The pairs' own 4-byte stores, half a sector per row and instruction, took 23 us against 17 on 8 x 1000 rows.
template <class Element, bool Bias>
__device__ __forceinline__ void store(const Params<Element>& p, const Tile& t, int rows, const float (&acc)[kBN / 2],
                                      const float* bias) {
  using T = Native<Element>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q = lane & 3;
  const int r = t.row0 + rows + 16 * (warp & 3) + (lane >> 2);  // and r + 8 (common/wgmma.cuh's layout)
  T* row_a = reinterpret_cast<T*>(p.d) + static_cast<int64_t>(r) * p.ldd;
  T* row_b = row_a + 8 * p.ldd;
  const bool live_a = r < t.end, live_b = r + 8 < t.end;
#pragma unroll
  for (int jj = 0; jj < kBN / 32; ++jj) {  // four 8-column blocks 4 jj .. 4 jj + 3
    float b[8] = {};                       // the bias of this lane's pair in each block
    if constexpr (Bias) {
#pragma unroll
      for (int i = 0; i < 8; ++i) b[i] = bias[8 * (4 * jj + i / 2) + 2 * q + i % 2];
    }
    const int c = t.n0 + 8 * (4 * jj + q);  // this lane's block after the exchange
    uint32_t w[4];
    exchange<T>(w, acc, 16 * jj, b, q, lane);
    if (live_a) store_row(row_a, c, p.n, w);
    exchange<T>(w, acc, 16 * jj + 2, b, q, lane);
    if (live_b) store_row(row_b, c, p.n, w);
  }
}

// The dynamic shared memory, from its first 1024-byte boundary.
__device__ __forceinline__ unsigned char* smem_base() {
  extern __shared__ unsigned char smem_bytes[];
  return smem_bytes + ((1024 - __cvta_generic_to_shared(smem_bytes) % 1024) % 1024);
}

// This warpgroup's 64 rows of every tile of the CTA.
template <class Element, int Stages, bool Bias>
__device__ __forceinline__ void consume(const Params<Element>& p, uint32_t smem, int units, int n_tiles,
                                        int k_blocks, const int* first, const int* start, const int* end) {
  using P = Plan<Element, Stages>;
  using T = Native<Element>;
  const uint32_t full = smem + P::kBarriers, empty = full + 8 * Stages;
  const int rows = 64 * (threadIdx.x >> 7);                     // this warpgroup's first row of a tile
  const uint32_t a_rows = rows * kBK * sizeof(Element);         // and its bytes into a stage's A
  const bool releases = (threadIdx.x & 31) == 0;                // one arrival per warp
  float* bias = reinterpret_cast<float*>(smem_base() + P::kBias) + (threadIdx.x >> 7) * 2 * kBN;
  float acc[kBN / 2];
  int it = 0, parity = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x, parity ^= 1) {
    const Tile t = locate(u, n_tiles, p.groups, first, start, end);
    if constexpr (Bias) {  // the tile's bias row, in while the products run
      const int c = t.n0 + (threadIdx.x & 127);
      const T* row = reinterpret_cast<const T*>(p.bias) + t.g * p.group_stride_bias;
      bias[parity * kBN + (threadIdx.x & 127)] = c < p.n ? static_cast<float>(row[c]) : 0.f;
    }
    for (int kb = 0; kb < k_blocks; ++kb, ++it) {
      const int slot = it % Stages;
      mbarrier_wait(full + 8 * slot, (it / Stages) & 1);
      const uint32_t a = smem + slot * P::kABytes + a_rows, b = smem + P::kBOffset + slot * P::kBBytes;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
        wgmma_ss_m64k16<T, kBN>(acc, wgmma_desc_sw128(a + 32 * ks), wgmma_desc_sw128(b + 32 * ks), kb > 0 || ks > 0);
      }
      wgmma_commit();
      if (kb > 0) {  // the k-block before this one is done with its stage
        wgmma_wait<1>();
        if (releases) mbarrier_arrive(empty + 8 * ((it - 1) % Stages));
      }
    }
    wgmma_wait<0>();
    if (releases) mbarrier_arrive(empty + 8 * ((it - 1) % Stages));
    wgmma_fence_registers(acc);
    // The warpgroup's bias writes are visible; the two parities keep a fast warp's next write off a row that a
    // slow warp still reads.
    if constexpr (Bias) {
      if (threadIdx.x < 128) {  // barrier ids as constants: ptxas reserves all 16 for a register id
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
      } else {
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
      }
    }
    store<Element, Bias>(p, t, rows, acc, bias + parity * kBN);
  }
}

// Two CTAs per SM. ptxas keeps to 96 registers and spills a few bytes in the epilogue; __maxnreg__(112) instead
// (no spill) measured 20.0 against 16.5 us on 8 x 1000 rows (dev/group_gemm/results/e3e06315/).
template <class Element, int Stages, bool Bias>
__global__ void __launch_bounds__(kThreads, 2) GroupGemmKernel(const __grid_constant__ Params<Element> p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using P = Plan<Element, Stages>;
  unsigned char* base = smem_base();
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(base));
  int* first = reinterpret_cast<int*>(base + P::kTable);
  int* start = first + p.groups + 1;
  int* end = start + p.groups;
  if (threadIdx.x == kConsumers) {
    tma_prefetch(&p.a);
    tma_prefetch(&p.b);
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(smem + P::kBarriers + 8 * s, 1);                           // full: the producer's arrival
      mbarrier_init(smem + P::kBarriers + 8 * (Stages + s), kConsumers / 32);  // empty: one per consumer warp
    }
    mbarrier_init_fence();
  }
  grid_dependency_wait();  // the offsets and A may come from the kernel before; D may still be read by it
  grid_dependency_trigger();
  const int tiles = group_table(p, first, start, end);  // its barriers also publish the mbarriers
  const int n_tiles = (p.n + kBN - 1) / kBN, k_blocks = (p.k + kBK - 1) / kBK;
  const int units = tiles * n_tiles;
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) {
      produce<Element, Stages>(p, smem, units, n_tiles, k_blocks, first, start, end);
    }
  } else {
    consume<Element, Stages, Bias>(p, smem, units, n_tiles, k_blocks, first, start, end);
  }
#endif
}

}  // namespace direct

// Launches the grouped GEMM on `stream` with `Stages` pipeline stages: no workspace, no allocation, no host
// synchronisation. `pdl`: with programmatic dependent launch (it waits on the kernel before it on the device).
template <class Element, int Stages, bool Bias>
cudaError_t RunDirectGroup(const GroupGemmParams<Element>& p, bool pdl, cudaStream_t stream) {
  using P = direct::Plan<Element, Stages>;
  direct::Params<Element> params{};
  const CUtensorMapDataType type =
      std::is_same_v<Element, cutlass::half_t> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t a_dims[2] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.rows)};
  const uint64_t a_strides[1] = {static_cast<uint64_t>(p.lda) * sizeof(Element)};
  const uint32_t a_box[2] = {direct::kBK, direct::kBM};
  const uint64_t b_dims[3] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n),
                              static_cast<uint64_t>(p.groups)};
  const uint64_t b_strides[2] = {static_cast<uint64_t>(p.ldb) * sizeof(Element),
                                 static_cast<uint64_t>(p.group_stride_b) * sizeof(Element)};
  const uint32_t b_box[3] = {direct::kBK, direct::kBN, 1};
  if (!encode_tensor_map(&params.a, type, p.a, 2, a_dims, a_strides, a_box) ||
      !encode_tensor_map(&params.b, type, p.b, 3, b_dims, b_strides, b_box)) {
    return cudaErrorInvalidValue;
  }
  params.offsets = p.offsets;
  params.d = p.d;
  params.ldd = p.ldd;
  params.bias = p.bias;
  params.group_stride_bias = p.group_stride_bias;
  params.error = p.error;
  params.groups = p.groups;
  params.rows = p.rows;
  params.n = p.n;
  params.k = p.k;

  const void* kernel = reinterpret_cast<const void*>(&direct::GroupGemmKernel<Element, Stages, Bias>);
  const size_t smem = P::bytes(p.groups);
  cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (error != cudaSuccess) return error;
  int per_sm = 0;
  error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, direct::kThreads, smem);
  if (error != cudaSuccess) return error;
  if (per_sm == 0) return cudaErrorInvalidConfiguration;  // too many groups for the table in shared memory
  // Tiles: at most one partial tile per non-empty group beyond the rows' own.
  const int64_t n_tiles = (p.n + direct::kBN - 1) / direct::kBN;
  const int64_t tiles = ((p.rows + direct::kBM - 1) / direct::kBM + std::min(p.groups, p.rows)) * n_tiles;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, static_cast<int64_t>(per_sm) * p.sm_count));
  void* args[] = {&params};
  return launch_kernel(kernel, grid, direct::kThreads, smem, stream, pdl, args);
}

}  // namespace oasr::gemm
