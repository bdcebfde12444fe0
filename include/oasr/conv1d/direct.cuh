// The depthwise conv1d's direct kernels (include/oasr/conv1d.cuh has the op and the choice of path): each lane
// loads its frames itself, no shared memory. They run what the staged and tensor-core kernels do not take, and
// after a streaming step the state update (ShiftState: a second kernel, ordered after the first on the stream,
// that replaces the state by the last K-1 frames of (state ++ chunk)). This file also holds the parameters and
// per-element helpers all three paths share.
//
// Layout of the work. A warp owns 32 consecutive channel groups (CH channels each, one
// CH-wide load per frame per lane, so a warp reads CH * 32 contiguous channels of a frame:
// a whole 128-byte line at CH * sizeof(T) = 4) of one batch row, and R consecutive chunks
// of TO output frames (R chosen at launch to fill the GPU in whole waves). For a chunk
// each lane
//   * issues the loads of all TO + K - 1 input frames it needs before any arithmetic
//     (one memory latency per chunk), keeping them as loaded (one register per bf16 pair),
//   * converts each frame to fp32 once and adds it into the up to K accumulators it
//     reaches: TO x CH fp32 accumulators (initialised to the bias) and, for the exact-K
//     kernels (K = 15 and 31, the Conformer sizes), all K x CH weights in registers; the
//     loops over frames and taps are unrolled at compile time, so every tap is one FFMA,
//   * applies the activation (chosen once per chunk) and writes TO frames with
//     streaming stores.
// Consecutive chunks of a warp share K - 1 frames, which come back from L1/L2: DRAM sees
// each input element about once. A lane's width is the widest that keeps K x CH weights in
// registers (CH = 2 at K = 31; a 16-byte vector per lane would not fit), and coalescing
// comes from the warp (CH = 2 bf16: 128 contiguous bytes per frame).
// Other K run a generic kernel: taps in blocks of 8 (each block's frames and weights
// loaded together, the frames converted once), a warp-uniform branch per tap, so a
// non-finite input reaches exactly the outputs it is part of. It is memory-bound for
// small K and slower than the exact kernels for large K.
//
// Chunks lying inside the input (no padding, all frames unmasked: one warp vote on the
// mask) take plain loads at a fixed stride. Chunks touching the padding, a masked frame or
// the state of the streaming step take checked loads: a warp vote builds the 64-bit map
// of frames that hold data, and each frame's load is predicated on its bit (the source,
// state or input, picked with selects), so they too go out together.
//
// Vector path: C, every stride of input/output/state and every pointer a multiple of CH
// elements (CH * sizeof(T) bytes); otherwise the same kernels run with CH = 1.
// Strides: any batch and time stride in elements, channels contiguous. No shared memory.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/activation.cuh"
#include "oasr/common/vec.cuh"

namespace oasr {
namespace conv1d {

// Resident blocks of 128 threads per SM the exact-K kernels ask ptxas for. 8, 12 and 24 frames per chunk,
// 4 channels per lane and loading the next chunk during this one's arithmetic were all slower
// (dev/conv1d/RESULTS.md).
constexpr int kExactMinBlocks = 3;

// ---------------------------------------------------------------------------------------
// Data layout
// ---------------------------------------------------------------------------------------

// Frames in "padded coordinates": output o reads frames o .. o + K - 1. Frames
// [lo, split) come from `state` (frame f is state row f - lo), frames [split, hi) from
// `input` (frame f is input row f - split, zero where the mask is false), every other
// frame is zero. Plain conv: lo = split = left, hi = left + T, state unused.
// Streaming step: lo = 0, split = K - 1, hi = K - 1 + L.
template <typename T>
struct DepthwiseConv1dParams {
  T* output = nullptr;              // [B, out_len, C]
  const T* input = nullptr;         // [B, T, C]
  const T* state = nullptr;         // [B, K - 1, C] or null
  const uint8_t* mask = nullptr;    // [B, T] (nonzero: keep) or null
  const T* weight = nullptr;        // [K, C], contiguous
  const T* bias = nullptr;          // [C] or null
  int64_t output_batch_stride = 0, output_time_stride = 0;  // in elements
  int64_t input_batch_stride = 0, input_time_stride = 0;
  int64_t state_batch_stride = 0, state_time_stride = 0;
  int64_t mask_batch_stride = 0, mask_time_stride = 0;
  int batch = 0;
  int channels = 0;
  int kernel_size = 0;
  int out_len = 0;
  int lo = 0, split = 0, hi = 0;
  Activation activation = Activation::kNone;
};

// The streaming step's state update: state[b, j] = (state ++ chunk)[b, L + j], j < K - 1.
template <typename T>
struct ShiftStateParams {
  T* state = nullptr;               // [B, K - 1, C], updated in place
  const T* input = nullptr;         // the chunk [B, L, C]
  int64_t state_batch_stride = 0, state_time_stride = 0;
  int64_t input_batch_stride = 0, input_time_stride = 0;
  int batch = 0, channels = 0, kernel_size = 0, chunk_len = 0;
};

namespace detail {

constexpr int kThreads = 128;           // 4 warps per block
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxChunksPerWarp = 8;

// ---------------------------------------------------------------------------------------
// Per-element helpers
// ---------------------------------------------------------------------------------------


// Storage -> fp32 where the value is used. bf16 -> fp32 is a 16-bit shift that the
// compiler would otherwise hoist next to the loads and keep as fp32 (twice the registers per
// loaded frame of a bf16 pair); an opaque move is not hoisted.
template <typename T>
__device__ __forceinline__ float convert_at_use(T x) {
  return to_float(x);
}
__device__ __forceinline__ float convert_at_use(nv_bfloat16 x) {
  float f;
  asm volatile("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(__bfloat16_as_ushort(x)));
  return f;
}

template <typename T, int CH>
__device__ __forceinline__ void load_floats(const T* ptr, float (&x)[CH]) {
  const Packed<T, CH> v = Packed<T, CH>::load(ptr);
#pragma unroll
  for (int i = 0; i < CH; ++i) x[i] = to_float(v[i]);
}

// Where this warp's lanes read and write: the batch row, the first channel of the lane
// (clamped into range for lanes past C, which compute but never store) and whether the
// lane stores.
struct Lane {
  int b;
  int c;
  bool active;
};

// The chunk's frames are loaded as stored, one machine word (CH elements) per frame, all
// N loads in flight before any arithmetic: one memory latency per chunk, not one per frame.
template <typename T, int CH>
using Word = typename Packed<T, CH>::WordT;

template <typename T, int CH>
__device__ __forceinline__ Word<T, CH> load_word(const T* ptr) {
  return *reinterpret_cast<const Word<T, CH>*>(ptr);
}

// The CH elements of a loaded word as fp32 (converted where used, see convert_at_use).
template <typename T, int CH>
__device__ __forceinline__ void unpack(const Word<T, CH>& word, float (&x)[CH]) {
  Packed<T, CH> v;
  memcpy(v.data, &word, sizeof(word));
#pragma unroll
  for (int j = 0; j < CH; ++j) x[j] = convert_at_use(v[j]);
}

// Plain chunks: N input rows from frame f0 on, all known to be valid.
template <typename T, int CH, int N>
__device__ __forceinline__ void load_rows(const DepthwiseConv1dParams<T>& p, const Lane& lane, int f0,
                                          Word<T, CH> (&raw)[N]) {
  const T* row0 =
      p.input + lane.b * p.input_batch_stride + static_cast<int64_t>(f0 - p.split) * p.input_time_stride + lane.c;
#pragma unroll
  for (int i = 0; i < N; ++i) raw[i] = load_word<T, CH>(row0 + static_cast<int64_t>(i) * p.input_time_stride);
}

// Which of the n <= 64 frames from f0 hold data: bit i set when frame f0 + i is a state
// row, or an input row whose mask is true. A warp vote (every lane of the warp calls it,
// they share b and f0): lane l looks at frames f0 + l and f0 + l + 32.
template <typename T>
__device__ __forceinline__ uint64_t frame_bits(const DepthwiseConv1dParams<T>& p, int b, int f0, int n) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  uint64_t bits = 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = lane + 32 * half;
    const int f = f0 + i;
    bool valid = false;
    if (i < n) {
      if (f >= p.split && f < p.hi) {
        valid = p.mask == nullptr ||
                p.mask[b * p.mask_batch_stride + static_cast<int64_t>(f - p.split) * p.mask_time_stride] != 0;
      } else {
        valid = f >= p.lo && f < p.split;
      }
    }
    bits |= static_cast<uint64_t>(__ballot_sync(0xffffffffu, valid)) << (32 * half);
  }
  return bits;
}

// Checked chunks: frame f0 + i is an input row, a state row, or zero (padding, masked).
// The sources are picked with selects and each load is predicated on its bit of
// frame_bits: no branches and no load waits on another, so the N loads go out together.
template <typename T, int CH, int N>
__device__ __forceinline__ void load_frames_checked(const DepthwiseConv1dParams<T>& p, const Lane& lane, int f0,
                                                    Word<T, CH> (&raw)[N]) {
  static_assert(N <= 64, "frame_bits covers 64 frames");
  const uint64_t bits = frame_bits(p, lane.b, f0, N);
  const T* input_row = p.input + lane.b * p.input_batch_stride + lane.c;
  const T* state_row = p.state + lane.b * p.state_batch_stride + lane.c;  // used only where bits say so
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int f = f0 + i;
    const bool in_input = f >= p.split;
    const T* base = in_input ? input_row : state_row;
    const int64_t stride = in_input ? p.input_time_stride : p.state_time_stride;
    const int row = in_input ? f - p.split : f - p.lo;
    Word<T, CH> word{};
    if ((bits >> i) & 1) word = load_word<T, CH>(base + row * stride);
    raw[i] = word;
  }
}

template <typename T, int CH, int N>
__device__ __forceinline__ void load_chunk(const DepthwiseConv1dParams<T>& p, const Lane& lane, int f0, bool plain,
                                           Word<T, CH> (&raw)[N]) {
  if (plain) {
    load_rows<T, CH, N>(p, lane, f0, raw);
  } else {
    load_frames_checked<T, CH, N>(p, lane, f0, raw);
  }
}

// Activation, rounding and a streaming store of the chunk's TO frames (those < out_len).
// The activation is chosen once per chunk, not per element.
template <typename T, int CH, int TO, Activation kActivation>
__device__ __forceinline__ void store_frames(T* dst, int64_t time_stride, int valid, const float (&acc)[TO][CH]) {
#pragma unroll
  for (int o = 0; o < TO; ++o) {
    if (o < valid) {
      Packed<T, CH> y;
#pragma unroll
      for (int j = 0; j < CH; ++j) y[j] = from_float<T>(activate<kActivation>(acc[o][j]));
      y.store_streaming(dst + static_cast<int64_t>(o) * time_stride);
    }
  }
}

template <typename T, int CH, int TO>
__device__ __forceinline__ void store_chunk(const DepthwiseConv1dParams<T>& p, const Lane& lane, int o0,
                                            const float (&acc)[TO][CH]) {
  T* dst = p.output + lane.b * p.output_batch_stride + static_cast<int64_t>(o0) * p.output_time_stride + lane.c;
  const int valid = lane.active ? min(TO, p.out_len - o0) : 0;
  switch (p.activation) {
    case Activation::kSilu: store_frames<T, CH, TO, Activation::kSilu>(dst, p.output_time_stride, valid, acc); break;
    case Activation::kRelu: store_frames<T, CH, TO, Activation::kRelu>(dst, p.output_time_stride, valid, acc); break;
    case Activation::kGelu: store_frames<T, CH, TO, Activation::kGelu>(dst, p.output_time_stride, valid, acc); break;
    default: store_frames<T, CH, TO, Activation::kNone>(dst, p.output_time_stride, valid, acc); break;
  }
}

// ---------------------------------------------------------------------------------------
// Chunk bodies: TO outputs from frames o0 .. o0 + TO + K - 2
// ---------------------------------------------------------------------------------------

// Every output of a chunk starts from the bias.
template <int TO, int CH>
__device__ __forceinline__ void start_from_bias(float (&acc)[TO][CH], const float (&bias)[CH]) {
#pragma unroll
  for (int o = 0; o < TO; ++o) {
#pragma unroll
    for (int j = 0; j < CH; ++j) acc[o][j] = bias[j];
  }
}

// Frame i of a chunk (input frame o0 + i) into the outputs it reaches: output i - k through tap k. With i
// and K compile-time constants (unrolled loops), one FFMA per tap and nothing predicated.
template <int TO, int K, int CH>
__device__ __forceinline__ void add_frame(float (&acc)[TO][CH], const float (&w)[K][CH], const float (&x)[CH], int i) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int o = i - k;
    if (o >= 0 && o < TO) {
#pragma unroll
      for (int j = 0; j < CH; ++j) acc[o][j] = fmaf(w[k][j], x[j], acc[o][j]);
    }
  }
}

// Exact K: K x CH weights in registers; the TO + K - 1 frames loaded first, then each
// converted once and added into the (up to K) accumulators it reaches. All indices are
// compile-time constants: one FFMA per tap, nothing predicated.
template <typename T, int CH, int TO, int K>
__device__ __forceinline__ void compute_exact(const DepthwiseConv1dParams<T>& p, const Lane& lane, int o0,
                                              const Word<T, CH> (&raw)[TO + K - 1], const float (&w)[K][CH],
                                              const float (&bias)[CH]) {
  float acc[TO][CH];
  start_from_bias(acc, bias);
#pragma unroll
  for (int i = 0; i < TO + K - 1; ++i) {
    float x[CH];
    unpack<T, CH>(raw[i], x);
    add_frame(acc, w, x, i);
  }
  store_chunk<T, CH, TO>(p, lane, o0, acc);
}

// Any K: the taps in blocks of kTapBlock. Per block, the TO + kTapBlock - 1 frames it
// reads and its weights are loaded together and the frames converted once; each tap is a
// warp-uniform branch (taps past K are skipped, not multiplied by zero, so a non-finite
// input never reaches an output it is not part of).
constexpr int kTapBlock = 8;

template <typename T, int CH, int TO>
__device__ __forceinline__ void chunk_generic(const DepthwiseConv1dParams<T>& p, const Lane& lane, int o0, bool plain,
                                              const float (&bias)[CH]) {
  constexpr int N = TO + kTapBlock - 1;
  float acc[TO][CH];
  start_from_bias(acc, bias);
  for (int k0 = 0; k0 < p.kernel_size; k0 += kTapBlock) {
    Word<T, CH> raw[N];
    load_chunk<T, CH, N>(p, lane, o0 + k0, plain, raw);
    const int taps = min(kTapBlock, p.kernel_size - k0);
    Packed<T, CH> wraw[kTapBlock];
#pragma unroll
    for (int k = 0; k < kTapBlock; ++k) {
      const int row = k0 + min(k, taps - 1);  // in range; only the first `taps` are used
      wraw[k] = Packed<T, CH>::load(p.weight + static_cast<int64_t>(row) * p.channels + lane.c);
    }
    float x[N][CH];
#pragma unroll
    for (int i = 0; i < N; ++i) unpack<T, CH>(raw[i], x[i]);
#pragma unroll
    for (int k = 0; k < kTapBlock; ++k) {
      if (k < taps) {
#pragma unroll
        for (int o = 0; o < TO; ++o) {
#pragma unroll
          for (int j = 0; j < CH; ++j) acc[o][j] = fmaf(to_float(wraw[k][j]), x[o + k][j], acc[o][j]);
        }
      }
    }
  }
  store_chunk<T, CH, TO>(p, lane, o0, acc);
}

// Whether the chunk's `span` frames from f0 are all input rows and none is masked. A warp
// vote: every lane of the warp must call it (they share b and f0).
template <typename T>
__device__ __forceinline__ bool chunk_is_plain(const DepthwiseConv1dParams<T>& p, int b, int f0, int span) {
  if (f0 < p.split || f0 + span > p.hi) return false;
  if (p.mask == nullptr) return true;
  const int lane = threadIdx.x & 31;
  bool keep = true;
  for (int j = lane; j < span; j += 32) {
    keep &= p.mask[b * p.mask_batch_stride + static_cast<int64_t>(f0 - p.split + j) * p.mask_time_stride] != 0;
  }
  return __all_sync(0xffffffffu, keep);
}

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

// Warp w of the grid: batch row b, warp column (32 channel groups) and task (R chunks),
// ordered so that the warps of a block are consecutive tasks of one column (shared halos).
struct WarpTask {
  int b, column, task;
};
__device__ __forceinline__ bool warp_task(int64_t warp, int columns, int tasks, int batch, WarpTask& t) {
  if (warp >= int64_t{batch} * columns * tasks) return false;
  t.task = static_cast<int>(warp % tasks);
  const int64_t rest = warp / tasks;
  t.column = static_cast<int>(rest % columns);
  t.b = static_cast<int>(rest / columns);
  return true;
}

// KT > 0: exact K = KT; KT == 0: any K (p.kernel_size). The exact kernels' launch bounds leave them the
// registers their weights, frames and accumulators take.
template <typename T, int CH, int TO, int KT>
__global__ void __launch_bounds__(kThreads, KT > 0 ? kExactMinBlocks : 4)
    DepthwiseConv1dKernel(const DepthwiseConv1dParams<T> p, int columns, int tasks, int chunks_per_warp) {
  WarpTask task;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (!warp_task(warp, columns, tasks, p.batch, task)) return;  // whole warps leave together
  const int groups = p.channels / CH;
  const int group = task.column * 32 + static_cast<int>(threadIdx.x & 31);
  const Lane lane{task.b, min(group, groups - 1) * CH, group < groups};

  float bias[CH];
  if (p.bias != nullptr) {
    load_floats<T, CH>(p.bias + lane.c, bias);
  } else {
#pragma unroll
    for (int j = 0; j < CH; ++j) bias[j] = 0.0f;
  }
  constexpr int kWeights = KT > 0 ? KT : 1;
  float w[kWeights][CH];
  if constexpr (KT > 0) {
#pragma unroll
    for (int k = 0; k < KT; ++k) load_floats<T, CH>(p.weight + static_cast<int64_t>(k) * p.channels + lane.c, w[k]);
  }

  // Frames a chunk reads: TO + K - 1 (the generic kernel: K rounded up to its tap blocks).
  const int reach = KT > 0 ? KT : (p.kernel_size + kTapBlock - 1) / kTapBlock * kTapBlock;
  const int span = TO + reach - 1;
  const int nchunks = (p.out_len + TO - 1) / TO;
  const int first = task.task * chunks_per_warp;
  const int last = min(nchunks, first + chunks_per_warp);
  constexpr int N = TO + (KT > 0 ? KT : 1) - 1;
  for (int chunk = first; chunk < last; ++chunk) {
    const int o0 = chunk * TO;
    const bool plain = chunk_is_plain(p, lane.b, o0, span);
    if constexpr (KT > 0) {
      Word<T, CH> raw[N];
      load_chunk<T, CH, N>(p, lane, o0, plain, raw);
      compute_exact<T, CH, TO, KT>(p, lane, o0, raw, w, bias);
    } else {
      chunk_generic<T, CH, TO>(p, lane, o0, plain, bias);
    }
  }
}

// state[j] = (state ++ chunk)[L + j] for j < K - 1, in place. One thread per (batch row,
// channel group) owns its column and moves kShiftBatch frames at a time, loading all of a
// batch before storing it. A load of frame j reads state index L + j > j (L >= 1), and
// every store issued before it went to an index < j0 <= j: no load sees a rewritten frame.
constexpr int kShiftBatch = 32;  // K <= 33: one batch, one memory latency

template <typename T, int CH>
__global__ void __launch_bounds__(kThreads) ShiftStateKernel(const ShiftStateParams<T> p) {
  const int groups = p.channels / CH;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= int64_t{p.batch} * groups) return;
  const int b = static_cast<int>(index / groups);
  const int c = static_cast<int>(index % groups) * CH;
  const int keep = p.kernel_size - 1;
  T* state = p.state + b * p.state_batch_stride + c;
  const T* chunk = p.input + b * p.input_batch_stride + c;
  for (int j0 = 0; j0 < keep; j0 += kShiftBatch) {
    Packed<T, CH> v[kShiftBatch];
#pragma unroll
    for (int i = 0; i < kShiftBatch; ++i) {
      const int f = p.chunk_len + j0 + i;  // frame of (state ++ chunk)
      if (j0 + i < keep) {
        v[i] = f < keep ? Packed<T, CH>::load(state + static_cast<int64_t>(f) * p.state_time_stride)
                        : Packed<T, CH>::load(chunk + static_cast<int64_t>(f - keep) * p.input_time_stride);
      }
    }
#pragma unroll
    for (int i = 0; i < kShiftBatch; ++i) {
      if (j0 + i < keep) v[i].store(state + static_cast<int64_t>(j0 + i) * p.state_time_stride);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------------------

// Consecutive pieces of work (chunks of a warp, tiles of a block) per worker: the R in
// 1..min(max_r, n) that minimises (waves of resident workers) x (R pieces + setup, the
// per-worker cost such as the weight load in pieces), i.e. fills the GPU evenly while
// amortising the setup over several pieces. `columns` workers' worth of work per piece index.
inline int pieces_per_worker(int64_t columns, int n, int max_r, int64_t resident_workers, double setup) {
  int best = 1;
  double best_cost = 0.0;
  for (int r = 1; r <= max_r; ++r) {
    const int64_t workers = columns * ((n + r - 1) / r);
    const int64_t waves = (workers + resident_workers - 1) / resident_workers;
    const double cost = static_cast<double>(waves) * (r + setup);
    if (r == 1 || cost < best_cost) {
      best = r;
      best_cost = cost;
    }
    if (r >= n) break;
  }
  return best;
}

template <typename T, int CH, int TO, int KT>
cudaError_t launch_conv(const DepthwiseConv1dParams<T>& p, cudaStream_t stream) {
  auto kernel = DepthwiseConv1dKernel<T, CH, TO, KT>;
  static int cache[kMaxDevices] = {};
  const int per_sm = resident_blocks_per_sm(kernel, kThreads, cache);
  const int64_t resident_warps = int64_t{per_sm} * kWarpsPerBlock * multiprocessor_count();
  const int groups = p.channels / CH;
  const int columns = (groups + 31) / 32;
  const int nchunks = (p.out_len + TO - 1) / TO;
  const int r =
      pieces_per_worker(int64_t{p.batch} * columns, nchunks, kMaxChunksPerWarp, resident_warps, KT > 0 ? 0.1 : 0.02);
  const int tasks = (nchunks + r - 1) / r;
  const int64_t warps = int64_t{p.batch} * columns * tasks;
  const unsigned blocks = covering_grid(warps, kWarpsPerBlock);
  kernel<<<blocks, kThreads, 0, stream>>>(p, columns, tasks, r);
  return cudaGetLastError();
}

// Output frames per chunk: 16; at K = 31, fp32 (whose frames take twice the registers of a 16-bit
// pair) runs 8, which keeps its weights, frames and accumulators in registers.
constexpr int kChunk = 16;
template <typename T>
constexpr int chunk_k31() {
  return sizeof(T) == 4 ? 8 : 16;
}

template <typename T, int CH>
cudaError_t launch_for_k(const DepthwiseConv1dParams<T>& p, cudaStream_t stream) {
  switch (p.kernel_size) {
    case 15: return launch_conv<T, CH, kChunk, 15>(p, stream);
    case 31: return launch_conv<T, CH, chunk_k31<T>(), 31>(p, stream);
    default: return launch_conv<T, CH, kChunk, 0>(p, stream);
  }
}

// Channels per lane on the vector path: 2 (4 bytes of fp16/bf16, 8 of fp32).
constexpr int kVectorChannels = 2;

template <typename T>
bool conv_vectorizable(const DepthwiseConv1dParams<T>& p) {
  constexpr int n = kVectorChannels;
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % (n * sizeof(T)) == 0; };
  auto stride_ok = [](int64_t s) { return s % n == 0; };
  return p.channels % n == 0 && aligned(p.output) && aligned(p.input) && aligned(p.state) && aligned(p.weight) &&
         aligned(p.bias) && stride_ok(p.output_batch_stride) && stride_ok(p.output_time_stride) &&
         stride_ok(p.input_batch_stride) && stride_ok(p.input_time_stride) &&
         (p.state == nullptr || (stride_ok(p.state_batch_stride) && stride_ok(p.state_time_stride)));
}

}  // namespace detail

// out = act(depthwise_conv(x) + bias) over every batch row, with the frames of p (see
// DepthwiseConv1dParams), by the direct kernels. Nothing to do when batch, channels or out_len is 0.
template <typename T>
cudaError_t DepthwiseConv1dDirect(const DepthwiseConv1dParams<T>& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.channels <= 0 || p.out_len <= 0) return cudaSuccess;
  return detail::conv_vectorizable(p) ? detail::launch_for_k<T, detail::kVectorChannels>(p, stream)
                                      : detail::launch_for_k<T, 1>(p, stream);
}

// state = last K - 1 frames of (state ++ chunk), in place; launch after the step's conv.
template <typename T>
cudaError_t ShiftState(const ShiftStateParams<T>& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.channels <= 0 || p.kernel_size <= 1) return cudaSuccess;
  constexpr int n = Vec<T>::kSize;
  auto aligned = [](const void* q) { return is_vector_aligned(q); };
  const bool vector = p.channels % n == 0 && aligned(p.state) && aligned(p.input) && p.state_batch_stride % n == 0 &&
                      p.state_time_stride % n == 0 && p.input_batch_stride % n == 0 && p.input_time_stride % n == 0;
  const int groups = vector ? p.channels / n : p.channels;
  const unsigned blocks = covering_grid(int64_t{p.batch} * groups, detail::kThreads);
  if (vector) {
    detail::ShiftStateKernel<T, n><<<blocks, detail::kThreads, 0, stream>>>(p);
  } else {
    detail::ShiftStateKernel<T, 1><<<blocks, detail::kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace conv1d
}  // namespace oasr
