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
// block consecutive (they share its A rows in L2). Tiles are 128 x 128, one CTA per SM. A producer warp
// streams the (A, B) k-blocks by TMA into a ring of six stages, each with a "full" and an "empty" mbarrier; its
// warpgroup gives its registers to the consumers (setmaxnreg), who then hold a tile without spilling.
// Two pairs of consumer warpgroups take the CTA's tiles in turns (ping-pong): in a pair each warpgroup runs
// wgmma on 64 rows of the tile (m64 n128 k16, both operands from shared memory, 128-byte swizzle), and the
// pairs issue their products one tile after the other, so that one pair's epilogue (bias added in fp32,
// rounded, transposed through shared memory, stored under the row predicate) runs while the other's
// products keep the tensor cores busy. Measured variants (two CTAs per SM sharing tiles, 256-row tiles, an
// L2 prefetch of the next tile): dev/group_gemm/RESULTS.md.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "oasr/common/grid_dependency.cuh"
#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mma.cuh"
#include "oasr/common/mbarrier.cuh"
#include "oasr/common/tma.cuh"
#include "oasr/common/wgmma.cuh"
#include "sm90_group_gemm.cuh"

namespace oasr::gemm {

namespace direct {

constexpr int kBM = 128, kBN = 128, kBK = 64;  // kBK: one 128-byte swizzle row of 16-bit elements
constexpr int kPairThreads = 256;              // two warpgroups share a tile
constexpr int kConsumers = 2 * kPairThreads;   // two pairs take the CTA's tiles in turns
constexpr int kThreads = kConsumers + 128;     // and the producer warpgroup (one warp of it loads)
constexpr int kStages = 6;                     // 32 KB each: one CTA per SM

// What the epilogue makes of a tile's fp32 results, the bias added: the gemm family's activations, or GLU: then a
// tile's B holds 64 weight rows and their 64 gate rows (N / 2 rows on), and the tile stores value * sigmoid(gate),
// 64 columns. csrc/gemm_epilogue.h maps a module's epilogue name onto it.
enum class Epilogue { kNone, kRelu, kGelu, kGeluTanh, kSilu, kGlu };

// A tile's output columns (also B's rows per TMA box: GLU loads its values and its gates in two boxes).
template <Epilogue E>
constexpr int kOutCols = E == Epilogue::kGlu ? kBN / 2 : kBN;

// The output's columns, of a B with `n` rows per group, and the tiles across them.
template <Epilogue E>
__host__ __device__ __forceinline__ int out_columns(int n) {
  return E == Epilogue::kGlu ? n / 2 : n;
}
template <Epilogue E>
__host__ __device__ __forceinline__ int column_tiles(int n) {
  return (out_columns<E>(n) + kOutCols<E> - 1) / kOutCols<E>;
}

// SiLU and GLU gate by times_one_plus_tanh, whose h is half the value: their bias's add halves the accumulator too
// (one FMA), or a multiply does without a bias.
template <Epilogue E>
constexpr bool kHalves = E == Epilogue::kSilu || E == Epilogue::kGlu;

// The activation, as the gemm family's CUTLASS epilogues compute it (gelu_tanh by tanh.approx, SiLU by fast_silu's
// form), of the biased result x, halved for SiLU (kHalves).
template <Epilogue E>
__device__ __forceinline__ float activate(float x) {
  if constexpr (E == Epilogue::kRelu) {
    return fmaxf(x, 0.f);
  } else if constexpr (E == Epilogue::kGelu) {
    return 0.5f * x * (1.f + erff(x * 0.70710678f));
  } else if constexpr (E == Epilogue::kGeluTanh) {
    return times_one_plus_tanh(0.5f * x, 0.7978845608f * (x + 0.044715f * x * x * x));
  } else if constexpr (E == Epilogue::kSilu) {
    return times_one_plus_tanh(x, x);
  } else {
    return x;
  }
}

// Shared memory: the stages' A tiles, then their B tiles (each 1024-byte aligned, as the swizzle needs), the
// full and empty mbarriers, each warpgroup's bias rows, each consumer warp's 8 x 64 output block (the
// epilogue's transpose), then the group table: first tile [G + 1], start row [G], end row [G].
template <class Element, int Stages>
struct Plan {
  static constexpr uint32_t kABytes = kBM * kBK * sizeof(Element);
  static constexpr uint32_t kBBytes = kBN * kBK * sizeof(Element);
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kBOffset = Stages * kABytes;
  static constexpr uint32_t kBarriers = Stages * kStageBytes;
  static constexpr uint32_t kBias = kBarriers + 2 * Stages * 8;       // fp32 [warpgroup][tile parity][kBN]
  static constexpr uint32_t kBlocks = kBias + kConsumers / 128 * 2 * kBN * sizeof(float);
  static constexpr uint32_t kBlockBytes = 8 * 64 * sizeof(Element);
  static constexpr uint32_t kTable = kBlocks + kConsumers / 32 * kBlockBytes;
  static size_t bytes(int groups) { return 1024 + kTable + 4 * (3 * static_cast<size_t>(groups) + 1); }
};

// TMA's type of the family's 16-bit elements.
template <class Element>
constexpr CUtensorMapDataType kTmaType =
    std::is_same_v<Element, cutlass::half_t> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;

template <class Element>
struct Params : GroupGemmParams<Element> {
  CUtensorMap a_map;  // [L, K]: boxes of kBK x kBM
  CUtensorMap b_map;  // [G, N, K]: boxes of kBK x kBN x 1
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
      if (p.offsets != nullptr) {
        group_rows(p.offsets, g, p.rows, s, e, clamped);
      } else {  // the gemm family: one group of every row
        s = 0;
        e = p.rows;
        clamped = false;
      }
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

template <int Cols>
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
  return Tile{lo, start[lo] + (m - first[lo]) * kBM, end[lo], (u - m * n_tiles) * Cols};
}

template <class Element, int Stages, Epilogue Epi>
__device__ __forceinline__ void produce(const Params<Element>& p, uint32_t smem, int units, int n_tiles,
                                        int k_blocks, const int* first, const int* start, const int* end) {
  using P = Plan<Element, Stages>;
  const uint32_t full = smem + P::kBarriers, empty = full + 8 * Stages;
  int it = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Tile t = locate<kOutCols<Epi>>(u, n_tiles, p.groups, first, start, end);
    for (int kb = 0; kb < k_blocks; ++kb, ++it) {
      const int slot = it % Stages;
      if (it >= Stages) mbarrier_wait(empty + 8 * slot, (it / Stages - 1) & 1);  // its last use was released
      mbarrier_arrive_expect_tx(full + 8 * slot, P::kStageBytes);
      tma_load(smem + slot * P::kABytes, &p.a_map, full + 8 * slot, kb * kBK, t.row0);
      const uint32_t b = smem + P::kBOffset + slot * P::kBBytes;
      tma_load(b, &p.b_map, full + 8 * slot, kb * kBK, t.n0, t.g);
      if constexpr (Epi == Epilogue::kGlu) {  // the gates: B's second half
        tma_load(b + P::kBBytes / 2, &p.b_map, full + 8 * slot, kb * kBK, p.n / 2 + t.n0, t.g);
      }
    }
  }
}

// Stores the first `left` of 8 consecutive elements `v` at `dst`.
template <class T>
__device__ __forceinline__ void store_chunk(T* dst, int left, const uint4& v) {
  if (left >= 8) {
    *reinterpret_cast<uint4*>(dst) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (e < left) {
      const auto bits = static_cast<unsigned short>(e % 2 ? w[e / 2] >> 16 : w[e / 2] & 0xffff);
      if constexpr (std::is_same_v<T, half>) {
        dst[e] = __ushort_as_half(bits);
      } else {
        dst[e] = __ushort_as_bfloat16(bits);
      }
    }
  }
}

// The warp's 16 rows from row `rows` of a tile (rows [row0, end) and columns from n0 of the output D [., n], ldd
// apart) of accumulator columns [C0, C0 + Cols) (GLU: the tile's values and gates, Cols / 2 output columns),
// `bias` (the tile's columns) added, rounded once, 8 rows by 64 columns at a time: stmatrix puts the fragments
// (lane 4 g + t: columns 2t, 2t + 1 of row g, or g + 8, in each 8-column half of a 16-column block,
// common/wgmma.cuh's layout) into the warp's 8 x 64 block in shared memory as rows, and each lane loads 16 bytes of
// a row back and stores them: eight lanes write a row's 128 bytes, so that one store instruction touches 4 rows,
// not 16. A row's 16-byte chunks are XOR-swizzled by the row, so that neither the stmatrix nor the loads meet a
// bank twice.
template <class Element, bool Bias, Epilogue Epi, int C0 = 0, int Cols = kBN, int M>
__device__ __forceinline__ void store(Native<Element>* d, int64_t ldd, int n, int row0, int end, int n0, int rows,
                                      float (&acc)[M], const float* bias, uint32_t block) {
  using T = Native<Element>;
  constexpr int kA = C0 / 2;                                        // the range's first accumulator
  constexpr int kOut = Epi == Epilogue::kGlu ? Cols / 2 : Cols;     // and its output columns
  static_assert(Epi != Epilogue::kGlu || (C0 == 0 && Cols == kBN), "GLU's gates are 64 columns on");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q = lane & 3;
  if constexpr (Bias) {  // a column's bias (halved with kHalves) serves both of the thread's rows: read once
    const auto add = [](float a, float b) { return kHalves<Epi> ? fmaf(a, 0.5f, b) : a + b; };
#pragma unroll
    for (int j = 0; j < Cols / 16; ++j) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float2 b = *reinterpret_cast<const float2*>(bias + C0 + 16 * j + 8 * k + 2 * q);
        float* a = acc + kA + 8 * j + 4 * k;
        a[0] = add(a[0], b.x);
        a[1] = add(a[1], b.y);
        a[2] = add(a[2], b.x);
        a[3] = add(a[3], b.y);
      }
    }
  } else if constexpr (kHalves<Epi>) {
#pragma unroll
    for (int i = 0; i < Cols / 2; ++i) acc[kA + i] *= 0.5f;
  }
  const int first = row0 + rows + 16 * (warp & 3);  // the warp's first row
  const int put_row = lane & 7, put_matrix = lane >> 3;  // stmatrix: lane 8 i + r gives row r of matrix i
  const int get_row = lane >> 3, get_chunk = lane & 7;   // loads: rows get_row and get_row + 4, one chunk
  // The lane's chunks: rows first + get_row + 4 i, columns col + 64 c on. `whole`: all of the warp's are in the
  // output (every tile but a group's last row tile and the last column tile), so no store needs a predicate.
  const int col = n0 + C0 + 8 * get_chunk;
  T* const out = d + static_cast<int64_t>(first + get_row) * ldd + col;
  const int64_t ldd4 = 4 * ldd;
  const bool whole = first + 16 <= end && n0 + C0 + kOut <= n;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows g, then rows g + 8
#pragma unroll
    for (int c = 0; c < kOut / 64; ++c) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {  // matrix i: 16-column block 4 c + 2 s + i / 2, its half i % 2: chunk 4 s + i
        uint32_t x[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int j = 4 * c + 2 * s + i / 2, k = i % 2;
          const float* a = acc + kA + 8 * j + 2 * (2 * k + h);
          float lo = a[0], hi = a[1];
          if constexpr (Epi == Epilogue::kGlu) {  // the gate: 64 columns on, four 16-column blocks
            lo = times_one_plus_tanh(lo, a[32]);
            hi = times_one_plus_tanh(hi, a[33]);
          } else {
            lo = activate<Epi>(lo);
            hi = activate<Epi>(hi);
          }
          x[i] = round_pair(lo, hi, T{});
        }
        store_matrices<4>(x, block + 128 * put_row + 16 * ((4 * s + put_matrix) ^ put_row));
      }
      __syncwarp();
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int staged = get_row + 4 * s;
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(block + 128 * staged + 16 * (get_chunk ^ staged))
                     : "memory");
        T* const dst = out + (2 * h + s) * ldd4 + 64 * c;
        if (whole) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else if (first + 8 * h + staged < end) {
          store_chunk(dst, n - col - 64 * c, v);
        }
      }
      __syncwarp();  // every lane has its chunks before the next stmatrix overwrites them
    }
  }
}

// The two pairs issue their tiles' products in turns (named barrier 3 + pair: the other pair has issued its tile),
// so that one pair's epilogue runs while the other's products use the tensor cores. Barrier ids are constants:
// ptxas reserves all 16 for a register id.
__device__ __forceinline__ void pair_turn_wait(int pair) {
  if (pair == 0) {
    asm volatile("bar.sync 3, %0;\n" ::"n"(kConsumers) : "memory");
  } else {
    asm volatile("bar.sync 4, %0;\n" ::"n"(kConsumers) : "memory");
  }
}
__device__ __forceinline__ void pair_turn_give(int pair) {
  if (pair == 0) {
    asm volatile("bar.arrive 4, %0;\n" ::"n"(kConsumers) : "memory");
  } else {
    asm volatile("bar.arrive 3, %0;\n" ::"n"(kConsumers) : "memory");
  }
}

// The four warps of warpgroup `wg` (named barriers 5 to 8).
__device__ __forceinline__ void warpgroup_sync(int wg) {
  switch (wg) {
    case 0: asm volatile("bar.sync 5, 128;\n" ::: "memory"); break;
    case 1: asm volatile("bar.sync 6, 128;\n" ::: "memory"); break;
    case 2: asm volatile("bar.sync 7, 128;\n" ::: "memory"); break;
    default: asm volatile("bar.sync 8, 128;\n" ::: "memory"); break;
  }
}

// The dynamic shared memory, from its first 1024-byte boundary.
__device__ __forceinline__ unsigned char* smem_base() {
  extern __shared__ unsigned char smem_bytes[];
  return smem_bytes + ((1024 - __cvta_generic_to_shared(smem_bytes) % 1024) % 1024);
}

// This warpgroup's 64 rows of its pair's tiles: every other tile of the CTA.
template <class Element, int Stages, bool Bias, Epilogue Epi>
__device__ __forceinline__ void consume(const Params<Element>& p, uint32_t smem, int units, int n_tiles,
                                        int k_blocks, const int* first, const int* start, const int* end) {
  using P = Plan<Element, Stages>;
  using T = Native<Element>;
  const uint32_t full = smem + P::kBarriers, empty = full + 8 * Stages;
  const int wg = threadIdx.x >> 7, pair = wg >> 1;
  const int rows = 64 * (wg & 1);                                // this warpgroup's first row of a tile
  const uint32_t a_rows = rows * kBK * sizeof(Element);         // and its bytes into a stage's A
  const bool releases = (threadIdx.x & 31) == 0;                // one arrival per warp
  float* bias = reinterpret_cast<float*>(smem_base() + P::kBias) + wg * 2 * kBN;
  const uint32_t block = smem + P::kBlocks + (threadIdx.x >> 5) * P::kBlockBytes;  // this warp's 8 x 64
  const int count = units > static_cast<int>(blockIdx.x) ? (units - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  float acc[kBN / 2];
  int parity = 0;
  Tile t = locate<kOutCols<Epi>>(blockIdx.x + pair * gridDim.x, n_tiles, p.groups, first, start, end);
  for (int j = pair; j < count; j += 2, parity ^= 1) {  // the CTA's tiles blockIdx.x + j gridDim.x
    T bias_value{};  // this thread's column of the tile's bias row: loaded now, put in shared memory after the
    if constexpr (Bias) {  // products, so that its latency hides under them rather than delay their issue
      const int i = threadIdx.x & 127;  // a GLU tile's second half: the gates' bias, N / 2 columns on
      const int c = (Epi == Epilogue::kGlu && i >= 64 ? p.n / 2 - 64 : 0) + t.n0 + i;
      const T* row = reinterpret_cast<const T*>(p.bias) + t.g * p.group_stride_bias;
      if (c < p.n) bias_value = row[c];
    }
    if (j > 0) pair_turn_wait(pair);  // the other pair has issued tile j - 1's products
    int it = j * k_blocks;            // the ring's count of k-blocks before this one
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
    if (j + 1 < count) pair_turn_give(pair);  // tile j + 1's products queue behind these
    const int u_next = blockIdx.x + (j + 2) * gridDim.x;  // the pair's next tile, found while the products run
    const Tile next = j + 2 < count ? locate<kOutCols<Epi>>(u_next, n_tiles, p.groups, first, start, end) : t;
    wgmma_wait<0>();
    if (releases) mbarrier_arrive(empty + 8 * ((it - 1) % Stages));
    wgmma_fence_registers(acc);
    // The warpgroup's bias writes are visible; the two parities keep a fast warp's next write off a row that a
    // slow warp still reads.
    if constexpr (Bias) {
      const float b = static_cast<float>(bias_value);
      bias[parity * kBN + (threadIdx.x & 127)] = kHalves<Epi> ? 0.5f * b : b;
      warpgroup_sync(wg);
    }
    store<Element, Bias, Epi>(reinterpret_cast<T*>(p.d), p.ldd, out_columns<Epi>(p.n), t.row0, t.end, t.n0, rows,
                              acc, bias + parity * kBN, block);
    t = next;
  }
}

template <class Element, int Stages, bool Bias, Epilogue Epi>
__global__ void __launch_bounds__(kThreads, 1) GroupGemmKernel(const __grid_constant__ Params<Element> p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using P = Plan<Element, Stages>;
  unsigned char* base = smem_base();
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(base));
  int* first = reinterpret_cast<int*>(base + P::kTable);
  int* start = first + p.groups + 1;
  int* end = start + p.groups;
  if (threadIdx.x == kConsumers) {
    tma_prefetch(&p.a_map);
    tma_prefetch(&p.b_map);
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(smem + P::kBarriers + 8 * s, 1);                           // full: the producer's arrival
      mbarrier_init(smem + P::kBarriers + 8 * (Stages + s), kPairThreads / 32);  // empty: each warp of a pair
    }
    mbarrier_init_fence();
  }
  grid_dependency_wait();  // the offsets and A may come from the kernel before; D may still be read by it
  grid_dependency_trigger();
  const int tiles = group_table(p, first, start, end);  // its barriers also publish the mbarriers
  const int n_tiles = column_tiles<Epi>(p.n), k_blocks = (p.k + kBK - 1) / kBK;
  const int units = tiles * n_tiles;
  if (threadIdx.x >= kConsumers) {  // registers to the consumers: 24 x 128 + 112 x 512 fit the SM's 65536
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == kConsumers) {
      produce<Element, Stages, Epi>(p, smem, units, n_tiles, k_blocks, first, start, end);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 112;\n" ::: "memory");
    consume<Element, Stages, Bias, Epi>(p, smem, units, n_tiles, k_blocks, first, start, end);
  }
#endif
}

}  // namespace direct

// Launches the grouped GEMM on `stream` with `Stages` pipeline stages: no workspace, no allocation, no host
// synchronisation. `pdl`: with programmatic dependent launch (it waits on the kernel before it on the device).
// `Epi`: the gemm family's epilogues (group_gemm's is kNone); null `p.offsets`: one group of every row.
template <class Element, int Stages, bool Bias, direct::Epilogue Epi = direct::Epilogue::kNone>
cudaError_t RunDirectGroup(const GroupGemmParams<Element>& p, bool pdl, cudaStream_t stream) {
  using P = direct::Plan<Element, Stages>;
  direct::Params<Element> params{};
  static_cast<GroupGemmParams<Element>&>(params) = p;
  constexpr CUtensorMapDataType type = direct::kTmaType<Element>;
  const uint64_t a_dims[2] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.rows)};
  const uint64_t a_strides[1] = {static_cast<uint64_t>(p.lda) * sizeof(Element)};
  const uint32_t a_box[2] = {direct::kBK, direct::kBM};
  const uint64_t b_dims[3] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n),
                              static_cast<uint64_t>(p.groups)};
  const uint64_t b_strides[2] = {static_cast<uint64_t>(p.ldb) * sizeof(Element),
                                 static_cast<uint64_t>(p.group_stride_b) * sizeof(Element)};
  const uint32_t b_box[3] = {direct::kBK, direct::kOutCols<Epi>, 1};
  if (!encode_tensor_map(&params.a_map, type, p.a, 2, a_dims, a_strides, a_box) ||
      !encode_tensor_map(&params.b_map, type, p.b, 3, b_dims, b_strides, b_box)) {
    return cudaErrorInvalidValue;
  }

  const void* kernel = reinterpret_cast<const void*>(&direct::GroupGemmKernel<Element, Stages, Bias, Epi>);
  const size_t smem = P::bytes(p.groups);  // one CTA per SM: it fails here when the table does not fit
  static int allowed[kMaxDevices] = {};
  const cudaError_t error = allow_dynamic_shared_memory(kernel, static_cast<int>(smem), allowed);
  if (error != cudaSuccess) return error;
  // Tiles: at most one partial tile per non-empty group beyond the rows' own.
  const int64_t n_tiles = direct::column_tiles<Epi>(p.n);
  const int64_t tiles = ((p.rows + direct::kBM - 1) / direct::kBM + std::min(p.groups, p.rows)) * n_tiles;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, p.sm_count));
  void* args[] = {&params};
  return launch_kernel(kernel, grid, direct::kThreads, smem, stream, pdl, args);
}

}  // namespace oasr::gemm
