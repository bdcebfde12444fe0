// Experiment (issue 16): the depthwise conv1d of fp16/bf16 on tensor cores, with the frames
// transposed in registers instead of through shared memory.
//
// Built by dev/conv1d/bench.py (variants "tc*") as `oasr/conv1d_staged.cuh` of a copy of include/
// whose production header is renamed `oasr/conv1d_staged_ffma.cuh`: the production launchers
// (csrc/conv1d.cu) call DepthwiseConv1dStaged, which here takes the tensor-core kernel where it
// applies and production's (renamed DepthwiseConv1dFfma) everywhere else.
//
// The product. Per channel c, 128 outputs o = t0 + 16 n + i (n < 8 blocks of 16, i < 16) are
//   Out[i][n] = sum_j T[i][j] X[j][n],  T[i][j] = w[j - i, c] (0 <= j - i < K, else 0),
//                                       X[j][n] = x[t0 + 16 n + j, c]   (j < 16 + K - 1),
// kSteps mma.m16n8k16 (fp32 accumulation) over j in steps of 16. T is the same for every tile
// of the channel, so its fragments sit in registers for the block's life: per step
// a0 = (w[16s + 2q - g], +1), a2 = (w[16s + 2q + 8 - g], +1), a3 = a0 and a1 = a2 of the step
// before (g = lane / 4, q = lane % 4; zero outside [0, K)), 2 registers per step and channel.
// A lane's B fragment of step s is the frame pairs (16 (g + s) + 2q, +1) and (+8, +9) of the
// channel: one 8-byte shared load of a frame pair of a channel pair, split by two byte
// permutes into the two channels' operands (the register-level transpose).
//
// Shared memory holds the tile transposed, [channel pair][frame] (4-byte words), so a frame
// pair of a channel pair is one aligned 8-byte word pair. A 16-frame block is padded by 8 words:
// the 16 lanes of a half-warp read frames 24 (g + s) + 2q (mod 32, in words) of one pair,
// 16 distinct even banks, conflict-free. Global -> registers -> shared: each thread loads
// 16-byte pieces (4 channel pairs of one frame; padding, masked and out-of-range frames as zeros)
// and stores their 4 words to the 4 pair rows.
//
// One block: 8 warps, 32 channels (warp w: channels 4w .. 4w + 3, two pairs), one tile of 128
// outputs: 128 + 16 (kSteps - 1) frames, since the last step reads past the K - 1 needed, into
// zero taps; the weights staged in shared memory once); a lane's 4 channels at one frame are one
// 8-byte store, or (kStageOutput) the tile goes back through shared memory to 16-byte stores.
// Non-finite inputs: T's zeros multiply frames outside an output's window, so an inf or NaN
// frame makes NaN every output of its 16-output blocks whose steps read it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#define DepthwiseConv1dStaged DepthwiseConv1dFfma
#include "oasr/conv1d_staged_ffma.cuh"
#undef DepthwiseConv1dStaged

namespace oasr {
namespace conv1d {
namespace staged {
namespace tc {

constexpr int kMinBlocks = 4;  // resident blocks per SM asked of ptxas
constexpr bool kStageOutput = false;  // outputs through shared memory (16-byte stores) or 8-byte stores
constexpr int kStoreBytes = kStageOutput ? 16 : 8;
constexpr int kThreads = 256;
constexpr int kChannels = 32;  // per block: 8 warps x 4 channels
constexpr int kPairs = kChannels / 2;
constexpr int kOutputs = 128;  // per block: 8 blocks of 16 along the mma's N
constexpr int kTapPad = 16;    // weight rows in shared memory: taps -16 .. 63
constexpr int kTapRow = 64 + kTapPad;

template <int K>
struct Geometry {
  static constexpr int kSteps = (16 + K - 1 + 15) / 16;
  static constexpr int kRows = kOutputs + 16 * (kSteps - 1);  // every frame the steps read (K - 1 needed)
  static constexpr int kPieces = kRows * kChannels * 2 / 16;  // 16-byte pieces of the tile in global
  static constexpr int kPiecesPerThread = (kPieces + kThreads - 1) / kThreads;
  // Words of a pair row: 8 words of padding per 16 frames, rounded up to 2 mod 32 (staging stores).
  static constexpr int kRowWords = kRows + 8 * ((kRows + 15) / 16);
  static constexpr int kPitch = kRowWords + ((2 - kRowWords % 32) + 32) % 32;
  static constexpr int kTileBytes = kPairs * kPitch * 4;
  static constexpr int kSmem = kTileBytes + kChannels * kTapRow * 2;
  static_assert(kOutputs * kChannels * 2 <= kTileBytes, "the output tile reuses the input tile's memory");
};

__device__ __forceinline__ int word_of(int frame) { return frame + 8 * (frame >> 4); }

template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
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

// The block's weights in shared memory, [channel][tap + kTapPad] of 16-bit values, zero outside
// [0, K): the A fragments read taps -7 .. 47 without bounds checks.

template <typename T>
__device__ __forceinline__ void load_weights(const DepthwiseConv1dParams<T>& p, int c0, uint16_t* wsm) {
  for (int i = static_cast<int>(threadIdx.x); i < kChannels * kTapRow; i += kThreads) {
    const int k = i / kChannels - kTapPad, ch = i % kChannels;  // consecutive threads: consecutive channels
    uint16_t v = 0;
    if (k >= 0 && k < p.kernel_size) v = reinterpret_cast<const uint16_t*>(p.weight)[int64_t{k} * p.channels + c0 + ch];
    wsm[ch * kTapRow + k + kTapPad] = v;
  }
}

// Taps k and k + 1 of channel ch as one operand register (low half: tap k).
__device__ __forceinline__ uint32_t taps(const uint16_t* wsm, int ch, int k) {
  const uint16_t* row = wsm + ch * kTapRow + kTapPad;
  return uint32_t{row[k]} | (uint32_t{row[k + 1]} << 16);
}

// The 16-byte piece j of this thread: tile row and which 4 channel pairs.
template <int K>
__device__ __forceinline__ void piece_slot(int j, int& row, int& quad) {
  const int index = static_cast<int>(threadIdx.x) + j * kThreads;
  row = index / (kPairs / 4);
  quad = index % (kPairs / 4);
}

template <typename T, int K>
__device__ __forceinline__ void load_pieces(const DepthwiseConv1dParams<T>& p, int b, int c0, int f0,
                                            uint4 (&v)[Geometry<K>::kPiecesPerThread]) {
#pragma unroll
  for (int j = 0; j < Geometry<K>::kPiecesPerThread; ++j) {
    int row, quad;
    piece_slot<K>(j, row, quad);
    v[j] = make_uint4(0, 0, 0, 0);
    const int f = f0 + row;
    const int c = c0 + quad * 8;
    if (row < Geometry<K>::kRows && f >= p.split && f < p.hi && c < p.channels) {
      const int64_t t = f - p.split;
      const bool keep = p.mask == nullptr || p.mask[b * p.mask_batch_stride + t * p.mask_time_stride] != 0;
      if (keep) v[j] = __ldg(reinterpret_cast<const uint4*>(p.input + b * p.input_batch_stride + t * p.input_time_stride + c));
    }
  }
}

template <int K>
__device__ __forceinline__ void store_pieces(uint32_t* smem, const uint4 (&v)[Geometry<K>::kPiecesPerThread]) {
#pragma unroll
  for (int j = 0; j < Geometry<K>::kPiecesPerThread; ++j) {
    int row, quad;
    piece_slot<K>(j, row, quad);
    if (row < Geometry<K>::kRows) {
      uint32_t* dst = smem + quad * 4 * Geometry<K>::kPitch + word_of(row);
      dst[0] = v[j].x;
      dst[Geometry<K>::kPitch] = v[j].y;
      dst[2 * Geometry<K>::kPitch] = v[j].z;
      dst[3 * Geometry<K>::kPitch] = v[j].w;
    }
  }
}

template <typename T, int kActivation>
__device__ __forceinline__ void store_outputs(const DepthwiseConv1dParams<T>& p, int b, int c, int o0,
                                              const float (&acc)[4][4], const float (&bias)[4]) {
  const int g = static_cast<int>(threadIdx.x & 31) >> 2, q = static_cast<int>(threadIdx.x & 3);
  T* base = p.output + b * p.output_batch_stride + c;
#pragma unroll
  for (int r = 0; r < 4; ++r) {  // D fragment element r: row g (+8 for r >= 2), column 2q + (r & 1)
    const int o = o0 + 16 * (2 * q + (r & 1)) + g + 8 * (r >> 1);
    if (o < p.out_len) {
      Packed<T, 4> y;
#pragma unroll
      for (int ch = 0; ch < 4; ++ch) y[ch] = from_float<T>(conv1d::detail::activate<kActivation>(acc[ch][r] + bias[ch]));
      y.store_streaming(base + int64_t{o} * p.output_time_stride);
    }
  }
}

// The output tile in shared memory, [frame][32 channels]: 8-byte slots (4 channels) XOR-swizzled
// by the frame, so the 16 lanes of a half-warp, 16 frames of one warp's slot, hit 16 bank pairs.
__device__ __forceinline__ int out_slot(int o, int slot) { return o * 8 + (slot ^ (((o >> 5) & 3) | ((o >> 1) & 1) << 2)); }

template <typename T, int kActivation>
__device__ __forceinline__ void stage_outputs(const DepthwiseConv1dParams<T>& p, int b, int c0, int o0, uint2* tile,
                                              const float (&acc)[4][4], const float (&bias)[4]) {
  const int g = static_cast<int>(threadIdx.x & 31) >> 2, q = static_cast<int>(threadIdx.x & 3);
  const int warp = static_cast<int>(threadIdx.x >> 5);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int o = 16 * (2 * q + (r & 1)) + g + 8 * (r >> 1);
    Packed<T, 4> y;
#pragma unroll
    for (int ch = 0; ch < 4; ++ch) y[ch] = from_float<T>(conv1d::detail::activate<kActivation>(acc[ch][r] + bias[ch]));
    uint2 word;
    memcpy(&word, y.data, sizeof(word));
    tile[out_slot(o, warp)] = word;
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < kOutputs * 4; i += kThreads) {  // 16-byte pieces
    const int o = i / 4, j = i % 4;
    if (o0 + o < p.out_len) {
      const uint2 lo = tile[out_slot(o, 2 * j)], hi = tile[out_slot(o, 2 * j + 1)];
      __stcs(reinterpret_cast<uint4*>(p.output + b * p.output_batch_stride + int64_t{o0 + o} * p.output_time_stride +
                                      c0 + 8 * j),
             make_uint4(lo.x, lo.y, hi.x, hi.y));
    }
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    TcConv1dKernel(const DepthwiseConv1dParams<T> p, int ctiles, int ntiles) {
  using G = Geometry<K>;
  extern __shared__ __align__(16) uint32_t smem[];
  const int tile = static_cast<int>(blockIdx.x % ntiles);
  const int rest = static_cast<int>(blockIdx.x / ntiles);
  const int c0 = (rest % ctiles) * kChannels;
  const int b = rest / ctiles;
  const int o0 = tile * kOutputs;

  uint4 v[G::kPiecesPerThread];
  load_pieces<T, K>(p, b, c0, o0, v);  // padded coordinates: output o reads frames o .. o + K - 1

  uint16_t* wsm = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(smem) + G::kTileBytes);
  load_weights(p, c0, wsm);
  store_pieces<K>(smem, v);
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int g = lane >> 2, q = lane & 3;
  const int c = c0 + 4 * warp;  // this warp's 4 channels (the launcher requires C % 32 == 0)
  uint32_t a0[4][G::kSteps], a2[4][G::kSteps];
  float bias[4];
#pragma unroll
  for (int ch = 0; ch < 4; ++ch) {
#pragma unroll
    for (int s = 0; s < G::kSteps; ++s) {
      a0[ch][s] = taps(wsm, 4 * warp + ch, 16 * s + 2 * q - g);
      a2[ch][s] = taps(wsm, 4 * warp + ch, 16 * s + 2 * q + 8 - g);
    }
    bias[ch] = p.bias != nullptr ? to_float(p.bias[c + ch]) : 0.0f;
  }

  float acc[4][4] = {};
#pragma unroll
  for (int pair = 0; pair < 2; ++pair) {
    const uint32_t* row = smem + (2 * warp + pair) * G::kPitch;
#pragma unroll
    for (int s = 0; s < G::kSteps; ++s) {
      const int f = 16 * (g + s) + 2 * q;
      const uint2 x01 = *reinterpret_cast<const uint2*>(row + word_of(f));
      const uint2 x89 = *reinterpret_cast<const uint2*>(row + word_of(f + 8));
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the pair's two channels: low and high halves of each word
        const uint32_t sel = h == 0 ? 0x5410u : 0x7632u;
        const uint32_t b0 = __byte_perm(x01.x, x01.y, sel);
        const uint32_t b1 = __byte_perm(x89.x, x89.y, sel);
        const int ch = 2 * pair + h;
        const uint32_t a[4] = {a0[ch][s], s > 0 ? a2[ch][s - 1] : 0u, a2[ch][s], a0[ch][s]};
        mma<T>(acc[ch], a, b0, b1);
      }
    }
  }

  if constexpr (kStageOutput) {
    __syncthreads();  // every warp is done with the input tile, which the outputs overwrite
    uint2* tile = reinterpret_cast<uint2*>(smem);
    switch (p.activation) {
      case kSilu: stage_outputs<T, kSilu>(p, b, c0, o0, tile, acc, bias); break;
      case kRelu: stage_outputs<T, kRelu>(p, b, c0, o0, tile, acc, bias); break;
      case kGelu: stage_outputs<T, kGelu>(p, b, c0, o0, tile, acc, bias); break;
      default: stage_outputs<T, kNone>(p, b, c0, o0, tile, acc, bias); break;
    }
  } else {
    switch (p.activation) {
      case kSilu: store_outputs<T, kSilu>(p, b, c, o0, acc, bias); break;
      case kRelu: store_outputs<T, kRelu>(p, b, c, o0, acc, bias); break;
      case kGelu: store_outputs<T, kGelu>(p, b, c, o0, acc, bias); break;
      default: store_outputs<T, kNone>(p, b, c, o0, acc, bias); break;
    }
  }
}

template <typename T, int K>
cudaError_t launch(const DepthwiseConv1dParams<T>& p, cudaStream_t stream, LaunchInfo* info) {
  using G = Geometry<K>;
  auto kernel = TcConv1dKernel<T, K>;
  const int ctiles = p.channels / kChannels;
  const int ntiles = (p.out_len + kOutputs - 1) / kOutputs;
  const int64_t blocks = int64_t{p.batch} * ctiles * ntiles;
  if (info != nullptr) *info = {"TcConv1dKernel", G::kSmem, blocks, kThreads};
  const cudaError_t allowed = detail::allow_smem(kernel, G::kSmem);
  if (allowed != cudaSuccess) return allowed;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  kernel<<<static_cast<unsigned>(blocks), kThreads, G::kSmem, stream>>>(p, ctiles, ntiles);
  return cudaGetLastError();
}

// 16-bit storage, K = 15 or 31, whole 32-channel tiles, 16-byte input pieces, kStoreBytes output
// stores, and no streaming state (the step stays on the FFMA kernel).
template <typename T>
bool applies(const DepthwiseConv1dParams<T>& p, const StepState<T>& s) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    auto aligned = [](const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; };
    return s.state == nullptr && p.state == nullptr && (p.kernel_size == 15 || p.kernel_size == 31) &&
           p.channels % kChannels == 0 && aligned(p.input, 16) && p.input_batch_stride % 8 == 0 &&
           p.input_time_stride % 8 == 0 && aligned(p.output, kStoreBytes) &&
           p.output_batch_stride % (kStoreBytes / 2) == 0 && p.output_time_stride % (kStoreBytes / 2) == 0;
  }
}

}  // namespace tc

template <typename T>
cudaError_t DepthwiseConv1dStaged(const DepthwiseConv1dParams<T>& p, const StepState<T>& s, cudaStream_t stream,
                                  LaunchInfo* info = nullptr) {
  if (p.batch <= 0 || p.channels <= 0 || p.out_len <= 0 || !tc::applies(p, s)) {
    return DepthwiseConv1dFfma(p, s, stream, info);
  }
  return p.kernel_size == 15 ? tc::launch<T, 15>(p, stream, info) : tc::launch<T, 31>(p, stream, info);
}

}  // namespace staged
}  // namespace conv1d
}  // namespace oasr
