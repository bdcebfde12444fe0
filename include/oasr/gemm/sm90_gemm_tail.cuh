// Hopper (sm90a) GEMM with a fused epilogue for grids of about one wave: D = act(A . B^T + bias), 128 x BN
// tiles, one CTA per tile, whose epilogue runs mostly under the tile's own last products.
//
// In one wave (1500x2048x512: 132 tiles of 128 x 192, one per SM) nothing follows a tile's epilogue, so a SiLU's
// SFU work (one tanh.approx per output) adds its whole time to the kernel's. Here each warpgroup's accumulators
// are two column parts, [0, BN - 64) and the last 64, each with its own wgmma (m64 n(BN - 64) k16 and m64 n64 k16).
// The last `Tail` k-blocks are issued part after part: the first part's products for all of them, then the
// second's. The warpgroup waits for the first part only and runs its epilogue (bias, activation, rounding,
// stores) while the tensor cores finish the second; the second part's epilogue is the one left exposed.
// (The same registers under an n192 wgmma and then n128 + n64 ones make ptxas serialise the wgmmas, C7511:
// the parts have their own products from the first k-block.)
//
// Layout: A [M, K] row-major, B [N, K] K-major (nn.Linear), D [M, N] row-major, bias [N]. A producer warp loads
// (A, B) k-blocks by TMA (128-byte swizzle) into a ring of 200 KB of stages; two consumer warpgroups each hold
// 64 rows x BN columns of fp32 accumulators (both wgmma operands from shared memory), and store each part by
// the direct kernel's direct::store (stmatrix through a per-warp block, 16-byte stores). The tail's
// k-blocks must all sit in the ring at once: Tail <= the stages. Measured: dev/gemm/RESULTS.md.
#pragma once

#include <type_traits>

#include <oasr/gemm/sm90_gemm.cuh>
#include <oasr/gemm/sm90_group_gemm_direct.cuh>

namespace oasr::gemm::tail {

using direct::Epilogue;

constexpr int kBM = 128, kBK = 64;
constexpr int kRight = 64;                   // the tail's second part: the tile's last 64 columns
constexpr int kConsumers = 256;              // two warpgroups, 64 rows each
constexpr int kThreads = kConsumers + 128;   // and the producer warpgroup (one warp of it loads)
constexpr int kTailBlocks = 4;               // the tail's k-blocks (2 and 4 within 1%: dev/gemm/RESULTS.md)

// Shared memory: the stages' A tiles, then their B tiles (each 1024-byte aligned, as the swizzle needs), the full
// and empty mbarriers, the tile's bias (fp32, halved for SiLU), each consumer warp's 8 x 64 output block.
template <class Element, int BN>
struct Plan {
  static constexpr int Stages = 200 * 1024 / ((kBM + BN) * kBK * sizeof(Element));
  static constexpr uint32_t kABytes = kBM * kBK * sizeof(Element);
  static constexpr uint32_t kBBytes = BN * kBK * sizeof(Element);
  static constexpr uint32_t kBOffset = Stages * kABytes;
  static constexpr uint32_t kBarriers = Stages * (kABytes + kBBytes);
  static constexpr uint32_t kBias = kBarriers + 2 * Stages * 8;  // fp32 [BN]
  static constexpr uint32_t kBlocks = kBias + BN * sizeof(float);
  static constexpr uint32_t kBlockBytes = 8 * 64 * sizeof(Element);
  static constexpr uint32_t kBytes = 1024 + kBlocks + kConsumers / 32 * kBlockBytes;
};

template <class Element>
struct Params : GemmParams<Element> {
  CUtensorMap a_map;  // [M, K]: boxes of kBK x kBM
  CUtensorMap b_map;  // [N, K]: boxes of kBK x BN
};

template <class Element, int BN, int Tail, bool Bias, Epilogue Epi>
__global__ void __launch_bounds__(kThreads, 1) TailGemmKernel(const __grid_constant__ Params<Element> p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using P = Plan<Element, BN>;
  constexpr int Stages = P::Stages, kLeft = BN - kRight;
  static_assert(Tail >= 1 && Tail <= Stages, "the tail's k-blocks must all fit in the ring");
  using T = Native<Element>;
  unsigned char* base = direct::smem_base();
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(base));
  const uint32_t full = smem + P::kBarriers, empty = full + 8 * Stages;
  if (threadIdx.x == kConsumers) {
    tma_prefetch(&p.a_map);
    tma_prefetch(&p.b_map);
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, kConsumers / 32);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const int n_tiles = (p.n + BN - 1) / BN;
  const int m0 = static_cast<int>(blockIdx.x) / n_tiles * kBM, n0 = static_cast<int>(blockIdx.x) % n_tiles * BN;
  const int k_blocks = (p.k + kBK - 1) / kBK;
  if (threadIdx.x >= kConsumers) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == kConsumers) {
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int slot = kb % Stages;
        if (kb >= Stages) mbarrier_wait(empty + 8 * slot, (kb / Stages - 1) & 1);
        mbarrier_arrive_expect_tx(full + 8 * slot, P::kABytes + P::kBBytes);
        tma_load(smem + slot * P::kABytes, &p.a_map, full + 8 * slot, kb * kBK, m0);
        tma_load(smem + P::kBOffset + slot * P::kBBytes, &p.b_map, full + 8 * slot, kb * kBK, n0);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");  // 40 x 128 + 232 x 256 <= 65536
  const int wg = threadIdx.x >> 7, rows = 64 * wg;
  const uint32_t a_rows = rows * kBK * sizeof(Element);
  const bool releases = (threadIdx.x & 31) == 0;
  float* bias = reinterpret_cast<float*>(base + P::kBias);
  const uint32_t block = smem + P::kBlocks + (threadIdx.x >> 5) * P::kBlockBytes;
  float bias_value = 0.f;  // read now, put in shared memory after the products are issued
  if (Bias && threadIdx.x < BN && n0 + static_cast<int>(threadIdx.x) < p.n) {
    bias_value = static_cast<float>(reinterpret_cast<const T*>(p.bias)[n0 + threadIdx.x]);
  }
  const int tail = k_blocks < Tail ? k_blocks : Tail, main = k_blocks - tail;
  float acc[BN / 2];
  const auto a_desc = [&](int slot, int ks) { return wgmma_desc_sw128(smem + slot * P::kABytes + a_rows + 32 * ks); };
  const auto b_desc = [&](int slot, int ks, int row) {
    return wgmma_desc_sw128(smem + P::kBOffset + slot * P::kBBytes + row * kBK * sizeof(Element) + 32 * ks);
  };
  // k-block kb's products (in slot `slot`) of the first part (columns [0, kLeft)) and/or of the second (the last
  // kRight columns), interleaved when both.
  const auto issue = [&](auto first, auto second, int slot, int kb) {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      if constexpr (decltype(first)::value) {
        wgmma_ss_m64k16_part<T, kLeft, 0>(acc, a_desc(slot, ks), b_desc(slot, ks, 0), kb > 0 || ks > 0);
      }
      if constexpr (decltype(second)::value) {
        wgmma_ss_m64k16_part<T, kRight, kLeft / 2>(acc, a_desc(slot, ks), b_desc(slot, ks, kLeft), kb > 0 || ks > 0);
      }
    }
  };
  const std::true_type part;
  const std::false_type no_part;
  for (int kb = 0; kb < main; ++kb) {
    const int slot = kb % Stages;
    mbarrier_wait(full + 8 * slot, (kb / Stages) & 1);
    issue(part, part, slot, kb);
    wgmma_commit();
    if (kb > 0) {
      wgmma_wait<1>();
      if (releases) mbarrier_arrive(empty + 8 * ((kb - 1) % Stages));
    }
  }
  // The tail: its first part's products for every k-block, then its second part's. Its stages are not released:
  // the producer has nothing after them.
  for (int kb = main; kb < k_blocks; ++kb) {
    const int slot = kb % Stages;
    mbarrier_wait(full + 8 * slot, (kb / Stages) & 1);
    issue(part, no_part, slot, kb);
    wgmma_commit();
    if (kb == main && kb > 0) {  // the last full-width k-block is done with its stage
      wgmma_wait<1>();
      if (releases) mbarrier_arrive(empty + 8 * ((kb - 1) % Stages));
    }
  }
  int kb = main;  // the tail has at least one k-block
  do {
    issue(no_part, part, kb % Stages, kb);
  } while (++kb < k_blocks);
  wgmma_commit();
  if constexpr (Bias) {
    if (threadIdx.x < BN) bias[threadIdx.x] = direct::kHalves<Epi> ? 0.5f * bias_value : bias_value;
    asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
  }
  wgmma_wait<1>();
#pragma unroll
  for (int i = 0; i < kLeft / 2; ++i) asm volatile("" : "+f"(acc[i])::"memory");
  T* const d = reinterpret_cast<T*>(p.d);
  direct::store<Element, Bias, Epi, 0, kLeft>(d, p.ldd, p.n, m0, p.m, n0, rows, acc, bias, block);
  wgmma_wait<0>();
  wgmma_fence_registers(acc);
  direct::store<Element, Bias, Epi, kLeft, kRight>(d, p.ldd, p.n, m0, p.m, n0, rows, acc, bias, block);
#endif
}

// Launches one GEMM (p.batch == 1; p.bias read when Bias) on `stream`: no workspace, no allocation, no host
// synchronisation.
template <class Element, int BN, bool Bias, Epilogue Epi, int Tail = kTailBlocks>
cudaError_t RunTail(const GemmParams<Element>& p, cudaStream_t stream) {
  using P = Plan<Element, BN>;
  Params<Element> params{};
  static_cast<GemmParams<Element>&>(params) = p;
  constexpr CUtensorMapDataType type = direct::kTmaType<Element>;
  const uint64_t a_dims[2] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.m)};
  const uint64_t a_strides[1] = {static_cast<uint64_t>(p.lda) * sizeof(Element)};
  const uint32_t a_box[2] = {kBK, kBM};
  const uint64_t b_dims[2] = {static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n)};
  const uint64_t b_strides[1] = {static_cast<uint64_t>(p.ldb) * sizeof(Element)};
  const uint32_t b_box[2] = {kBK, BN};
  if (!encode_tensor_map(&params.a_map, type, p.a, 2, a_dims, a_strides, a_box) ||
      !encode_tensor_map(&params.b_map, type, p.b, 2, b_dims, b_strides, b_box)) {
    return cudaErrorInvalidValue;
  }
  const void* kernel = reinterpret_cast<const void*>(&TailGemmKernel<Element, BN, Tail, Bias, Epi>);
  static int allowed[kMaxDevices] = {};
  const cudaError_t error = allow_dynamic_shared_memory(kernel, static_cast<int>(P::kBytes), allowed);
  if (error != cudaSuccess) return error;
  const unsigned grid = static_cast<unsigned>(((p.m + kBM - 1) / kBM) * ((p.n + BN - 1) / BN));
  void* args[] = {&params};
  return launch_kernel(kernel, grid, kThreads, P::kBytes, stream, false, args);
}

}  // namespace oasr::gemm::tail
