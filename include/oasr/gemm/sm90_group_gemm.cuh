// Hopper (sm90a) grouped GEMM through CUTLASS 3.x: D[rows of g] = A[rows of g] . B[g]^T for every group g,
// with the groups' row ranges known only on the device.
//
// Layout: A is [L, K] row-major, the groups' rows concatenated; `offsets` [G] int32 holds each group's end
// row (cumulative, on the device); B is [G, N, K] K-major (a stack of nn.Linear weights); D is [L, N]
// row-major. Row strides are runtime values that TMA needs to be multiples of 16 bytes.
//
// Kernels, launched back to back on one stream (nothing is read back to the host, so a CUDA graph
// replays them with whatever offsets the device holds):
//   1. GroupSetupKernel: one thread per group turns the offsets into that group's problem shape
//      (rows, N, K), its A/B/D pointers and strides, written into a workspace cached per shape.
//      Offsets that decrease or end past L are clamped and raise a flag in a host-mapped int.
//   2. CUTLASS's ptr-array TMA warp-specialized kernel (cooperative or ping-pong), persistent over
//      the SMs: its scheduler reads the problem shapes from the device and walks the groups' tiles
//      (an empty group has none); each CTA rewrites its TMA descriptors when it enters a new group.
//      It runs behind GroupGemmAfterSetup, which first waits on the setup kernel (griddepcontrol.wait).
// So both may be launched with programmatic dependent launch (`pdl`): each kernel's CTAs become resident
// while the one before it runs, hiding the launch gaps (a CUDA graph keeps those edges).
//
// Epilogue: plain (D = acc), or acc + bias[g][n] through CUTLASS's row broadcast given an array of
// per-group bias pointers (which the setup kernel fills too), computed in fp32 and rounded once.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <cstdint>

#include "oasr/common/grid_dependency.cuh"
#include "sm90_gemm.cuh"

namespace oasr::gemm {

// ---------------------------------------------------------------------------------------------
// The kernel: the schedules of sm90_gemm.cuh in their ptr-array form.
// ---------------------------------------------------------------------------------------------

template <class Schedule>
struct PtrArraySchedule;
template <>
struct PtrArraySchedule<Cooperative> {
  using Mainloop = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
};
template <>
struct PtrArraySchedule<PingPong> {
  using Mainloop = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

// D = acc + bias[g][n]: the row broadcast reads group g's bias through an array of per-group pointers.
template <class Element, class TileShape>
using GroupBiasEpilogue = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, Element, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch,
    cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, Element*, float, cute::Stride<cute::_0, cute::_1, cute::_0>,
                                                1>>;  // any N: the bias rows need no 16-byte alignment

template <class Element, class TileShape, class ClusterShape, class Schedule, bool Bias>
struct Sm90GroupGemm {
  static constexpr int kAlignment = 16 / sizeof(Element);
  static constexpr bool kBias = Bias;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (M, N, K) per group
  using Policy = PtrArraySchedule<Schedule>;
  using FusionOp = cute::conditional_t<Bias, GroupBiasEpilogue<Element, TileShape>,
                                       cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,  //
      void, cutlass::layout::RowMajor*, kAlignment,                    // no C operand
      Element, cutlass::layout::RowMajor*, kAlignment,                 // D
      typename Policy::Epilogue, FusionOp>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,  //
      Element, cutlass::layout::RowMajor*, kAlignment,       // A
      Element, cutlass::layout::ColumnMajor*, kAlignment,    // B, K-major
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Policy::Mainloop>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Cluster = ClusterShape;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

// ---------------------------------------------------------------------------------------------
// The workspace: per-group arrays the setup kernel writes and CUTLASS reads, then CUTLASS's own
// (a TMA descriptor per SM and operand). One buffer, cached by the caller per device and shape.
// ---------------------------------------------------------------------------------------------

template <class Gemm>
struct GroupWorkspace {
  using Element = typename Gemm::Kernel::ElementA;
  typename Gemm::Shape* shapes;
  const Element** a;
  const Element** b;
  Element** d;
  const Element** bias;
  typename Gemm::StrideA* stride_a;
  typename Gemm::StrideB* stride_b;
  typename Gemm::StrideD* stride_d;
  void* cutlass;  // CUTLASS's part

  static constexpr size_t kAlign = 128;  // CUTLASS's tensor-map workspace alignment
  static size_t round(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  // Bytes of the per-group arrays for `groups` groups (CUTLASS's part follows them).
  static size_t arrays_bytes(int groups) {
    const size_t g = static_cast<size_t>(groups);
    return round(g * sizeof(typename Gemm::Shape)) + 4 * round(g * sizeof(void*)) +
           round(g * sizeof(typename Gemm::StrideA)) + round(g * sizeof(typename Gemm::StrideB)) +
           round(g * sizeof(typename Gemm::StrideD));
  }

  GroupWorkspace(void* base, int groups) {
    const size_t g = static_cast<size_t>(groups);
    char* p = static_cast<char*>(base);
    auto take = [&](size_t bytes) {
      char* q = p;
      p += round(bytes);
      return q;
    };
    shapes = reinterpret_cast<typename Gemm::Shape*>(take(g * sizeof(typename Gemm::Shape)));
    a = reinterpret_cast<const Element**>(take(g * sizeof(void*)));
    b = reinterpret_cast<const Element**>(take(g * sizeof(void*)));
    d = reinterpret_cast<Element**>(take(g * sizeof(void*)));
    bias = reinterpret_cast<const Element**>(take(g * sizeof(void*)));
    stride_a = reinterpret_cast<typename Gemm::StrideA*>(take(g * sizeof(typename Gemm::StrideA)));
    stride_b = reinterpret_cast<typename Gemm::StrideB*>(take(g * sizeof(typename Gemm::StrideB)));
    stride_d = reinterpret_cast<typename Gemm::StrideD*>(take(g * sizeof(typename Gemm::StrideD)));
    cutlass = p;
  }
};

// One grouped problem: extents, element strides, pointers and where to raise the offsets' flag.
template <class Element>
struct GroupGemmParams {
  int groups = 0, rows = 0, n = 0, k = 0;  // rows: L
  const int32_t* offsets = nullptr;        // [groups], cumulative end rows
  const Element* a = nullptr;              // [rows][k]
  int64_t lda = 0;
  const Element* b = nullptr;  // [groups][n][k]
  int64_t ldb = 0, group_stride_b = 0;
  Element* d = nullptr;  // [rows][n]
  int64_t ldd = 0;
  const Element* bias = nullptr;  // [groups][n] (contiguous rows) or null
  int64_t group_stride_bias = 0;
  int* error = nullptr;  // host-mapped; bit 0 set when the offsets were clamped
  int device = 0, sm_count = 0;
};

// ---------------------------------------------------------------------------------------------
// The setup kernel.
// ---------------------------------------------------------------------------------------------

// Group g's rows, [start, end), from the device offsets, clamped into [0, rows] and made non-decreasing
// against the previous offset (a clamped group computes a subset of rows; the flag says so).
__device__ __forceinline__ void group_rows(const int32_t* offsets, int g, int rows, int& start, int& end,
                                           bool& bad) {
  const int lo = g > 0 ? offsets[g - 1] : 0;
  const int hi = offsets[g];
  bad = lo < 0 || hi < lo || hi > rows;
  start = min(max(lo, 0), rows);
  end = min(max(hi, start), rows);
}

template <class Gemm, class Element>
__global__ void GroupSetupKernel(GroupGemmParams<Element> p, GroupWorkspace<Gemm> w) {
  grid_dependency_trigger();  // the grouped kernel may start: it waits for this grid's completion anyway
  grid_dependency_wait();     // the offsets, and the last call's grouped kernel done with the workspace
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= p.groups) return;
  int start, end;
  bool bad;
  group_rows(p.offsets, g, p.rows, start, end, bad);
  if (bad) atomicOr(p.error, 1);
  w.shapes[g] = typename Gemm::Shape{end - start, p.n, p.k};
  w.a[g] = p.a + static_cast<int64_t>(start) * p.lda;
  w.b[g] = p.b + static_cast<int64_t>(g) * p.group_stride_b;
  w.d[g] = p.d + static_cast<int64_t>(start) * p.ldd;
  w.bias[g] = p.bias != nullptr ? p.bias + g * p.group_stride_bias : nullptr;
  typename Gemm::StrideA sa{};
  cute::get<0>(sa) = p.lda;
  w.stride_a[g] = sa;
  typename Gemm::StrideB sb{};
  cute::get<0>(sb) = p.ldb;
  w.stride_b[g] = sb;
  typename Gemm::StrideD sd{};
  cute::get<0>(sd) = p.ldd;
  w.stride_d[g] = sd;
}

// ---------------------------------------------------------------------------------------------
// The grouped kernel's entry point: cutlass::device_kernel with a wait on the setup kernel first.
// ---------------------------------------------------------------------------------------------

template <class Kernel>
__global__ void __launch_bounds__(Kernel::MaxThreadsPerBlock, Kernel::MinBlocksPerMultiprocessor)
    GroupGemmAfterSetup(CUTLASS_GRID_CONSTANT typename Kernel::Params const params) {
  extern __shared__ char smem[];
  grid_dependency_wait();  // every read of the workspace comes after this
  Kernel op;
  op(params, smem);
}

// ---------------------------------------------------------------------------------------------
// The launcher.
// ---------------------------------------------------------------------------------------------

// `along_n`: the scheduler walks a row block's N tiles before the next row block, so the CTAs of one wave
// share that block's A in L2. Along M (CUTLASS's default for groups) a wave covers many row blocks of one N
// tile and every N tile re-reads A from DRAM: tall groups at K=2048 ran DRAM-bound at 84% of its peak.
template <class Gemm>
typename Gemm::Kernel::Arguments make_group_arguments(int groups, const GroupWorkspace<Gemm>& w, int device,
                                                      int sm_count, bool along_n) {
  using RasterOrder = typename Gemm::Kernel::TileScheduler::RasterOrderOptions;
  typename Gemm::Kernel::Arguments args{};
  args.scheduler.raster_order = along_n ? RasterOrder::AlongN : RasterOrder::AlongM;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {groups, w.shapes, nullptr};  // shapes live on the device only
  args.mainloop = {w.a, w.stride_a, w.b, w.stride_b};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = nullptr;
  args.epilogue.ptr_D = w.d;
  args.epilogue.dD = w.stride_d;
  if constexpr (Gemm::kBias) {
    using Element = typename Gemm::Kernel::ElementA;
    args.epilogue.thread = {{}, {w.bias, Element(0), {}}, {}};  // (accumulator, bias row, plus)
  }
  args.hw_info.device_id = device;
  args.hw_info.sm_count = sm_count;
  return args;
}

// Bytes of workspace a call with `groups` groups needs (cache it: it depends on the device's SM count only
// beyond `groups`).
template <class Gemm>
size_t GroupWorkspaceSize(int groups, int device, int sm_count) {
  GroupWorkspace<Gemm> w(nullptr, groups);
  auto args = make_group_arguments<Gemm>(groups, w, device, sm_count, false);  // the order changes no size
  return GroupWorkspace<Gemm>::arrays_bytes(groups) + Gemm::Kernel::get_workspace_size(args);
}

// Launches the setup kernel, then the grouped GEMM, on `stream`: no allocation, no host synchronisation.
// `pdl`: both with programmatic dependent launch, each waiting on the kernel before it on the device (the
// setup kernel on whatever precedes the call, which may still read the workspace). `workspace`:
// GroupWorkspaceSize bytes, 128-byte aligned, owned by the caller.
template <class Gemm, class Element>
cudaError_t RunGroup(const GroupGemmParams<Element>& p, void* workspace, bool pdl, cudaStream_t stream) {
  using Kernel = typename Gemm::Kernel;
  GroupWorkspace<Gemm> w(workspace, p.groups);
  constexpr unsigned kSetupThreads = 256;
  GroupGemmParams<Element> setup_params = p;
  void* setup_args[] = {&setup_params, &w};
  cudaError_t error = launch_kernel(reinterpret_cast<const void*>(&GroupSetupKernel<Gemm, Element>),
                                    (p.groups + kSetupThreads - 1) / kSetupThreads, kSetupThreads, 0, stream, pdl,
                                    setup_args);
  if (error != cudaSuccess) return error;
  // Groups taller than they are wide on average (A's row block outweighs B's N x K) walk N first.
  const bool along_n = static_cast<int64_t>(p.rows) > static_cast<int64_t>(p.groups) * p.n;
  auto args = make_group_arguments<Gemm>(p.groups, w, p.device, p.sm_count, along_n);
  // Launches nothing for these collectives, so the setup kernel stays the grouped kernel's direct
  // predecessor (what programmatic dependent launch overlaps).
  if (Kernel::initialize_workspace(args, w.cutlass, stream) != cutlass::Status::kSuccess) {
    return cudaErrorInvalidValue;
  }
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, w.cutlass);
  const void* kernel = reinterpret_cast<const void*>(&GroupGemmAfterSetup<Kernel>);
  constexpr int kSmem = Kernel::SharedStorageSize;
  static int allowed[kMaxDevices] = {};
  error = allow_dynamic_shared_memory(kernel, kSmem, allowed);
  if (error != cudaSuccess) return error;
  const dim3 cluster(cute::size<0>(typename Gemm::Cluster{}), cute::size<1>(typename Gemm::Cluster{}), 1);
  void* kernel_args[] = {&params};
  return launch_kernel(kernel, Kernel::get_grid_shape(params), Kernel::get_block_shape(), kSmem, stream, pdl,
                       kernel_args, cluster);
}

}  // namespace oasr::gemm
