// Experiment (issue 16): the depthwise conv1d with its input frames staged in shared memory.
//
// Built by dev/conv1d/bench.py as `oasr/conv1d_staged.cuh` of a copy of include/ (so the JIT
// key hashes it and `tune_kernels.rewrite` can change its constants), next to the production
// header it extends: its parameters, per-element helpers and fallback kernels are reused.
//
// Layout of the work. A block of kWarps warps owns one batch row, one channel tile of
// 32 lanes x CH channels (64 channels: a 128-byte row of bf16) and a run of consecutive
// time tiles of kWarps x TO output frames. For each tile the block stages the
// kWarps * TO + K - 1 input frames of the tile's channels in shared memory with cp.async
// (16 bytes per copy; padding frames zero-filled by the copy itself, masked frames zeroed
// in shared memory once, by the thread that copied them, when they arrive), kStages tiles
// deep, so the copies of tile i + 1 are in flight while tile i is computed. Warp w computes
// outputs w * TO .. w * TO + TO - 1 of the tile: each lane reads its CH channels of
// TO + K - 1 rows (conflict-free: a warp reads one contiguous row), converts each frame
// once and adds it into the TO x CH fp32 accumulators it reaches with K x CH weights held
// in registers (exact K only: 15 and 31); activation and streaming stores as production.
// Registers hold weights and accumulators only, so more warps stay resident than with the
// frames in registers.
//
// The streaming step: when one tile covers the chunk (L <= kWarps * TO), the block that
// staged (state ++ chunk) for its channels also writes the new state from shared memory
// (one kernel per step instead of two); the state rows were read (by the copies this block
// waited for) before any is written, and no other block touches these channels.
//
// Tensor cores (kUseMma, fp16/bf16 only): per channel c, a tile of 128 outputs is the product
// Out[i, n] = sum_j A_c[i, j] X_c[j, n] of the 16 x 16 * kSteps Toeplitz matrix of the weights
// (A_c[i, j] = w[j - i, c] for 0 <= j - i < K, else 0) and the windows X_c[j, n] = x[16 n + j, c]
// (n < 8): kSteps mma.sync.m16n8k16 per channel and 128 outputs, fp32 accumulation, against
// 128 x K / 32 FFMA per lane. The MMA operands need each channel's frames contiguous, so the
// staged [frame][channel] tile (16-byte pieces XOR-swizzled by row: conflict-free) is
// transposed to [channel][frame] with ldmatrix.trans + stmatrix; the outputs go back through
// shared memory to 16-byte streaming stores. The zeros of A multiply frames outside an
// output's window: a non-finite input makes the outputs of its 16 x 16 * kSteps block NaN.
//
// Anything else (K other than 15 and 31, unaligned views, channels not a multiple of a
// 16-byte copy) runs the production kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "oasr/conv1d.cuh"

namespace oasr {
namespace conv1d {
namespace staged {

constexpr int kWarps = 8;            // warps per block, each on TO consecutive outputs of the tile
constexpr int kStages = 2;           // tiles in shared memory: the one computed and those in flight
constexpr int kMinBlocks = 2;        // resident blocks per SM asked of ptxas (at most 128 registers)
constexpr int kChunk31 = 16;         // outputs per lane at K = 31 (16-bit storage)
constexpr int kChunk31Fp32 = 8;      // fp32 at K = 31 (a loaded frame is 2 registers)
constexpr int kChunk15 = 16;         // outputs per lane at K = 15
constexpr int kChunkShort = 4;       // outputs per lane when the sequence fits kWarps * kChunkShort frames
constexpr double kSetupTiles = 0.3;  // the first tile's copy, which nothing overlaps, in tiles of work
constexpr bool kUseMma = false;      // 16-bit storage on tensor cores (MmaConv1dKernel below); variant "mma"
constexpr int kMmaMinBlocks = 3;     // resident blocks per SM of the tensor-core kernel
constexpr int kMmaTableCopies = 2;   // 2: tap pairs as one 4-byte load; 1: two 2-byte loads, 8 KB less
constexpr int kMmaStages = 1;        // tiles in shared memory per block (1: one tile per block)

constexpr int kThreads = 32 * kWarps;
constexpr int kCopyBytes = 16;
constexpr int CH = detail::kVectorChannels;  // channels per lane

template <typename T>
struct StepState {
  T* state = nullptr;  // [B, K - 1, C] written with the last K - 1 frames of (state ++ chunk), or null
  int64_t batch_stride = 0, time_stride = 0;
};

// What a staged or tensor-core launch asked for (the launcher's error message names it).
struct LaunchInfo {
  const char* kernel = "the production kernels";
  int smem = 0;  // dynamic shared memory, bytes
  int64_t blocks = 0;
  int threads = 0;
};

namespace detail {

using conv1d::detail::Lane;

// sm_90's opt-in dynamic shared memory per block: a constant edit past it fails to compile
// (the launch error of staged.cu names the device's own limit).
constexpr int kMaxSmemOptin = 227 * 1024;

// Opts `kernel` in to `smem` bytes above the default 48 KB, at every launch rather than once
// behind a static flag: a static of an inline function is one process-wide (GNU-unique)
// symbol, shared by the variant modules that bench.py loads side by side unless built with
// -fno-gnu-unique, and a flag set for one variant's kernel would skip the others'.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int smem) {
  if (smem <= 48 * 1024) return cudaSuccess;
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (status != cudaSuccess) cudaGetLastError();  // returned here: not left for the next launch's check
  return status;
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// The geometry of one instantiation: rows per tile, 16-byte copies per row and per thread.
template <typename T, int TO, int K>
struct Tile {
  static constexpr int kOutputs = kWarps * TO;
  static constexpr int kRows = kOutputs + K - 1;
  static constexpr int kRowBytes = 32 * CH * static_cast<int>(sizeof(T));
  static constexpr int kCopiesPerRow = kRowBytes / kCopyBytes;
  static constexpr int kCopies = kRows * kCopiesPerRow;
  static constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;
  static constexpr int kStageBytes = kRows * kRowBytes;
  static constexpr int kChannelsPerCopy = kCopyBytes / static_cast<int>(sizeof(T));
};

// Copy j of this thread: row and 16-byte piece of the tile.
template <typename Geometry>
__device__ __forceinline__ void copy_slot(int j, int& row, int& piece) {
  const int index = static_cast<int>(threadIdx.x) + j * kThreads;
  row = index / Geometry::kCopiesPerRow;
  piece = index % Geometry::kCopiesPerRow;
}

// Issue the copies of the tile whose first padded frame is f0 into `stage` (shared
// address): state rows, input rows (masked ones too: zeroed on arrival) or zero-fill.
template <typename T, typename Geometry>
__device__ __forceinline__ void stage_tile(const DepthwiseConv1dParams<T>& p, int b, int c0, int f0, uint32_t stage) {
#pragma unroll
  for (int j = 0; j < Geometry::kCopiesPerThread; ++j) {
    int row, piece;
    copy_slot<Geometry>(j, row, piece);
    if (row < Geometry::kRows) {
      const int f = f0 + row;
      const int c = c0 + piece * Geometry::kChannelsPerCopy;
      const bool in_input = f >= p.split && f < p.hi;
      const bool in_state = f >= p.lo && f < p.split;
      const bool valid = (in_input || in_state) && c < p.channels;
      const T* src = p.input;  // any valid address when nothing is read
      if (valid) {
        src = in_input ? p.input + b * p.input_batch_stride + static_cast<int64_t>(f - p.split) * p.input_time_stride + c
                       : p.state + b * p.state_batch_stride + static_cast<int64_t>(f - p.lo) * p.state_time_stride + c;
      }
      cp_async_16(stage + row * Geometry::kRowBytes + piece * kCopyBytes, src, valid ? kCopyBytes : 0);
    }
  }
}

// The mask bytes of this thread's copies of the tile at f0 (1 for rows that are not input
// rows): loaded a tile ahead, used when the tile has arrived.
template <typename T, typename Geometry>
__device__ __forceinline__ void load_mask(const DepthwiseConv1dParams<T>& p, int b, int f0,
                                          uint8_t (&keep)[Geometry::kCopiesPerThread]) {
#pragma unroll
  for (int j = 0; j < Geometry::kCopiesPerThread; ++j) {
    int row, piece;
    copy_slot<Geometry>(j, row, piece);
    const int f = f0 + row;
    keep[j] = 1;
    if (row < Geometry::kRows && f >= p.split && f < p.hi) {
      keep[j] = p.mask[b * p.mask_batch_stride + static_cast<int64_t>(f - p.split) * p.mask_time_stride];
    }
  }
}

// Zero this thread's arrived copies of masked rows (before the barrier that publishes the tile).
template <typename Geometry>
__device__ __forceinline__ void apply_mask(uint8_t* stage, const uint8_t (&keep)[Geometry::kCopiesPerThread]) {
#pragma unroll
  for (int j = 0; j < Geometry::kCopiesPerThread; ++j) {
    int row, piece;
    copy_slot<Geometry>(j, row, piece);
    if (row < Geometry::kRows && keep[j] == 0) {
      *reinterpret_cast<uint4*>(stage + row * Geometry::kRowBytes + piece * kCopyBytes) = make_uint4(0, 0, 0, 0);
    }
  }
}

// TO outputs of this lane from rows row0 .. row0 + TO + K - 2 of the staged tile.
template <typename T, int TO, int K, typename Geometry>
__device__ __forceinline__ void compute_tile(const DepthwiseConv1dParams<T>& p, const Lane& lane, int o0,
                                             const uint8_t* stage, int row0, const float (&w)[K][CH],
                                             const float (&bias)[CH]) {
  using W = conv1d::detail::Word<T, CH>;
  const uint8_t* src = stage + row0 * Geometry::kRowBytes + (threadIdx.x & 31) * (CH * sizeof(T));
  float acc[TO][CH];
#pragma unroll
  for (int o = 0; o < TO; ++o) {
#pragma unroll
    for (int j = 0; j < CH; ++j) acc[o][j] = bias[j];
  }
#pragma unroll
  for (int i = 0; i < TO + K - 1; ++i) {
    const W word = *reinterpret_cast<const W*>(src + i * Geometry::kRowBytes);
    float x[CH];
    conv1d::detail::unpack<T, CH>(word, x);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int o = i - k;
      if (o >= 0 && o < TO) {
#pragma unroll
        for (int j = 0; j < CH; ++j) acc[o][j] = fmaf(w[k][j], x[j], acc[o][j]);
      }
    }
  }
  conv1d::detail::store_chunk<T, CH, TO>(p, lane, o0, acc);
}

// The new state from the staged (state ++ chunk) of this block's channels: rows
// out_len .. out_len + K - 2 of the only tile.
template <typename T, typename Geometry>
__device__ __forceinline__ void write_state(const DepthwiseConv1dParams<T>& p, const StepState<T>& s, int b, int c0,
                                           const uint8_t* stage) {
  const int rows = p.kernel_size - 1;
  for (int index = threadIdx.x; index < rows * Geometry::kCopiesPerRow; index += kThreads) {
    const int row = index / Geometry::kCopiesPerRow;
    const int piece = index % Geometry::kCopiesPerRow;
    const int c = c0 + piece * Geometry::kChannelsPerCopy;
    if (c < p.channels) {
      const uint4 v = *reinterpret_cast<const uint4*>(stage + (p.out_len + row) * Geometry::kRowBytes + piece * kCopyBytes);
      *reinterpret_cast<uint4*>(s.state + b * s.batch_stride + static_cast<int64_t>(row) * s.time_stride + c) = v;
    }
  }
}

// Block: batch row b, channel tile, tiles [first, last) of the row (tiles_per_block each).
template <typename T, int TO, int K>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    StagedConv1dKernel(const DepthwiseConv1dParams<T> p, const StepState<T> s, int ctiles, int groups,
                       int tiles_per_block) {
  using G = Tile<T, TO, K>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int group = static_cast<int>(blockIdx.x % groups);
  const int rest = static_cast<int>(blockIdx.x / groups);
  const int ctile = rest % ctiles;
  const int b = rest / ctiles;
  const int ntiles = (p.out_len + G::kOutputs - 1) / G::kOutputs;
  const int first = group * tiles_per_block;
  const int last = min(ntiles, first + tiles_per_block);
  if (first >= last) return;  // the whole block leaves together

  const int c0 = ctile * 32 * CH;
  const int lane_group = c0 / CH + static_cast<int>(threadIdx.x & 31);
  const int lane_groups = p.channels / CH;
  const Lane lane{b, min(lane_group, lane_groups - 1) * CH, lane_group < lane_groups};
  const int warp = static_cast<int>(threadIdx.x / 32);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  // The copies of the first kStages - 1 tiles go out before the weights are read.
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (first + t < last) stage_tile<T, G>(p, b, c0, (first + t) * G::kOutputs, base + t * G::kStageBytes);
    cp_async_commit();
  }
  float bias[CH];
  if (p.bias != nullptr) {
    conv1d::detail::load_floats<T, CH>(p.bias + lane.c, bias);
  } else {
#pragma unroll
    for (int j = 0; j < CH; ++j) bias[j] = 0.0f;
  }
  float w[K][CH];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    conv1d::detail::load_floats<T, CH>(p.weight + static_cast<int64_t>(k) * p.channels + lane.c, w[k]);
  }
  uint8_t keep[G::kCopiesPerThread];
  if (p.mask != nullptr) load_mask<T, G>(p, b, first * G::kOutputs, keep);

  for (int tile = first; tile < last; ++tile) {
    const int slot = (tile - first) % kStages;
    const int ahead = tile + kStages - 1;
    if (ahead < last) {
      stage_tile<T, G>(p, b, c0, ahead * G::kOutputs, base + ((ahead - first) % kStages) * G::kStageBytes);
    }
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this thread's copies of `tile` have landed
    uint8_t* stage = smem + slot * G::kStageBytes;
    if (p.mask != nullptr) {
      apply_mask<G>(stage, keep);
      if (tile + 1 < last) load_mask<T, G>(p, b, (tile + 1) * G::kOutputs, keep);  // used next iteration
    }
    __syncthreads();  // every thread's copies (and zeros) of `tile` are visible
    if (s.state != nullptr) write_state<T, G>(p, s, b, c0, stage);  // single-tile launches only
    const int o0 = tile * G::kOutputs + warp * TO;
    if (o0 < p.out_len) compute_tile<T, TO, K, G>(p, lane, o0, stage, warp * TO, w, bias);
    __syncthreads();  // the slot is free for the copies issued next iteration
  }
}

// Tiles per block: the r that minimises (waves of resident blocks) x (r + setup).
inline int tiles_per_block(int64_t rows, int ntiles, int64_t resident_blocks) {
  int best = 1;
  double best_cost = 0.0;
  for (int r = 1; r <= ntiles; ++r) {
    const int64_t blocks = rows * ((ntiles + r - 1) / r);
    const int64_t waves = (blocks + resident_blocks - 1) / resident_blocks;
    const double cost = static_cast<double>(waves) * (r + kSetupTiles);
    if (r == 1 || cost < best_cost) {
      best = r;
      best_cost = cost;
    }
  }
  return best;
}

// False when the state could not be written by the kernel (more than one tile): the
// caller then runs the production ShiftState after it.
template <typename T, int TO, int K>
cudaError_t launch_staged(const DepthwiseConv1dParams<T>& p, const StepState<T>& step, bool& state_written,
                          cudaStream_t stream, LaunchInfo* info) {
  using G = Tile<T, TO, K>;
  auto kernel = StagedConv1dKernel<T, TO, K>;
  constexpr int smem = kStages * G::kStageBytes;
  static_assert(smem <= kMaxSmemOptin, "the staged tiles exceed the shared memory of a block");
  if (info != nullptr) *info = {"StagedConv1dKernel", smem, 0, kThreads};
  const cudaError_t allowed = allow_smem(kernel, smem);
  if (allowed != cudaSuccess) return allowed;
  static int cache[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(kernel, kThreads, cache, smem);
  const int ntiles = (p.out_len + G::kOutputs - 1) / G::kOutputs;
  const int ctiles = (p.channels + 32 * CH - 1) / (32 * CH);
  const int64_t rows = int64_t{p.batch} * ctiles;
  const int r = tiles_per_block(rows, ntiles, int64_t{per_sm} * multiprocessor_count());
  const int groups = (ntiles + r - 1) / r;
  StepState<T> s = step;
  state_written = s.state != nullptr && ntiles == 1;
  if (!state_written) s.state = nullptr;
  const int64_t blocks = rows * groups;
  if (info != nullptr) info->blocks = blocks;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(p, s, ctiles, groups, r);
  return cudaGetLastError();
}

template <typename T, int K>
cudaError_t launch_for_length(const DepthwiseConv1dParams<T>& p, const StepState<T>& s, bool& state_written,
                              cudaStream_t stream, LaunchInfo* info) {
  if (p.out_len <= kWarps * kChunkShort) return launch_staged<T, kChunkShort, K>(p, s, state_written, stream, info);
  constexpr int kLong = K == 15 ? kChunk15 : (sizeof(T) == 4 ? kChunk31Fp32 : kChunk31);
  return launch_staged<T, kLong, K>(p, s, state_written, stream, info);
}

// The staged path's conditions: K = 15 or 31; 16-byte copies of input and state (channels,
// pointers and strides in whole copies); CH-wide stores and weights (production's vector path).
template <typename T>
bool stageable(const DepthwiseConv1dParams<T>& p, const StepState<T>& s) {
  constexpr int n = kCopyBytes / static_cast<int>(sizeof(T));
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % kCopyBytes == 0; };
  auto whole = [](int64_t stride) { return stride % n == 0; };
  return (p.kernel_size == 15 || p.kernel_size == 31) && p.channels % n == 0 && aligned(p.input) &&
         aligned(p.state) && aligned(s.state) && whole(p.input_batch_stride) && whole(p.input_time_stride) &&
         (p.state == nullptr || (whole(p.state_batch_stride) && whole(p.state_time_stride))) &&
         (s.state == nullptr || (whole(s.batch_stride) && whole(s.time_stride))) &&
         conv1d::detail::conv_vectorizable(p);
}


// ---------------------------------------------------------------------------------------
// Tensor cores: one block per (batch row, 64 channels, 128 outputs), 8 warps of 8 channels
// ---------------------------------------------------------------------------------------

constexpr int kMmaThreads = 256;

template <int K>
struct MmaTile {
  static constexpr int kOutputs = 128;                      // 8 time blocks of 16, per channel
  static constexpr int kSteps = (16 + K - 1 + 15) / 16;     // k16 steps of the Toeplitz matrix
  static constexpr int kRows = 16 * 7 + 16 * kSteps;        // frames read by the 8 blocks: 144 or 160
  static constexpr int kRowBytes = 128;                     // 64 channels of 16-bit
  static constexpr int kStageBytes = kRows * kRowBytes;     // [frame][channel], pieces swizzled
  static constexpr int kPitchT = kRows + 8;                 // [channel][frame] row: +8, stmatrix conflict-free
  static constexpr int kTBytes = 64 * kPitchT * 2;
  static constexpr int kTaps = 64;                          // weight table row: taps -16 .. 47
  static constexpr int kWeightBytes = kMmaTableCopies * 64 * kTaps * 2;  // the second copy shifted by one tap
  static constexpr int kOutPitch = 72;                      // [frame][channel] output row, elements
  static constexpr int kSmem = kMmaStages * kStageBytes + kTBytes + kWeightBytes;
  static constexpr int kCopiesPerThread = (kRows * 8 + kMmaThreads - 1) / kMmaThreads;
  static_assert(kOutputs * kOutPitch * 2 <= kStageBytes, "the output tile reuses the staged one");
};

__device__ __forceinline__ uint32_t swizzled(int row, int piece) {
  return row * 128 + ((piece ^ (row & 7)) * 16);
}

template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// The tile at padded frame f0: its rows' 16-byte pieces, swizzled, into the slot at `slot`.
template <typename T, int K>
__device__ __forceinline__ void mma_stage(const DepthwiseConv1dParams<T>& p, int b, int c0, int f0, uint32_t slot) {
  using G = MmaTile<K>;
#pragma unroll
  for (int j = 0; j < G::kCopiesPerThread; ++j) {
    const int index = static_cast<int>(threadIdx.x) + j * kMmaThreads;
    const int row = index / 8, piece = index % 8;
    if (row < G::kRows) {
      const int f = f0 + row;
      const int c = c0 + piece * 8;
      const bool in_input = f >= p.split && f < p.hi;
      const bool in_state = f >= p.lo && f < p.split;
      const bool valid = (in_input || in_state) && c < p.channels;
      const T* src = p.input;
      if (valid) {
        src = in_input ? p.input + b * p.input_batch_stride + static_cast<int64_t>(f - p.split) * p.input_time_stride + c
                       : p.state + b * p.state_batch_stride + static_cast<int64_t>(f - p.lo) * p.state_time_stride + c;
      }
      cp_async_16(slot + swizzled(row, piece), src, valid ? kCopyBytes : 0);
    }
  }
}

// The mask bytes of this thread's pieces of the tile at f0 (1 for rows that are not input rows).
template <typename T, int K>
__device__ __forceinline__ void mma_load_mask(const DepthwiseConv1dParams<T>& p, int b, int f0,
                                              uint8_t (&keep)[MmaTile<K>::kCopiesPerThread]) {
  using G = MmaTile<K>;
#pragma unroll
  for (int j = 0; j < G::kCopiesPerThread; ++j) {
    const int row = (static_cast<int>(threadIdx.x) + j * kMmaThreads) / 8;
    const int f = f0 + row;
    keep[j] = 1;
    if (row < G::kRows && f >= p.split && f < p.hi) {
      keep[j] = p.mask[b * p.mask_batch_stride + static_cast<int64_t>(f - p.split) * p.mask_time_stride];
    }
  }
}

// Block: batch row b, 64 channels, tiles [first, last) of 128 outputs, kMmaStages slots deep.
template <typename T, int K>
__global__ void __launch_bounds__(kMmaThreads, kMmaMinBlocks)
    MmaConv1dKernel(const DepthwiseConv1dParams<T> p, const StepState<T> s, int ctiles, int groups,
                    int tiles_per_block) {
  using G = MmaTile<K>;
  extern __shared__ __align__(16) uint8_t smem[];
  // [slot][frame][channel] (a slot is the tile's output tile once transposed), [channel][frame],
  // then the weight table [copy][channel][tap + 16].
  uint8_t* transposed = smem + kMmaStages * G::kStageBytes;
  T* table = reinterpret_cast<T*>(transposed + G::kTBytes);
  const int group = static_cast<int>(blockIdx.x % groups);
  const int rest = static_cast<int>(blockIdx.x / groups);
  const int ctile = rest % ctiles;
  const int b = rest / ctiles;
  const int ntiles = (p.out_len + G::kOutputs - 1) / G::kOutputs;
  const int first = group * tiles_per_block;
  const int last = min(ntiles, first + tiles_per_block);
  if (first >= last) return;  // the whole block leaves together
  const int c0 = ctile * 64;
  const int tid = static_cast<int>(threadIdx.x);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  // The copies of the first kPrologue tiles (at least the first, also with one slot), then the
  // weight table and the first mask bytes while they are in flight.
  constexpr int kPrologue = kMmaStages > 1 ? kMmaStages - 1 : 1;
#pragma unroll
  for (int t = 0; t < kPrologue; ++t) {
    if (first + t < last) {
      mma_stage<T, K>(p, b, c0, (first + t) * G::kOutputs, base + (t % kMmaStages) * G::kStageBytes);
    }
    cp_async_commit();
  }
  for (int index = tid; index < kMmaTableCopies * 64 * G::kTaps; index += kMmaThreads) {
    const int copy = index / (64 * G::kTaps);
    const int c = (index / G::kTaps) % 64;
    const int d = index % G::kTaps - 16 - copy;  // copy 1 is copy 0 shifted by one tap
    T v = from_float<T>(0.0f);
    if (d >= 0 && d < K && c0 + c < p.channels) v = p.weight[static_cast<int64_t>(d) * p.channels + c0 + c];
    table[index] = v;
  }
  uint8_t keep[G::kCopiesPerThread];
  if (p.mask != nullptr) mma_load_mask<T, K>(p, b, first * G::kOutputs, keep);

  const int lane = tid & 31, warp = tid / 32;
  const int m = lane / 8, r = lane % 8;
  const int g = lane / 4, q = lane % 4;
  const uint32_t t_base = base + kMmaStages * G::kStageBytes;
  const uint32_t w_base = t_base + G::kTBytes;
  for (int tile = first; tile < last; ++tile) {
    const int o0 = tile * G::kOutputs;  // padded frame of the tile's first row
    const int slot = (tile - first) % kMmaStages;
    const int ahead = tile + kMmaStages - 1;
    if (ahead < last && ahead >= first + kPrologue) {
      mma_stage<T, K>(p, b, c0, ahead * G::kOutputs, base + ((ahead - first) % kMmaStages) * G::kStageBytes);
    }
    cp_async_commit();
    cp_async_wait<kMmaStages - 1>();  // this thread's copies of `tile` have landed
    uint8_t* staged = smem + slot * G::kStageBytes;
    const uint32_t staged_base = base + slot * G::kStageBytes;
    if (p.mask != nullptr) {
#pragma unroll
      for (int j = 0; j < G::kCopiesPerThread; ++j) {
        const int index = tid + j * kMmaThreads;
        const int row = index / 8, piece = index % 8;
        if (row < G::kRows && keep[j] == 0) {
          *reinterpret_cast<uint4*>(staged + swizzled(row, piece)) = make_uint4(0, 0, 0, 0);
        }
      }
      if (tile + 1 < last) mma_load_mask<T, K>(p, b, (tile + 1) * G::kOutputs, keep);  // used next iteration
    }
    __syncthreads();  // the tile (and, the first time, the weight table) is complete

    // The step's new state (single-tile launches): rows out_len .. out_len + K - 2.
    if (s.state != nullptr) {
      for (int index = tid; index < (K - 1) * 8; index += kMmaThreads) {
        const int row = index / 8, piece = index % 8;
        const int c = c0 + piece * 8;
        if (c < p.channels) {
          const uint4 v = *reinterpret_cast<const uint4*>(staged + swizzled(p.out_len + row, piece));
          *reinterpret_cast<uint4*>(s.state + b * s.batch_stride + static_cast<int64_t>(row) * s.time_stride + c) = v;
        }
      }
    }

    // Transpose: 8 x 8 blocks, four per ldmatrix.x4.trans (frames 8 fb.., channel blocks 4 h + m).
    for (int pair = warp; pair < (G::kRows / 8) * 2; pair += kMmaThreads / 32) {
      const int fb = pair / 2, cb = (pair % 2) * 4 + m;
      uint32_t v[4];
      ldmatrix_x4_trans(v, staged_base + swizzled(8 * fb + r, cb));
      stmatrix_x4(t_base + ((8 * cb + r) * G::kPitchT + 8 * fb) * 2, v);
    }
    __syncthreads();

    // Each warp: channels 8 warp .. 8 warp + 7, one after the other.
    T* out_tile = reinterpret_cast<T*>(staged);  // the staged frames are dead after the transpose
#pragma unroll 1
    for (int j = 0; j < 8; ++j) {
      const int cl = warp * 8 + j;  // channel in the tile
      // A fragments: pairs of taps (d, d + 1), d = 16 st + 2 q - g + {0, -8, +8} (table index + 16).
      const int e = 2 * q - g + 16;
      uint32_t a[G::kSteps][4];
      if constexpr (kMmaTableCopies == 2) {  // from the copy in which the pair is a 4-byte word
        const uint32_t row_addr = w_base + (((e & 1) * 64 + cl) * G::kTaps + (e & 1)) * 2;
#pragma unroll
        for (int st = 0; st < G::kSteps; ++st) {
          const uint32_t at = row_addr + (e + 16 * st) * 2;
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(a[st][0]) : "r"(at));
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(a[st][1]) : "r"(at - 16));
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(a[st][2]) : "r"(at + 16));
          a[st][3] = a[st][0];
        }
      } else {
        const uint16_t* row = reinterpret_cast<const uint16_t*>(table) + cl * G::kTaps;
        auto pair = [&](int i) { return static_cast<uint32_t>(row[i]) | (static_cast<uint32_t>(row[i + 1]) << 16); };
#pragma unroll
        for (int st = 0; st < G::kSteps; ++st) {
          a[st][0] = pair(e + 16 * st);
          a[st][1] = pair(e + 16 * st - 8);
          a[st][2] = pair(e + 16 * st + 8);
          a[st][3] = a[st][0];
        }
      }
      // B fragments: matrix mi = 2 st + h has rows rr = frames 16 (rr + st) + 8 h of the channel;
      // ldmatrix.x4 number x loads mi = 4 x .. 4 x + 3 (lanes 8 m .. give the rows of mi = 4 x + m;
      // those past the last step repeat it and are dropped).
      uint32_t bfrag[2 * G::kSteps];
      const uint32_t channel_row = t_base + cl * G::kPitchT * 2;
#pragma unroll
      for (int x = 0; 4 * x < 2 * G::kSteps; ++x) {
        const int st = min((4 * x + m) / 2, G::kSteps - 1), h = m % 2;
        uint32_t v[4];
        ldmatrix_x4(v, channel_row + (16 * (r + st) + 8 * h) * 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (4 * x + i < 2 * G::kSteps) bfrag[4 * x + i] = v[i];
        }
      }
      const float bias = p.bias != nullptr ? to_float(p.bias[min(c0 + cl, p.channels - 1)]) : 0.0f;
      float acc[4] = {bias, bias, bias, bias};
#pragma unroll
      for (int st = 0; st < G::kSteps; ++st) mma_16816<T>(acc, a[st], bfrag[2 * st], bfrag[2 * st + 1]);
      // acc[0], acc[1]: outputs 16 (2 q) + g and 16 (2 q + 1) + g; acc[2], acc[3]: the same + 8.
      const int frames[4] = {32 * q + g, 32 * q + 16 + g, 32 * q + g + 8, 32 * q + 16 + g + 8};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float y = acc[i];
        switch (p.activation) {
          case kSilu: y = conv1d::detail::activate<kSilu>(y); break;
          case kRelu: y = conv1d::detail::activate<kRelu>(y); break;
          case kGelu: y = conv1d::detail::activate<kGelu>(y); break;
          default: break;
        }
        out_tile[frames[i] * G::kOutPitch + cl] = from_float<T>(y);
      }
    }
    __syncthreads();

    // The output tile, 16 bytes at a time.
    for (int index = tid; index < G::kOutputs * 8; index += kMmaThreads) {
      const int row = index / 8, piece = index % 8;
      const int o = o0 + row, c = c0 + piece * 8;
      if (o < p.out_len && c < p.channels) {
        const uint4 v = *reinterpret_cast<const uint4*>(out_tile + row * G::kOutPitch + piece * 8);
        T* dst = p.output + b * p.output_batch_stride + static_cast<int64_t>(o) * p.output_time_stride + c;
        __stcs(reinterpret_cast<uint4*>(dst), v);
      }
    }
    __syncthreads();  // the slot and the transposed tile are free for the next tile
  }
}

template <typename T, int K>
cudaError_t launch_mma(const DepthwiseConv1dParams<T>& p, const StepState<T>& step, bool& state_written,
                       cudaStream_t stream, LaunchInfo* info) {
  using G = MmaTile<K>;
  auto kernel = MmaConv1dKernel<T, K>;
  static_assert(G::kSmem <= kMaxSmemOptin, "the tensor-core tiles exceed the shared memory of a block");
  if (info != nullptr) *info = {"MmaConv1dKernel", G::kSmem, 0, kMmaThreads};
  const cudaError_t allowed = allow_smem(kernel, G::kSmem);
  if (allowed != cudaSuccess) return allowed;
  static int cache[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(kernel, kMmaThreads, cache, G::kSmem);
  const int ntiles = (p.out_len + G::kOutputs - 1) / G::kOutputs;
  const int ctiles = (p.channels + 63) / 64;
  const int64_t rows = int64_t{p.batch} * ctiles;
  const int r = kMmaStages > 1 ? tiles_per_block(rows, ntiles, int64_t{per_sm} * multiprocessor_count()) : 1;
  const int groups = (ntiles + r - 1) / r;
  StepState<T> s = step;
  state_written = s.state != nullptr && ntiles == 1;
  if (!state_written) s.state = nullptr;
  const int64_t blocks = rows * groups;
  if (info != nullptr) info->blocks = blocks;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  kernel<<<static_cast<unsigned>(blocks), kMmaThreads, G::kSmem, stream>>>(p, s, ctiles, groups, r);
  return cudaGetLastError();
}

// The tensor-core path's extra condition: 16-byte output stores.
template <typename T>
bool mma_ok(const DepthwiseConv1dParams<T>& p) {
  constexpr int n = kCopyBytes / static_cast<int>(sizeof(T));
  return sizeof(T) == 2 && reinterpret_cast<uintptr_t>(p.output) % kCopyBytes == 0 && p.output_batch_stride % n == 0 &&
         p.output_time_stride % n == 0;
}
}  // namespace detail

// out = act(depthwise_conv(x) + bias), as DepthwiseConv1d; with s.state (the streaming
// step, p.state == s.state) the state is updated too, in the same kernel when one tile
// covers the chunk, else by ShiftState after it.
template <typename T>
cudaError_t DepthwiseConv1dStaged(const DepthwiseConv1dParams<T>& p, const StepState<T>& s, cudaStream_t stream,
                                  LaunchInfo* info = nullptr) {
  if (p.batch <= 0 || p.channels <= 0 || p.out_len <= 0) return cudaSuccess;
  bool state_written = false;
  cudaError_t status = cudaSuccess;
  bool tensor_cores = false;
  if constexpr (kUseMma && sizeof(T) == 2) {
    tensor_cores = detail::stageable(p, s) && detail::mma_ok(p);
    if (tensor_cores) {
      status = p.kernel_size == 15 ? detail::launch_mma<T, 15>(p, s, state_written, stream, info)
                                   : detail::launch_mma<T, 31>(p, s, state_written, stream, info);
    }
  }
  if (!tensor_cores && detail::stageable(p, s)) {
    status = p.kernel_size == 15 ? detail::launch_for_length<T, 15>(p, s, state_written, stream, info)
                                 : detail::launch_for_length<T, 31>(p, s, state_written, stream, info);
  } else if (!tensor_cores) {
    status = DepthwiseConv1d(p, stream);
  }
  if (status != cudaSuccess || s.state == nullptr || state_written) return status;
  ShiftStateParams<T> shift;
  shift.state = s.state;
  shift.state_batch_stride = s.batch_stride;
  shift.state_time_stride = s.time_stride;
  shift.input = p.input;
  shift.input_batch_stride = p.input_batch_stride;
  shift.input_time_stride = p.input_time_stride;
  shift.batch = p.batch;
  shift.channels = p.channels;
  shift.kernel_size = p.kernel_size;
  shift.chunk_len = p.out_len;
  return ShiftState(shift, stream);
}

}  // namespace staged
}  // namespace conv1d
}  // namespace oasr
