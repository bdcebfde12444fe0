// The depthwise conv1d's staged FFMA kernels, for fp32 and for the streaming step (include/oasr/conv1d.cuh has
// the op and the choice of path; 16-bit convolutions take tensor_core.cuh, which reuses this file's stage
// helpers): input frames staged in shared memory, weights and accumulators in registers. Builds on direct.cuh
// (the parameters, per-element helpers, and the direct kernels that run whatever this path does not take).
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
// in registers (exact K only: 15 and 31); activation and streaming stores as the direct kernels.
// Registers hold weights and accumulators only, so more warps stay resident than with the
// frames in registers.
//
// The streaming step: when one tile covers the chunk (L <= kWarps * TO), the block that
// staged (state ++ chunk) for its channels also writes the new state from shared memory
// (one kernel per step instead of two); the state rows were read (by the copies this block
// waited for) before any is written, and no other block touches these channels.
//
// Anything else (K other than 15 and 31, unaligned views, channels not a multiple of a
// 16-byte copy) runs the direct kernels of direct.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/cp_async.cuh"
#include "oasr/conv1d/direct.cuh"

namespace oasr {
namespace conv1d {
namespace staged {

constexpr int kWarps = 8;            // warps per block, each on TO consecutive outputs of the tile
constexpr int kStages = 2;           // tiles in shared memory: the one computed and those in flight
constexpr int kMinBlocks = 2;        // resident blocks per SM asked of ptxas
constexpr int kChunk31 = 16;         // outputs per lane at K = 31 (16-bit storage)
constexpr int kChunk31Fp32 = 8;      // fp32 at K = 31 (its frames take twice a 16-bit pair's registers)
constexpr int kChunk15 = 16;         // outputs per lane at K = 15
constexpr int kChunkShort = 4;       // outputs per lane when the sequence fits kWarps * kChunkShort frames
constexpr double kSetupTiles = 0.3;  // the first tile's copy, which nothing overlaps, in tiles of work

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
  const char* kernel = "the direct kernels";
  int smem = 0;  // dynamic shared memory, bytes
  int64_t blocks = 0;
  int threads = 0;
};

namespace detail {

using conv1d::detail::Lane;

// sm_90's opt-in dynamic shared memory per block: a constant edit past it fails to compile
// (csrc/conv1d.cu's launch error names the device's own limit).
constexpr int kMaxSmemOptin = 227 * 1024;

using oasr::cp_async_16;
using oasr::cp_async_commit;
using oasr::cp_async_wait;

// A stage of Rows frames of one channel tile (32 lanes x CH channels of T): 16-byte copies per row and
// per thread. The helpers below take any geometry with these members; the tensor-core kernel's derives
// from it and swizzles the pieces (its own `offset`).
template <typename T, int Rows>
struct Stage {
  static constexpr int kRows = Rows;
  static constexpr int kRowBytes = 32 * CH * static_cast<int>(sizeof(T));
  static constexpr int kCopiesPerRow = kRowBytes / kCopyBytes;
  static constexpr int kCopies = kRows * kCopiesPerRow;
  static constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;
  static constexpr int kStageBytes = kRows * kRowBytes;
  static constexpr int kChannelsPerCopy = kCopyBytes / static_cast<int>(sizeof(T));
  // Byte offset of 16-byte piece `piece` of row `row` in a stage.
  __device__ __forceinline__ static int offset(int row, int piece) { return row * kRowBytes + piece * kCopyBytes; }
};

// The geometry of one instantiation: kWarps x TO outputs per tile and the K - 1 frames after them.
template <typename T, int TO, int K>
struct Tile : Stage<T, kWarps * TO + K - 1> {
  static constexpr int kOutputs = kWarps * TO;
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
        src = in_input
                  ? p.input + b * p.input_batch_stride + static_cast<int64_t>(f - p.split) * p.input_time_stride + c
                  : p.state + b * p.state_batch_stride + static_cast<int64_t>(f - p.lo) * p.state_time_stride + c;
      }
      cp_async_16(stage + Geometry::offset(row, piece), src, valid ? kCopyBytes : 0);
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
      *reinterpret_cast<uint4*>(stage + Geometry::offset(row, piece)) = make_uint4(0, 0, 0, 0);
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
  conv1d::detail::start_from_bias(acc, bias);
#pragma unroll
  for (int i = 0; i < TO + K - 1; ++i) {
    const W word = *reinterpret_cast<const W*>(src + i * Geometry::kRowBytes);
    float x[CH];
    conv1d::detail::unpack<T, CH>(word, x);
    conv1d::detail::add_frame(acc, w, x, i);
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
      const uint4 v = *reinterpret_cast<const uint4*>(stage + Geometry::offset(p.out_len + row, piece));
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

// False when the state could not be written by the kernel (more than one tile): the
// caller then runs direct.cuh's ShiftState after it.
template <typename T, int TO, int K>
cudaError_t launch_staged(const DepthwiseConv1dParams<T>& p, const StepState<T>& step, bool& state_written,
                          cudaStream_t stream, LaunchInfo* info) {
  using G = Tile<T, TO, K>;
  auto kernel = StagedConv1dKernel<T, TO, K>;
  constexpr int smem = kStages * G::kStageBytes;
  static_assert(smem <= kMaxSmemOptin, "the staged tiles exceed the shared memory of a block");
  if (info != nullptr) *info = {"StagedConv1dKernel", smem, 0, kThreads};
  static int allowed[kMaxDevices] = {};
  const cudaError_t status = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem, allowed);
  if (status != cudaSuccess) return status;
  static int cache[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(kernel, kThreads, cache, smem);
  const int ntiles = (p.out_len + G::kOutputs - 1) / G::kOutputs;
  const int ctiles = (p.channels + 32 * CH - 1) / (32 * CH);
  const int64_t rows = int64_t{p.batch} * ctiles;
  const int r = conv1d::detail::pieces_per_worker(rows, ntiles, ntiles, int64_t{per_sm} * multiprocessor_count(),
                                                  kSetupTiles);  // tiles per block
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

// Whether the input and state can be staged in 16-byte copies (channels, pointers and strides in
// whole copies) and the CH-wide stores and weights of the direct kernels' vector path apply.
template <typename T>
bool copyable(const DepthwiseConv1dParams<T>& p, const StepState<T>& s) {
  constexpr int n = kCopyBytes / static_cast<int>(sizeof(T));
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % kCopyBytes == 0; };
  auto whole = [](int64_t stride) { return stride % n == 0; };
  return p.channels % n == 0 && aligned(p.input) && aligned(p.state) && aligned(s.state) &&
         whole(p.input_batch_stride) && whole(p.input_time_stride) &&
         (p.state == nullptr || (whole(p.state_batch_stride) && whole(p.state_time_stride))) &&
         (s.state == nullptr || (whole(s.batch_stride) && whole(s.time_stride))) &&
         conv1d::detail::conv_vectorizable(p);
}

// The staged path's conditions: K = 15 or 31 on copyable views.
template <typename T>
bool stageable(const DepthwiseConv1dParams<T>& p, const StepState<T>& s) {
  return (p.kernel_size == 15 || p.kernel_size == 31) && copyable(p, s);
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
  const cudaError_t status =
      !detail::stageable(p, s)  ? DepthwiseConv1dDirect(p, stream)
      : p.kernel_size == 15     ? detail::launch_for_length<T, 15>(p, s, state_written, stream, info)
                                : detail::launch_for_length<T, 31>(p, s, state_written, stream, info);
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
