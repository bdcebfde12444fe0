// Attention over [B, T, H, D] tensors (any strides, D contiguous): softmax(scores) v per batch row and head, with
// the Conformer's relative-position term fused (ESPnet's rel_shift or WeNet's unshifted form), the key-length and
// streaming chunk masks computed in the kernel, and no score matrix in global memory. fp16/bf16, fp32 math.
//
// Products: mma.sync m16n8k16 (FlashAttention-2's scheme), not wgmma: each lane knows the (query, key) of every
// score it holds, so the rel-shift's band gather and the masks are index arithmetic that can be checked on paper.
//
// Layout of the work. A block of kWarps = 4 or 8 warps owns Bm = 16 kWarps queries of one (batch row, head): warp w
// rows 16 w .. 16 w + 15, whose q (+ u) fragments stay in registers (q + v, for the relative form, in the warp's rows
// of the Q tile; both rounded to the storage type as torch's add rounds them). It walks the key blocks of 64 that
// some of its rows see (the key length and the chunk mask give the range; blocks wholly outside it are skipped), K,
// V and p tiles staged with cp.async (rows past the tensors zero-filled), V's copy under the score products, the
// next K's under the softmax and PV. Per key block a warp forms its 16 x 64 scores, masks them (only blocks the
// masks cut), and updates an online softmax (row maximum subtracted, base 2; a row with no valid key keeps maximum
// -inf, gives probabilities 0 and output 0). The shifted form at D = 128 takes blocks of 8 warps, the others 4
// (LaunchBlocks says why).
//
// The relative term. ESPnet (kShifted): p holds 2T - 1 rows, row r the relative position T - 1 - r, and
// score[i][j] += (q_i + v) . p[T - 1 - i + j]. For a warp's rows iw .. iw + 15 and keys j0 .. j0 + 63 those rows of p
// are a window of 79 consecutive rows from rbase = T - 16 - iw + j0: the warp computes W = (Q + v) P_window^T
// (16 x 80) on tensor cores, writes it to its own shared-memory rows and reads back score[il][jl] += W[il][jl + 15 -
// il] (il = i - iw, jl = j - j0): the shift as an index map, no shifted copy. The block stages p rows
// T - Bm - i0 + j0 .. + Bm + 63 (rows outside [0, 2T - 1) zero-filled: they meet only padded queries or keys), warp
// w's window starting at its row Bm - 16 - 16 w. 1.25x the Q K^T products, at the 16-row warp tile. WeNet
// (kUnshifted): p holds T rows and score[i][j] += (q_i + v) . p[j]: a second K, accumulated into the same scores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "oasr/common/cp_async.cuh"
#include "oasr/common/launch.cuh"
#include "oasr/common/math.cuh"
#include "oasr/common/mma.cuh"

namespace oasr::attention {

// The relative-position term of the scores.
enum class RelPos : int { kNone = 0, kShifted = 1, kUnshifted = 2 };

template <typename T>
struct Params {
  const T* q = nullptr;  // [B, T, H, D]
  const T* k = nullptr;
  const T* v = nullptr;
  T* out = nullptr;
  const T* p = nullptr;           // [2T - 1, H, D] (kShifted) or [T, H, D] (kUnshifted)
  const T* pos_bias_u = nullptr;  // [H, D]
  const T* pos_bias_v = nullptr;
  const int32_t* lengths = nullptr;  // [B] valid frames (clamped to [0, T]); null: T
  // Strides in elements, of the batch, time and head dimensions (D is contiguous); p and the biases' below.
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, out_stride[3] = {};
  int64_t p_stride[2] = {};  // time, head
  int64_t u_stride = 0, v_bias_stride = 0;  // head
  int batch = 0, time = 0, heads = 0;
  float scale_log2 = 0.f;  // the scores' scale times log2(e), > 0
  int chunk = 0;           // the chunk mask's chunk in frames, <= T; 0: no chunk mask
  int left_chunks = -1;    // chunks left of a query's own that it sees, <= T; < 0: all
};

// A block of kWarps warps (4 or 8: Launch's rule) takes 16 kWarps queries.
template <int kWarps>
constexpr int kBlockThreads = 32 * kWarps;
template <int kWarps>
constexpr int kBlockQueries = 16 * kWarps;
constexpr int kBn = 64;           // keys per block
constexpr int kWindow = 16 + kBn;  // a warp's relative-position window, 16 + kBn - 1 columns rounded up to 16
constexpr int kWindowStride = 88;  // floats per window row: its fragment stores conflict-free, the gather 2-way

// Rows of p a block stages per key block: kBm + kBn - 1 relative positions (rounded up to 16), or kBn unshifted.
template <RelPos kRel, int kWarps>
constexpr int kPRows = kRel == RelPos::kShifted ? kBlockQueries<kWarps> + kBn : (kRel == RelPos::kUnshifted ? kBn : 0);

// Q, K, V and p tiles, and the shifted form's fp32 windows.
template <int D, RelPos kRel, int kWarps>
constexpr int kSmemBytes = (kBlockQueries<kWarps> + 2 * kBn + kPRows<kRel, kWarps>)*D * 2 +
                           (kRel == RelPos::kShifted ? kWarps * 16 * kWindowStride * 4 : 0);

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of D 16-bit columns: chunks XOR-swizzled by row so
// that the 8 rows an ldmatrix reads, and the copies' rows, fall on distinct banks.
template <int D>
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}

// Rows first .. first + kRows - 1 of a [rows, D] operand (row r at base + r * row_stride) into the tile at smem,
// rows outside [0, limit) zero-filled; one commit group is the caller's.
template <typename T, int D, int kRows, int kThreadCount>
__device__ __forceinline__ void load_tile(uint32_t smem, const T* base, int64_t row_stride, int first, int limit) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kThreadCount == 0, "a tile is whole rounds of the block's copies");
#pragma unroll
  for (int step = 0; step < kRows * kChunks / kThreadCount; ++step) {
    const int idx = threadIdx.x + step * kThreadCount;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const int r = first + row;
    const bool valid = r >= 0 && r < limit;
    cp_async_16(smem + tile_offset<D>(row, chunk), valid ? base + r * row_stride + chunk * 8 : base, valid ? 16 : 0);
  }
}

// Fragment loads (ldmatrix.x4) from a tile. Lane 8 j + r gives row r of matrix j; `lane` is its part of the offset,
// formed once (lane_rows, lane_columns), and a k-step's chunk pair 2 kk, 2 kk + 1 is an XOR into it: the swizzle
// XORs the chunk with row & 7 = r (the steps' rows start at multiples of 8), and 2 kk ^ (c ^ r) = (2 kk + c) ^ r.
template <int D>
__device__ __forceinline__ uint32_t fragment_address(uint32_t tile, int row0, uint32_t lane, int kk) {
  return tile + row0 * (D * 2) + (lane ^ (kk << 5));
}

// The lane's offset for fragments of tile rows (matrices j & 1 eight rows apart, j >> 1 the chunk: Q's A
// fragments) or, with kPairRows, of row pairs (j >> 1 eight rows apart, j & 1 the chunk: K^T's B fragments for two
// n8 tiles, b[0..1] and b[2..3]).
template <int D, bool kPairRows>
__device__ __forceinline__ uint32_t lane_rows(int lane) {
  const int j = lane >> 3, r = lane & 7;
  const int row = r + ((kPairRows ? j >> 1 : j & 1) << 3), chunk = kPairRows ? j & 1 : j >> 1;
  return static_cast<uint32_t>(row * (D * 2) + ((chunk ^ r) << 4));
}

// The lane's offset for V's transposed B fragments: keys 16 kk + (j & 1) 8 + r, columns chunk 2 dp + (j >> 1);
// b[0..1] the n8 tile of columns 16 dp .., b[2..3] the next.
template <int D>
__device__ __forceinline__ uint32_t lane_columns(int lane) {
  const int j = lane >> 3, r = lane & 7;
  return static_cast<uint32_t>((r + ((j & 1) << 3)) * (D * 2) + (((j >> 1) ^ r) << 4));
}

// s[0..7] += A (16 x D fragments) times (tile rows row0 .. row0 + 63)^T.
template <typename T, int D>
__device__ __forceinline__ void scores(float (&s)[8][4], const uint32_t (&a)[D / 16][4], uint32_t tile, int row0,
                                       uint32_t lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      load_matrices<4, false>(b, fragment_address<D>(tile, row0 + 16 * np, lane, kk));
      mma_16816(s[2 * np], a[kk], b, T());
      mma_16816(s[2 * np + 1], a[kk], b + 2, T());
    }
  }
}

// The first and last key that query i sees: the chunk mask (chunk > 0) within the valid keys [0, length).
__device__ __forceinline__ int first_key(int i, int chunk, int left_chunks) {
  if (chunk <= 0 || left_chunks < 0) return 0;
  const int64_t first = (static_cast<int64_t>(i / chunk) - left_chunks) * chunk;
  return first > 0 ? static_cast<int>(first) : 0;
}
__device__ __forceinline__ int last_key(int i, int length, int chunk) {
  return chunk > 0 ? min(length, (i / chunk + 1) * chunk) - 1 : length - 1;
}

// Blocks per SM the registers are capped for: 4-warp blocks at 168 or 255 registers (ptxas takes 180-230 at D = 64
// to hoist fragment loads otherwise, and D = 64's shifted form spills at 168; D = 128's shifted form spills 132
// bytes at 255), 8-warp blocks at 255.
template <int D, RelPos kRel, int kWarps>
constexpr int kMinBlocks = kWarps == 8 ? 1 : (D == 64 && kRel != RelPos::kShifted ? 3 : 2);

template <typename T, int D, RelPos kRel, int kWarps>
__global__ void __launch_bounds__(kBlockThreads<kWarps>, (kMinBlocks<D, kRel, kWarps>))
    AttentionKernel(const Params<T> p) {
  constexpr int kThreads = kBlockThreads<kWarps>, kBm = kBlockQueries<kWarps>;
  constexpr bool kRelative = kRel != RelPos::kNone;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t s_q = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t s_k = s_q + kBm * D * 2, s_v = s_k + kBn * D * 2, s_p = s_v + kBn * D * 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float* window = reinterpret_cast<float*>(smem + (kBm + 2 * kBn + kPRows<kRel, kWarps>)*D * 2) +
                  warp * 16 * kWindowStride;

  const int time = p.time;
  const int q_blocks = (time + kBm - 1) / kBm;
  const int bh = blockIdx.x / q_blocks;
  const int i0 = (q_blocks - 1 - (blockIdx.x - bh * q_blocks)) * kBm;  // a head's last (longest) blocks first
  const int h = bh % p.heads, b = bh / p.heads;
  const int length = p.lengths != nullptr ? min(max(p.lengths[b], 0), time) : time;
  const int chunk = p.chunk, left = p.left_chunks;

  // This lane's rows (g and g + 8 of its warp) and the keys each sees; the block's key blocks.
  const int row_a = i0 + 16 * warp + g, row_b = row_a + 8;
  const int lo_a = first_key(row_a, chunk, left), hi_a = last_key(row_a, length, chunk);
  const int lo_b = first_key(row_b, chunk, left), hi_b = last_key(row_b, length, chunk);
  const int first = first_key(i0, chunk, left), last = last_key(min(i0 + kBm - 1, time - 1), length, chunk);
  const int kb_begin = first / kBn, kb_end = last >= first ? last / kBn + 1 : kb_begin;
  // Key blocks inside [lo_max, hi_min] are seen by every row of the block: no mask.
  const int lo_max = first_key(i0 + kBm - 1, chunk, left), hi_min = last_key(i0, length, chunk);

  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + h * p.k_stride[2];
  const T* v = p.v + b * p.v_stride[0] + h * p.v_stride[2];
  const T* pos = kRelative ? p.p + h * p.p_stride[1] : nullptr;
  const int p_rows = kRel == RelPos::kShifted ? 2 * time - 1 : time;
  // The p rows staged for key block j0: from T - kBm - i0 + j0 (kShifted) or j0.
  const auto p_first = [&](int j0) { return kRel == RelPos::kShifted ? time - kBm - i0 + j0 : j0; };

  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY};  // running row maxima of the scores times scale_log2
  float l[2] = {0.f, 0.f};              // this lane's part of the rows' sums of probabilities

  if (kb_begin < kb_end) {
    load_tile<T, D, kBm, kThreads>(s_q, q, p.q_stride[1], i0, time);
    load_tile<T, D, kBn, kThreads>(s_k, k, p.k_stride[1], kb_begin * kBn, time);
    if constexpr (kRelative) {
      load_tile<T, D, kPRows<kRel, kWarps>, kThreads>(s_p, pos, p.p_stride[0], p_first(kb_begin * kBn), p_rows);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // q (+ u) in registers; q + v (the relative form) back into the warp's own rows of the Q tile, reloaded per
    // key block (registers are what the D = 128 tile runs short of).
    const uint32_t lane_a = lane_rows<D, false>(lane), lane_b = lane_rows<D, true>(lane);
    const uint32_t lane_v = lane_columns<D>(lane);
    uint32_t qa[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) load_matrices<4, false>(qa[kk], fragment_address<D>(s_q, 16 * warp, lane_a, kk));
    if constexpr (kRelative) {
      __syncwarp();  // (the warp's Q rows are read before they are rewritten)
      const T* u = p.pos_bias_u + h * p.u_stride;
      const T* vb = p.pos_bias_v + h * p.v_bias_stride;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int d = 16 * kk + 2 * t + 8 * (r >> 1);  // a[r] holds row g + 8 (r & 1), columns d, d + 1
          const float2 x = unpack_pair(qa[kk][r], T());
          const float2 bu = unpack_pair(__ldg(reinterpret_cast<const uint32_t*>(u + d)), T());
          const float2 bv = unpack_pair(__ldg(reinterpret_cast<const uint32_t*>(vb + d)), T());
          qa[kk][r] = round_pair(x.x + bu.x, x.y + bu.y, T());
          *reinterpret_cast<uint32_t*>(smem + tile_offset<D>(16 * warp + g + 8 * (r & 1), 2 * kk + (r >> 1)) + 4 * t) =
              round_pair(x.x + bv.x, x.y + bv.y, T());
        }
      }
    }
    __syncwarp();

    const float scale_log2 = p.scale_log2;
    for (int kb = kb_begin; kb < kb_end; ++kb) {
      const int j0 = kb * kBn;
      if (kb != kb_begin) {  // K and P of this block have landed, and every warp is done with the last V
        cp_async_wait<0>();
        __syncthreads();
      }
      load_tile<T, D, kBn, kThreads>(s_v, v, p.v_stride[1], j0, time);
      cp_async_commit();

      uint32_t qp[kRelative ? D / 16 : 1][4];  // q + v
      if constexpr (kRelative) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          load_matrices<4, false>(qp[kk], fragment_address<D>(s_q, 16 * warp, lane_a, kk));
        }
      }
      if constexpr (kRel == RelPos::kShifted) {
        // W = (Q + v) P_window^T, 16 columns at a time, into the warp's window rows (before the scores: fewer
        // registers live at once).
#pragma unroll
        for (int cp = 0; cp < kWindow / 16; ++cp) {
          float w[2][4] = {};
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t bw[4];
            load_matrices<4, false>(bw, fragment_address<D>(s_p, kBm - 16 - 16 * warp + 16 * cp, lane_b, kk));
            mma_16816(w[0], qp[kk], bw, T());
            mma_16816(w[1], qp[kk], bw + 2, T());
          }
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int column = 16 * cp + 8 * half + 2 * t;
            *reinterpret_cast<float2*>(window + g * kWindowStride + column) = make_float2(w[half][0], w[half][1]);
            *reinterpret_cast<float2*>(window + (g + 8) * kWindowStride + column) =
                make_float2(w[half][2], w[half][3]);
          }
        }
      }
      float s[8][4] = {};
      scores<T, D>(s, qa, s_k, 0, lane_b);
      if constexpr (kRel == RelPos::kUnshifted) scores<T, D>(s, qp, s_p, 0, lane_b);
      if constexpr (kRel == RelPos::kShifted) {
        // The band: score[il][jl] += W[il][jl + 15 - il].
        __syncwarp();
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int jl = 8 * n + 2 * t + e;
            s[n][e] += window[g * kWindowStride + jl + 15 - g];
            s[n][2 + e] += window[(g + 8) * kWindowStride + jl + 7 - g];
          }
        }
      }

      cp_async_wait<0>();  // V has landed, and every warp is done with this K and P
      __syncthreads();
      if (kb + 1 < kb_end) {
        load_tile<T, D, kBn, kThreads>(s_k, k, p.k_stride[1], j0 + kBn, time);
        if constexpr (kRelative) {
          load_tile<T, D, kPRows<kRel, kWarps>, kThreads>(s_p, pos, p.p_stride[0], p_first(j0 + kBn), p_rows);
        }
        cp_async_commit();
      }

      if (!(j0 >= lo_max && j0 + kBn - 1 <= hi_min)) {
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = j0 + 8 * n + 2 * t + e;
            if (j < lo_a || j > hi_a) s[n][e] = -INFINITY;
            if (j < lo_b || j > hi_b) s[n][2 + e] = -INFINITY;
          }
        }
      }
      // Online softmax: rows a (s[n][0..1]) and b (s[n][2..3]); the 4 lanes of a row reduce by shuffles.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float top = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; ++n) top = fmaxf(top, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
        const float m_new = fmaxf(m[r], top * scale_log2);
        const float base = m_new == -INFINITY ? 0.f : m_new;  // a row with no valid key yet: probabilities 0
        const float correction = exp2_approx(m[r] - base);
        m[r] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            s[n][2 * r + e] = exp2_approx(fmaf(s[n][2 * r + e], scale_log2, -base));
            sum += s[n][2 * r + e];
          }
        }
        l[r] = l[r] * correction + sum;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[n][2 * r] *= correction;
          o[n][2 * r + 1] *= correction;
        }
      }
      // O += P V, the probabilities rounded to the storage type as the A fragments of 4 k-steps of 16 keys.
#pragma unroll
      for (int kk = 0; kk < kBn / 16; ++kk) {
        const uint32_t a[4] = {round_pair(s[2 * kk][0], s[2 * kk][1], T()), round_pair(s[2 * kk][2], s[2 * kk][3], T()),
                               round_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], T()),
                               round_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], T())};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bv[4];
          load_matrices<4, true>(bv, fragment_address<D>(s_v, 16 * kk, lane_v, dp));
          mma_16816(o[2 * dp], a, bv, T());
          mma_16816(o[2 * dp + 1], a, bv + 2, T());
        }
      }
    }
  }

  // Epilogue: O / l rounded once, through the warp's own rows of the Q tile, stored in 16-byte pieces.
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inverse[r] = sum > 0.f ? 1.f / sum : 0.f;
  }
  uint8_t* staged = smem;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int row = 16 * warp + g;
    *reinterpret_cast<uint32_t*>(staged + tile_offset<D>(row, n) + 4 * t) =
        round_pair(o[n][0] * inverse[0], o[n][1] * inverse[0], T());
    *reinterpret_cast<uint32_t*>(staged + tile_offset<D>(row + 8, n) + 4 * t) =
        round_pair(o[n][2] * inverse[1], o[n][3] * inverse[1], T());
  }
  __syncwarp();
  T* out = p.out + b * p.out_stride[0] + h * p.out_stride[2];
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int step = 0; step < 16 * kChunks / 32; ++step) {
    const int idx = lane + 32 * step;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const int i = i0 + 16 * warp + row;
    if (i < time) {
      const uint4 piece = *reinterpret_cast<const uint4*>(staged + tile_offset<D>(16 * warp + row, chunk));
      *reinterpret_cast<uint4*>(out + i * p.out_stride[1] + chunk * 8) = piece;
    }
  }
}

// Launches AttentionKernel<T, D, kRel, kWarps>: a block per 16 kWarps queries of each (batch row, head).
template <typename T, int D, RelPos kRel, int kWarps>
cudaError_t Launch(const Params<T>& p, cudaStream_t stream) {
  constexpr int kSmem = kSmemBytes<D, kRel, kWarps>;
  constexpr int kBm = kBlockQueries<kWarps>;
  static int allowed[kMaxDevices] = {};
  const auto kernel = AttentionKernel<T, D, kRel, kWarps>;
  const cudaError_t error = allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), kSmem, allowed);
  if (error != cudaSuccess) return error;
  const int64_t blocks = int64_t{p.batch} * p.heads * ((p.time + kBm - 1) / kBm);
  if (blocks == 0) return cudaSuccess;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  kernel<<<static_cast<unsigned>(blocks), kBlockThreads<kWarps>, kSmem, stream>>>(p);
  return cudaGetLastError();
}

// Whether blocks of 128 queries pad T by at most 10% more rows than blocks of 64.
inline bool wide_blocks(int time) {
  const int64_t rows64 = (int64_t{time} + 63) / 64 * 64, rows128 = (int64_t{time} + 127) / 128 * 128;
  return rows128 * 10 <= rows64 * 11;
}

// The shifted form at D = 128 runs on blocks of 8 warps where wide_blocks allows: its 4-warp kernel spills 132 bytes
// at 255 registers, the 8-warp one 32, and it took 83 against 115 us on (16, 375, 8, 128). Every other form keeps 4
// warps: on 8 they took 1.0-1.3x longer (8 warps resident on an SM against 12 at D = 64), H200, bf16
// (dev/attention/RESULTS.md).
template <typename T, int D, RelPos kRel>
cudaError_t LaunchBlocks(const Params<T>& p, cudaStream_t stream) {
  if constexpr (D == 128 && kRel == RelPos::kShifted) {
    if (wide_blocks(p.time)) return Launch<T, D, kRel, 8>(p, stream);
  }
  return Launch<T, D, kRel, 4>(p, stream);
}

// Attention of head size head_dim (64 or 128) with the relative term rel; cudaErrorInvalidValue for another size.
template <typename T>
cudaError_t Attention(const Params<T>& p, int head_dim, RelPos rel, cudaStream_t stream) {
  if (head_dim == 64) {
    if (rel == RelPos::kShifted) return LaunchBlocks<T, 64, RelPos::kShifted>(p, stream);
    if (rel == RelPos::kUnshifted) return LaunchBlocks<T, 64, RelPos::kUnshifted>(p, stream);
    return LaunchBlocks<T, 64, RelPos::kNone>(p, stream);
  }
  if (head_dim == 128) {
    if (rel == RelPos::kShifted) return LaunchBlocks<T, 128, RelPos::kShifted>(p, stream);
    if (rel == RelPos::kUnshifted) return LaunchBlocks<T, 128, RelPos::kUnshifted>(p, stream);
    return LaunchBlocks<T, 128, RelPos::kNone>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace oasr::attention
