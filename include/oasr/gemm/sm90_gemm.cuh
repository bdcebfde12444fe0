// Hopper (sm90a) GEMM on tensor cores through CUTLASS 3.x: D[l] = epilogue(A[l] . B[l]^T).
//
// Layout: A is [M, K] K-major (row-major, nn.Linear's input), B is [N, K] K-major (nn.Linear's weight,
// attention keys) or [K, N] N-major (attention values), D is [M, N] row-major; L batches them. Only the
// innermost stride is 1; the others are runtime values, which TMA needs to be multiples of 16 bytes
// (the extents need not be: a ragged tile is zero-filled on load and clipped on store).
//
// Kernel: CUTLASS's TMA warp-specialized mainloop (a producer warp issues TMA loads into a ring of
// shared-memory stages; consumer warpgroups run wgmma with fp32 accumulators), cooperative (two
// warpgroups share a 128-row tile), ping-pong (each warpgroup owns a tile, one's epilogue overlaps
// the other's math) or non-persistent, with a cluster that multicasts the shared operand tile.
//
// Epilogue: CUTLASS's visitor-tree fusion, computed in fp32 from the accumulators and rounded once:
// plain (D = acc) or act(acc + bias[n]) with the bias broadcast along rows (a null bias reads as 0).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/kernel_hardware_info.h>

#include <cstdint>
#include <type_traits>

#include "oasr/common/activation.cuh"
#include "oasr/common/cutlass_launch.cuh"
#include "oasr/common/math.cuh"

namespace oasr::gemm {

// ---------------------------------------------------------------------------------------------
// Configuration: one type per choice, so a JIT module names its instantiation in a few -D flags.
// ---------------------------------------------------------------------------------------------

// Which kernel schedule runs the tiles; each implies the matching epilogue schedule and a tile scheduler
// (void: the kernel's own, a static persistent one or one CTA per tile).
struct Cooperative {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using TileScheduler = void;
};
struct PingPong {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using TileScheduler = void;
};
struct NonPersistent {  // one CTA per tile: no scheduler loop, for grids smaller than the GPU
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecialized;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using TileScheduler = void;
};

// Epilogues. Plain writes the accumulators; the others add a per-column bias and apply Act.
struct Plain {};
template <template <class> class Act>
struct BiasAct {};

// The CUDA type of a CUTLASS 16-bit element (the kernels' arithmetic is CUDA's, the API's types CUTLASS's).
template <class Element>
using Native = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, half, nv_bfloat16>;

// SiLU by fast_silu, as the direct kernel computes it: CUTLASS's SiLu divides in IEEE, a slow-path call per
// element that made the fused epilogue 1.6-3.3x the plain GEMM (H200). CUTLASS's activation interface: T is fp32,
// or an Array of it.
template <class T>
struct Silu {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE T operator()(T const& x) const {
    if constexpr (std::is_same_v<T, float>) {
      return fast_silu(x);
    } else {
      T y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < T::kElements; ++i) y[i] = fast_silu(x[i]);
      return y;
    }
  }
};

// B's layout: K-major [N, K] (nn.Linear weight, "NT") or N-major [K, N] ("NN").
using KMajorB = cutlass::layout::ColumnMajor;
using NMajorB = cutlass::layout::RowMajor;

namespace detail {

template <class Element, class Epilogue>
struct Fusion;

template <class Element>
struct Fusion<Element, Plain> {
  using Op = cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>;
};

template <class Element, template <class> class Act>
struct Fusion<Element, BiasAct<Act>> {
  using Op = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, Element, float, Element, void, float>;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The kernel: CUTLASS's collective builders assemble mainloop and epilogue for one configuration.
// ---------------------------------------------------------------------------------------------

// EpilogueTile: the sub-tile the epilogue stores at a time (CUTLASS's choice: 128x32 cooperative, 64x32 else).
template <class Element, class LayoutB, class TileShape, class ClusterShape, class Schedule, int Stages,
          class Epilogue, class EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto>
struct Sm90Gemm {
  static constexpr int kAlignment = 16 / sizeof(Element);  // elements per 16 bytes: TMA's unit
  using FusionOp = typename detail::Fusion<Element, Epilogue>::Op;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTile, float, float,                                      //
      void, cutlass::layout::RowMajor, kAlignment,                     // no C operand
      Element, cutlass::layout::RowMajor, kAlignment,                  // D
      typename Schedule::Epilogue, FusionOp>::CollectiveOp;

  // Stages = 0: as many as fit beside the epilogue's shared memory.
  using StageCount = cute::conditional_t<
      Stages == 0,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::collective::StageCount<(Stages > 0 ? Stages : 1)>>;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,  //
      Element, cutlass::layout::RowMajor, kAlignment,        // A
      Element, LayoutB, kAlignment,                          // B
      float, TileShape, ClusterShape, StageCount, typename Schedule::Mainloop>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, typename Schedule::TileScheduler>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  using StrideD = typename Kernel::StrideD;
};

// ---------------------------------------------------------------------------------------------
// The launcher.
// ---------------------------------------------------------------------------------------------

// One problem: extents, element strides (the innermost ones are 1 and implied) and pointers.
template <class Element>
struct GemmParams {
  int m = 0, n = 0, k = 0, batch = 1;
  const Element* a = nullptr;  // [batch][m][k]
  int64_t lda = 0, batch_stride_a = 0;
  const Element* b = nullptr;  // [batch][n][k] (K-major) or [batch][k][n] (N-major)
  int64_t ldb = 0, batch_stride_b = 0;
  Element* d = nullptr;  // [batch][m][n]
  int64_t ldd = 0, batch_stride_d = 0;
  const Element* bias = nullptr;  // [n] or null (BiasAct epilogues only)
  int device = 0, sm_count = 0;
};

template <class Gemm, class Element>
typename Gemm::Device::Arguments make_arguments(const GemmParams<Element>& p) {
  using namespace cute;
  typename Gemm::StrideA stride_a{};
  get<0>(stride_a) = p.lda;
  get<2>(stride_a) = p.batch_stride_a;
  typename Gemm::StrideB stride_b{};
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(get<1>(stride_b))>>) {  // K-major: (ldb, 1)
    get<0>(stride_b) = p.ldb;
  } else {  // N-major: (N, K) strides (1, ldb)
    get<1>(stride_b) = p.ldb;
  }
  get<2>(stride_b) = p.batch_stride_b;
  typename Gemm::StrideD stride_d{};
  get<0>(stride_d) = p.ldd;
  get<2>(stride_d) = p.batch_stride_d;

  typename Gemm::Device::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {p.m, p.n, p.k, p.batch};
  args.mainloop = {p.a, stride_a, p.b, stride_b};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = stride_d;
  args.epilogue.ptr_D = p.d;
  args.epilogue.dD = stride_d;
  args.hw_info.device_id = p.device;
  args.hw_info.sm_count = p.sm_count;
  return args;
}

// Launches one GEMM on `stream`. No allocation and no host synchronisation (graph-capturable): the TMA
// descriptors travel as kernel parameters, and these schedules need no workspace.
template <class Gemm, class Element>
cudaError_t Run(const GemmParams<Element>& p, cudaStream_t stream) {
  auto args = make_arguments<Gemm>(p);
  if constexpr (Gemm::FusionOp::IsPerColBiasSupported) args.epilogue.thread.bias_ptr = p.bias;
  if (Gemm::Device::get_workspace_size(args) != 0) return cudaErrorNotSupported;
  return run_cutlass<typename Gemm::Device, typename Gemm::Kernel>(args, stream);
}

}  // namespace oasr::gemm
