// The depthwise conv1d of fp16/bf16 on tensor cores (include/oasr/conv1d.cuh has the op and the choice of
// path), for 16-bit storage on views that stage in 16-byte copies, K <= 65. Extends staged.cuh, whose stage
// pipeline it follows (frames copied with cp.async kStages tiles deep, padding zero-filled by the copies, masked
// frames zeroed on arrival) and whose kernels run everything else, the streaming step included (at Conformer chunk sizes,
// 16-64 frames, one tile per block, the FFMA kernel's shorter chain wins: dev/conv1d/RESULTS.md).
//
// The product. Per channel, the 128 outputs of a tile, o = 8 m + n (16 blocks m of 8 outputs n), are
//   Out[m][n] = sum_j X[m][j] W[j][n],   X[m][j] = x[8 m + j],   W[j][n] = w[j - n] (0 <= j - n < K, else 0),
// over j < 8 E, E = ceil((K + 7) / 8) chunks of 8 frames: one mma.m16n8k16 per pair of chunks (m16n8k8
// for an odd last one), fp32 accumulation of exact 16-bit products. W is a Toeplitz matrix, the same
// for every block and tile of the channel: a block copies its channels' taps ahead of its first tile
// (cp.async), writes each channel's tap pairs to shared memory once, and a fragment register (taps
// 8 e + 2 t - g, +1 for lane 4 g + t) is one 4-byte load of a pair (kept in registers, the 8 channels'
// fragments did not fit beside two blocks per SM). The arithmetic is cheap (E / 2 mma per 128 outputs
// of a channel); what costs is moving the frames, so everything below is about that.
//
// Layout of the work. A block of 8 warps owns one batch row, 64 channels (a 128-byte row of a stage)
// and a run of consecutive tiles. A tile stages its 8 E + 120 frames as [frame][64 channels], the eight
// 16-byte pieces of a row XOR-swizzled by the row. Warp w owns channels 8 w .. 8 w + 7, piece w of
// every row:
//   1. it transposes its piece of the tile into [8 channels][frames] (ldmatrix.trans: 8 rows of one
//      piece, 8 banks thanks to the swizzle; stmatrix into rows an odd number of 16-byte units long);
//   2. per channel, ldmatrix reads X's fragments from there (a block of 8 frames is one 16-byte row of
//      a matrix) and E / 2 (+1) mma accumulate onto the bias; the activation runs on the fp32
//      fragment, which is rounded to 16-bit pairs of frames;
//   3. byte permutes turn pairs of frames of a channel into pairs of channels of a frame, and each lane
//      stores 4 rows of its 8 channels into the block's output tile [frame][64 channels] (pieces
//      XOR-swizzled by frame / 2: conflict-free).
// The block then writes the output tile along whole 128-byte rows.
//
// Non-finite inputs: W's zeros multiply frames outside an output's window, so an inf or NaN frame makes
// NaN every output of each 8-output block that reads it (the block's 8 E frames), not only the K
// outputs whose window holds it: up to 8 E - K before its window and 7 after.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/activation.cuh"
#include "oasr/common/mma.cuh"
#include "oasr/conv1d/staged.cuh"

namespace oasr {
namespace conv1d {
namespace tensor {

using staged::kThreads;
using staged::kWarps;
constexpr int kStages = 3;            // tiles in shared memory: the one computed and two in flight
constexpr int kOutputs = 128;         // outputs per tile: 16 blocks (the mma's M) of 8 (its N)
constexpr int kWarpChannels = 8;      // a 16-byte piece of a staged row
constexpr int kBlockChannels = kWarps * kWarpChannels;
constexpr int kMaxChunks = 9;         // 8-frame chunks per block: K <= 65
constexpr double kSetupTiles = 0.5;   // the weights' fragments and the first tile's copy, in tiles of work

// A stage holds the frames a tile reads; its pieces are swizzled by the row.
template <int E>
struct Geometry : staged::detail::Stage<uint16_t, kOutputs - 8 + 8 * E> {
  using Stage = staged::detail::Stage<uint16_t, kOutputs - 8 + 8 * E>;
  using Stage::kRowBytes;
  using Stage::kRows;
  using Stage::kStageBytes;
  static_assert(kRowBytes == kBlockChannels * 2 && Stage::kChannelsPerCopy == kWarpChannels,
                "a warp's 8 channels are one 16-byte piece of a 64-channel row");
  __device__ __forceinline__ static int offset(int row, int piece) {
    return row * kRowBytes + (piece ^ (row & 7)) * staged::kCopyBytes;
  }
  // A warp's transposed frames, [8 channels][kRows frames]: an odd number of 16-byte units per row.
  static constexpr int kPitch = ((kRows / 8) | 1) * 16;
  static constexpr int kWarpBytes = kWarpChannels * kPitch;
  static constexpr int kOutBytes = kOutputs * kRowBytes;
  static constexpr int kTaps = 8 * E + 8;  // a channel's tap pairs (w[j], w[j + 1]), j = -8 .. 8 E - 1
  static constexpr int kTapPitch = kTaps + 1;  // words per channel: odd, so 32 channels' stores are 32 banks
  static constexpr int kTapBytes = kBlockChannels * kTapPitch * 4;
  static constexpr int kSmem = kStages * kStageBytes + kOutBytes + kWarps * kWarpBytes + kTapBytes +
                               kBlockChannels * static_cast<int>(sizeof(float));
  static constexpr int kMinBlocks = E <= 6 ? 2 : 1;  // resident blocks per SM asked of ptxas
};

namespace detail {

// Byte offset of piece `piece` of output row f: swizzled by f / 2, since a lane stores frames f, f + 1.
__device__ __forceinline__ int out_offset(int f, int piece) {
  return f * kBlockChannels * 2 + (piece ^ ((f >> 1) & 7)) * staged::kCopyBytes;
}

// The K x 64 taps of the block's channels, [tap][channel], copied into `raw` (zeros past C).
template <typename T>
__device__ __forceinline__ void stage_weights(const DepthwiseConv1dParams<T>& p, int c0, uint32_t raw) {
  constexpr int kPieces = kBlockChannels / kWarpChannels;
  for (int i = static_cast<int>(threadIdx.x); i < p.kernel_size * kPieces; i += kThreads) {
    const int k = i / kPieces, c = c0 + i % kPieces * kWarpChannels;
    const bool valid = c < p.channels;
    const T* src = valid ? p.weight + int64_t{k} * p.channels + c : p.weight;
    staged::detail::cp_async_16(raw + i * staged::kCopyBytes, src, valid ? staged::kCopyBytes : 0);
  }
}

// The bias of this thread's channel (threads below 64), loaded when the block starts: a global load here
// would put its latency, behind the tiles' copies, on every warp's way to the first tile (H200: ~0.8 us).
template <typename T>
__device__ __forceinline__ float load_bias(const DepthwiseConv1dParams<T>& p, int c0) {
  const int c = c0 + static_cast<int>(threadIdx.x);
  return threadIdx.x < kBlockChannels && p.bias != nullptr && c < p.channels ? to_float(p.bias[c]) : 0.0f;
}

// The tap pairs (w[k], w[k + 1]), k = -8 .. 8 E - 1, of each channel from the staged taps, and the bias. A thread
// takes one channel (consecutive threads, consecutive channels) and a quarter of its pairs, its taps loaded
// together before any pair is written.
template <typename T, int E>
__device__ __forceinline__ void write_taps(const DepthwiseConv1dParams<T>& p, const uint16_t* raw, float bias_c,
                                           uint32_t* taps, float* bias) {
  using G = Geometry<E>;
  constexpr int kQuarters = kThreads / kBlockChannels;
  constexpr int kPairs = G::kTaps / kQuarters;
  static_assert(G::kTaps % kQuarters == 0, "a channel's pairs split evenly over its threads");
  const int c = static_cast<int>(threadIdx.x) % kBlockChannels;
  const int k0 = static_cast<int>(threadIdx.x) / kBlockChannels * kPairs - 8;
  uint16_t v[kPairs + 1];
#pragma unroll
  for (int j = 0; j <= kPairs; ++j) {
    const int k = k0 + j;
    v[j] = k >= 0 && k < p.kernel_size ? raw[k * kBlockChannels + c] : 0;
  }
#pragma unroll
  for (int j = 0; j < kPairs; ++j) taps[c * G::kTapPitch + k0 + j + 8] = pack_pair(v[j], v[j + 1]);
  if (threadIdx.x < kBlockChannels) bias[threadIdx.x] = bias_c;
}

template <typename T>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi) {
  const Packed<T, 2> v{{from_float<T>(lo), from_float<T>(hi)}};
  uint32_t bits;
  memcpy(&bits, v.data, sizeof(bits));
  return bits;
}

// 1. This warp's piece of the staged rows, transposed: frames r0 + 8 j + 2t, +1 of channel g (register j of
// lane 4 g + t after ldmatrix.trans) are stored as row g, columns 8 j + 2t, +1 of stmatrix's matrix j.
template <typename G, int N>
__device__ __forceinline__ void transpose_rows(uint32_t stage, uint32_t frames, int r0, int warp, int lane) {
  const int j = lane >> 3, r = lane & 7;
  uint32_t v[N];
  load_matrices<N, true>(v, stage + G::offset(r0 + 8 * j + r, warp));
  store_matrices<N>(v, frames + r * G::kPitch + (r0 + 8 * j) * 2);
}

template <typename G>
__device__ __forceinline__ void transpose_tile(uint32_t stage, uint32_t frames, int warp, int lane) {
  constexpr int kWhole = G::kRows / 32 * 32;
#pragma unroll
  for (int r0 = 0; r0 < kWhole; r0 += 32) transpose_rows<G, 4>(stage, frames, r0, warp, lane);
  if constexpr (G::kRows - kWhole >= 16) transpose_rows<G, 2>(stage, frames, kWhole, warp, lane);
  if constexpr (G::kRows % 16 == 8) transpose_rows<G, 1>(stage, frames, G::kRows - 8, warp, lane);
}

// 2 and 3. The warp's 8 channels of the tile into the output tile.
template <typename T, int E, Activation kActivation>
__device__ __forceinline__ void compute_tile(uint32_t frames, uint8_t* out_tile, int warp, int lane,
                                             const uint32_t* taps, const float* bias) {
  using G = Geometry<E>;
  const int j = lane >> 3, r = lane & 7, g = lane >> 2, t = lane & 3;
  const uint32_t* w = taps + warp * kWarpChannels * G::kTapPitch + 8 + 2 * t - g;  // channel i, chunk e: 8 e + i pitch
  // ldmatrix row of this lane: block r (+8 for matrices 1 and 3), the second chunk of a pair for 2 and 3.
  const uint32_t row = frames + (8 * (r + 8 * (j & 1)) + 8 * (j >> 1)) * 2;
  uint32_t pairs[kWarpChannels][2];  // channel i: frames 8 g + 2 t, +1 and 8 g + 64 + 2 t, +1
#pragma unroll
  for (int i = 0; i < kWarpChannels; ++i) {
    const float b0 = bias[warp * kWarpChannels + i];
    float acc[4] = {b0, b0, b0, b0};
#pragma unroll
    for (int s = 0; s < E / 2; ++s) {
      uint32_t a[4];
      load_matrices<4, false>(a, row + i * G::kPitch + s * 32);
      const uint32_t b[2] = {w[i * G::kTapPitch + 16 * s], w[i * G::kTapPitch + 16 * s + 8]};
      mma_16816(acc, a, b, T());
    }
    if constexpr (E % 2 == 1) {
      uint32_t a[2];
      load_matrices<2, false>(a, row + i * G::kPitch + (E / 2) * 32);
      mma_1688(acc, a, w[i * G::kTapPitch + 8 * (E - 1)], T());
    }
    pairs[i][0] = round_pair<T>(activate_rounded<kActivation>(acc[0]), activate_rounded<kActivation>(acc[1]));
    pairs[i][1] = round_pair<T>(activate_rounded<kActivation>(acc[2]), activate_rounded<kActivation>(acc[3]));
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint32_t e[4], o[4];  // frames f and f + 1, channels 2 k, 2 k + 1
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      e[k] = __byte_perm(pairs[2 * k][h], pairs[2 * k + 1][h], 0x5410);
      o[k] = __byte_perm(pairs[2 * k][h], pairs[2 * k + 1][h], 0x7632);
    }
    const int f = 8 * g + 2 * t + 64 * h;
    *reinterpret_cast<uint4*>(out_tile + out_offset(f, warp)) = make_uint4(e[0], e[1], e[2], e[3]);
    *reinterpret_cast<uint4*>(out_tile + out_offset(f + 1, warp)) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

template <typename T, int E>
__device__ __forceinline__ void compute_tile(Activation activation, uint32_t frames, uint8_t* out_tile, int warp, int lane,
                                             const uint32_t* taps, const float* bias) {
  switch (activation) {
    case Activation::kSilu: return compute_tile<T, E, Activation::kSilu>(frames, out_tile, warp, lane, taps, bias);
    case Activation::kRelu: return compute_tile<T, E, Activation::kRelu>(frames, out_tile, warp, lane, taps, bias);
    case Activation::kGelu: return compute_tile<T, E, Activation::kGelu>(frames, out_tile, warp, lane, taps, bias);
    default: return compute_tile<T, E, Activation::kNone>(frames, out_tile, warp, lane, taps, bias);
  }
}

// Where this thread's copies and stores go: piece `piece` (8 channels) of rows row0 + 32 j of a tile (the
// mapping of staged::detail's mask helpers), with the per-row pointer arithmetic hoisted out of the tiles.
template <typename T>
struct Rows {
  static constexpr int kStride = kThreads / (kBlockChannels / kWarpChannels);  // 32 rows apart
  int row0, piece;
  bool active;            // the thread's channels exist
  const T* input;         // frame 0 (padded coordinates) of the thread's row0 and channels
  T* output;              // output frame 0 of row0
  int64_t input_step, output_step;  // kStride frames

  __device__ __forceinline__ Rows(const DepthwiseConv1dParams<T>& p, int b, int c0) {
    row0 = static_cast<int>(threadIdx.x) / (kBlockChannels / kWarpChannels);
    piece = static_cast<int>(threadIdx.x) % (kBlockChannels / kWarpChannels);
    const int c = c0 + piece * kWarpChannels;
    active = c < p.channels;
    input = p.input + b * p.input_batch_stride + int64_t{row0 - p.split} * p.input_time_stride + c;
    output = p.output + b * p.output_batch_stride + int64_t{row0} * p.output_time_stride + c;
    input_step = kStride * p.input_time_stride;
    output_step = kStride * p.output_time_stride;
  }
};

// The copies of the tile whose first padded frame is f0 into `stage` (shared address): input rows or zeros
// (padding, channels past C).
template <typename T, typename G>
__device__ __forceinline__ void stage_rows(const DepthwiseConv1dParams<T>& p, const Rows<T>& rows, int f0,
                                           uint32_t stage) {
  const T* input = rows.input + int64_t{f0} * p.input_time_stride;
  const uint32_t dst = stage + G::offset(rows.row0, rows.piece);
#pragma unroll
  for (int j = 0; j < (G::kRows + Rows<T>::kStride - 1) / Rows<T>::kStride; ++j) {
    const int row = rows.row0 + j * Rows<T>::kStride;
    if (row < G::kRows) {
      const int f = f0 + row;
      const bool valid = rows.active && f >= p.split && f < p.hi;
      const T* src = valid ? input + j * rows.input_step : p.input;  // any valid address when nothing is read
      // row & 7 is row0's: the swizzle is the same for every j
      staged::detail::cp_async_16(dst + j * Rows<T>::kStride * G::kRowBytes, src, valid ? staged::kCopyBytes : 0);
    }
  }
}

// The output tile's rows o0 .. o0 + 127 to global memory, 16-byte pieces along whole rows.
template <typename T>
__device__ __forceinline__ void store_tile(const DepthwiseConv1dParams<T>& p, const Rows<T>& rows, int o0,
                                           const uint8_t* out_tile) {
  T* output = rows.output + int64_t{o0} * p.output_time_stride;
#pragma unroll
  for (int j = 0; j < kOutputs / Rows<T>::kStride; ++j) {
    const int f = rows.row0 + j * Rows<T>::kStride;
    if (rows.active && o0 + f < p.out_len) {
      const uint4 v = *reinterpret_cast<const uint4*>(out_tile + out_offset(f, rows.piece));
      __stcs(reinterpret_cast<uint4*>(output + j * rows.output_step), v);
    }
  }
}

}  // namespace detail

// Block: batch row b, 64 channels, tiles [first, last) of the row (tiles_per_block each).
template <typename T, int E>
__global__ void __launch_bounds__(kThreads, Geometry<E>::kMinBlocks)
    TensorConv1dKernel(const DepthwiseConv1dParams<T> p, int ctiles, int groups, int tiles_per_block) {
  using G = Geometry<E>;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* out_tile = smem + kStages * G::kStageBytes;
  uint8_t* warp_frames = out_tile + G::kOutBytes;
  uint32_t* taps = reinterpret_cast<uint32_t*>(warp_frames + kWarps * G::kWarpBytes);
  float* bias = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(taps) + G::kTapBytes);
  const int group = static_cast<int>(blockIdx.x % groups);
  const int rest = static_cast<int>(blockIdx.x / groups);
  const int c0 = rest % ctiles * kBlockChannels;
  const int b = rest / ctiles;
  const int ntiles = (p.out_len + kOutputs - 1) / kOutputs;
  const int first = group * tiles_per_block;
  const int last = min(ntiles, first + tiles_per_block);
  if (first >= last) return;  // the whole block leaves together
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const detail::Rows<T> rows(p, b, c0);
  const float bias_c = detail::load_bias(p, c0);

  // The copies: the taps (into the output tile's memory, free until the first tile is computed), then the
  // first tile, each a group of its own; the pairs are written while the tile is in flight, and only then do
  // the next tiles' copies go out, so that the first tile's do not share the memory system with them
  // (H200: dev/conv1d/RESULTS.md).
  const uint32_t raw = base + kStages * G::kStageBytes;
  detail::stage_weights(p, c0, raw);
  staged::detail::cp_async_commit();
  detail::stage_rows<T, G>(p, rows, first * kOutputs, base);
  staged::detail::cp_async_commit();
  uint8_t keep[G::kCopiesPerThread];
  if (p.mask != nullptr) staged::detail::load_mask<T, G>(p, b, first * kOutputs, keep);
  staged::detail::cp_async_wait<1>();  // the taps
  __syncthreads();
  detail::write_taps<T, E>(p, reinterpret_cast<const uint16_t*>(out_tile), bias_c, taps, bias);
  // The pairs and bias are published by the first tile's barrier, before the output tile is written.
#pragma unroll
  for (int t = 1; t < kStages - 1; ++t) {
    if (first + t < last) detail::stage_rows<T, G>(p, rows, (first + t) * kOutputs, base + t * G::kStageBytes);
    staged::detail::cp_async_commit();
  }
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x / 32);
  const uint32_t frames = static_cast<uint32_t>(__cvta_generic_to_shared(warp_frames + warp * G::kWarpBytes));

  for (int tile = first; tile < last; ++tile) {
    const int slot = (tile - first) % kStages;
    const int ahead = tile + kStages - 1;
    if (ahead < last) {
      detail::stage_rows<T, G>(p, rows, ahead * kOutputs, base + ((ahead - first) % kStages) * G::kStageBytes);
    }
    staged::detail::cp_async_commit();
    staged::detail::cp_async_wait<kStages - 1>();  // this thread's copies of `tile` have landed
    uint8_t* stage = smem + slot * G::kStageBytes;
    if (p.mask != nullptr) staged::detail::apply_mask<G>(stage, keep);
    __syncthreads();  // every thread's copies (and zeros) of `tile` are visible; the output tile is free
    // The next tile's mask bytes are read after the barrier, which would otherwise wait for every warp's reads.
    if (p.mask != nullptr && tile + 1 < last) staged::detail::load_mask<T, G>(p, b, (tile + 1) * kOutputs, keep);
    detail::transpose_tile<G>(base + slot * G::kStageBytes, frames, warp, lane);
    __syncwarp();
    detail::compute_tile<T, E>(p.activation, frames, out_tile, warp, lane, taps, bias);
    __syncthreads();  // the output tile is whole, and every warp is done with this stage slot
    detail::store_tile(p, rows, tile * kOutputs, out_tile);
  }
}

namespace detail {

template <typename T, int E>
cudaError_t launch(const DepthwiseConv1dParams<T>& p, cudaStream_t stream, staged::LaunchInfo* info) {
  using G = Geometry<E>;
  auto kernel = TensorConv1dKernel<T, E>;
  static_assert(G::kSmem <= staged::detail::kMaxSmemOptin, "the tensor-core tiles exceed a block's shared memory");
  static_assert((8 * kMaxChunks - 7) * kBlockChannels * 2 <= G::kOutBytes, "the staged taps exceed the output tile");
  if (info != nullptr) *info = {"TensorConv1dKernel", G::kSmem, 0, kThreads};
  static int allowed[kMaxDevices] = {};
  const cudaError_t status = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), G::kSmem, allowed);
  if (status != cudaSuccess) return status;
  static int cache[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(kernel, kThreads, cache, G::kSmem);
  const int ntiles = (p.out_len + kOutputs - 1) / kOutputs;
  const int ctiles = (p.channels + kBlockChannels - 1) / kBlockChannels;
  const int64_t rows = int64_t{p.batch} * ctiles;
  const int r = conv1d::detail::pieces_per_worker(rows, ntiles, ntiles, int64_t{per_sm} * multiprocessor_count(),
                                                  kSetupTiles);
  const int groups = (ntiles + r - 1) / r;
  const int64_t blocks = rows * groups;
  if (info != nullptr) info->blocks = blocks;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  kernel<<<static_cast<unsigned>(blocks), kThreads, G::kSmem, stream>>>(p, ctiles, groups, r);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_for_chunks(const DepthwiseConv1dParams<T>& p, cudaStream_t stream, staged::LaunchInfo* info) {
  switch ((p.kernel_size + 14) / 8) {  // E = ceil((K + 7) / 8)
    case 1: return launch<T, 1>(p, stream, info);
    case 2: return launch<T, 2>(p, stream, info);
    case 3: return launch<T, 3>(p, stream, info);
    case 4: return launch<T, 4>(p, stream, info);
    case 5: return launch<T, 5>(p, stream, info);
    case 6: return launch<T, 6>(p, stream, info);
    case 7: return launch<T, 7>(p, stream, info);
    case 8: return launch<T, 8>(p, stream, info);
    default: return launch<T, kMaxChunks>(p, stream, info);
  }
}

// 16-bit storage, K <= 8 kMaxChunks - 7, no streaming state, views staged in 16-byte copies, weights
// copied and the output written in 16-byte pieces.
template <typename T>
bool applies(const DepthwiseConv1dParams<T>& p, const staged::StepState<T>& s) {
  constexpr int n = staged::kCopyBytes / static_cast<int>(sizeof(T));
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % staged::kCopyBytes == 0; };
  return sizeof(T) == 2 && p.kernel_size <= 8 * kMaxChunks - 7 && s.state == nullptr && p.state == nullptr &&
         staged::detail::copyable(p, s) &&
         aligned(p.weight) && aligned(p.output) && p.output_batch_stride % n == 0 && p.output_time_stride % n == 0;
}

}  // namespace detail

}  // namespace tensor
}  // namespace conv1d
}  // namespace oasr
