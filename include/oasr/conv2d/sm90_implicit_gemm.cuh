// Hopper (sm90a) 2-D convolution on tensor cores through CUTLASS 3.x's implicit GEMM (fprop):
// out[n, p, q, k] = act(bias[k] + sum_{r, s, c} weight[k, r, s, c] * x[n, p * sh - ph + r, q * sw - pw + s, c]).
//
// Layout: x [N, H, W, C] (NHWC), weight [K, R, S, C] (KRSC), out [N, P, Q, K] (NHWC), all packed.
// As a GEMM: M = N * P * Q output pixels, N = K output channels, K = R * S * C. TMA's im2col mode
// gathers each A tile (the windows of a tile of pixels, zero-filled in the padding) straight from
// x; C and K must be multiples of 8 (16-byte rows for TMA), which is why C = 1 has a direct kernel.
//
// Kernel: CUTLASS's implicit-GEMM mainloop (a producer warp streams A and B tiles into a ring of
// shared-memory stages; consumer warpgroups run wgmma into fp32 accumulators), one CTA per output tile.
// CUTLASS 4.2's conv kernel has one consumer warpgroup (its dispatch policy refuses the cooperative
// schedule); TwoConsumerConv below runs the same mainloop with two, each on half of the tile's pixels, so
// that a 128x256 tile fits in registers. Epilogue: the visitor tree act(acc + bias[k]) in fp32, rounded
// once (a null bias reads as 0), stored by TMA.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/kernel_hardware_info.h>  // (before the conv headers, which use it undeclared)
#include <cutlass/conv/collective/collective_builder.hpp>
#include <cutlass/conv/convnd_problem_shape.hpp>
#include <cutlass/conv/device/conv_universal_adapter.hpp>
#include <cutlass/conv/kernel/conv_universal.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>

#include <cstdint>

#include "oasr/common/cutlass_launch.cuh"

namespace oasr::conv2d {

// ---------------------------------------------------------------------------------------------
// The two-consumer kernel: CUTLASS's non-persistent conv kernel with two consumer warpgroups.
// ---------------------------------------------------------------------------------------------

// The schedule tag of a mainloop run by TwoConsumerConv (a kind of CUTLASS's one-warpgroup schedule, so
// that its dispatch policy and ConvUniversal take it).
struct TwoConsumerSchedule : cutlass::conv::KernelImplicitTmaWarpSpecializedSm90 {};

// ConvUniversal's non-persistent kernel (its arguments, parameters, grid and shared storage; a
// block of 128 + size(TiledMma) threads) with the body of CUTLASS's cooperative GEMM kernel: warpgroup 0
// loads (its first warp issues the TMA copies), warpgroups 1 and 2 share each stage and the epilogue.
template <class ProblemShape, class Mainloop, class Epilogue>
struct TwoConsumerConv : cutlass::conv::kernel::ConvUniversal<ProblemShape, Mainloop, Epilogue, void> {
  using Base = cutlass::conv::kernel::ConvUniversal<ProblemShape, Mainloop, Epilogue, void>;
  using typename Base::ClusterShape;
  using typename Base::Params;
  using typename Base::SharedStorage;
  using typename Base::TileShape;
  using typename Base::TiledMma;
  static constexpr int kConsumerThreads = cute::size(TiledMma{});
  static_assert(kConsumerThreads == 2 * cutlass::NumThreadsPerWarpGroup, "a tiled MMA of two warpgroups");
  // setmaxnreg: the loader keeps 40 registers a thread so that each consumer thread gets 232 (128 fp32
  // accumulators of a 128x256 tile).
  static constexpr uint32_t kLoaderRegisters = 40;
  static constexpr uint32_t kConsumerRegisters = 232;

  CUTLASS_DEVICE void operator()(const Params& params, char* smem_buf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace cute;
    using MainloopPipeline = typename Mainloop::MainloopPipeline;
    using EpiLoadPipeline = typename Epilogue::LoadPipeline;
    using EpiStorePipeline = typename Epilogue::StorePipeline;
    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);
    const int thread_idx = static_cast<int>(threadIdx.x);
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int lane_idx = cutlass::canonical_lane_idx();
    const bool loads = cutlass::canonical_warp_group_idx() == 0;
    const bool loader = loads && warp_idx == 0;  // the warp that issues every copy
    const uint32_t cluster_rank = cute::block_rank_in_cluster();
    if (warp_idx == 0 && elect_one_sync()) {
      Mainloop::prefetch_tma_descriptors(params.mainloop);
      Epilogue::prefetch_tma_descriptors(params.epilogue);
    }

    typename MainloopPipeline::Params mainloop_params;
    if (loader) mainloop_params.role = MainloopPipeline::ThreadCategory::Producer;
    if (!loads) mainloop_params.role = MainloopPipeline::ThreadCategory::Consumer;
    mainloop_params.is_leader = thread_idx % cutlass::NumThreadsPerWarpGroup == 0;
    mainloop_params.num_consumers = kConsumerThreads;
    mainloop_params.transaction_bytes = params.mainloop.tma_transaction_bytes;
    MainloopPipeline mainloop_pipeline(shared.pipelines.mainloop, mainloop_params, ClusterShape{});

    typename EpiLoadPipeline::Params epi_load_params;
    if (loader) epi_load_params.role = EpiLoadPipeline::ThreadCategory::Producer;
    if (!loads) epi_load_params.role = EpiLoadPipeline::ThreadCategory::Consumer;
    epi_load_params.dst_blockid = cluster_rank;
    epi_load_params.producer_arv_count = cutlass::NumThreadsPerWarp;
    epi_load_params.consumer_arv_count = kConsumerThreads;
    if constexpr (Epilogue::RequiresTransactionBytes) {
      epi_load_params.transaction_bytes = params.epilogue.tma_transaction_bytes;
    }
    EpiLoadPipeline epi_load_pipeline(shared.pipelines.epi_load, epi_load_params);
    typename EpiStorePipeline::Params epi_store_params;
    epi_store_params.always_wait = true;
    EpiStorePipeline epi_store_pipeline(epi_store_params);

    // The loader starts each ring in the opposite phase: every stage is free.
    typename Mainloop::PipelineState mainloop_consume;
    typename Epilogue::LoadPipelineState epi_load_consume;
    auto mainloop_produce = cutlass::make_producer_start_state<MainloopPipeline>();
    auto epi_load_produce = cutlass::make_producer_start_state<EpiLoadPipeline>();
    auto epi_store_produce = cutlass::make_producer_start_state<EpiStorePipeline>();

    // The pipelines' barriers are initialised before any block of the cluster uses them.
    if constexpr (size(ClusterShape{}) > 1) {
      cluster_arrive_relaxed();
      cluster_wait();
    } else {
      __syncthreads();
    }

    const auto blk_shape = TileShape{};
    TiledMma tiled_mma;
    const auto problem_shape_MNKL = append<4>(params.problem_shape, Int<1>{});
    Mainloop mainloop;
    Epilogue epilogue(params.epilogue, shared.tensors.epilogue);
    auto load_inputs = mainloop.load_init(problem_shape_MNKL, params.mainloop);
    Tensor gA_mkl = get<0>(load_inputs);
    Tensor gB_nkl = get<1>(load_inputs);
    const auto blk_coord = make_coord(idx2crd(static_cast<int>(blockIdx.x), shape<2>(gA_mkl)),
                                      idx2crd(static_cast<int>(blockIdx.y), shape<2>(gB_nkl)), _, Int<0>{});
    auto k_tile_iter = make_coord_iterator(shape<3>(gA_mkl));
    const int k_tile_count = size<3>(gA_mkl);

    if (loads) {
      cutlass::arch::warpgroup_reg_dealloc<kLoaderRegisters>();
      if (loader) {
        cutlass::arch::wait_on_dependent_grids();
        mainloop.load(params.mainloop, mainloop_pipeline, mainloop_produce, load_inputs, blk_coord, k_tile_iter,
                      k_tile_count, lane_idx, cluster_rank, shared.tensors.mainloop);
        mainloop_produce.advance(k_tile_count);
        mainloop.load_tail(mainloop_pipeline, mainloop_produce);
        if (epilogue.is_producer_load_needed()) {
          __syncwarp();
          epi_load_produce = epilogue.load(epi_load_pipeline, epi_load_produce, problem_shape_MNKL, blk_shape,
                                           blk_coord, tiled_mma, lane_idx, shared.tensors.epilogue);
          epilogue.load_tail(epi_load_pipeline, epi_load_produce);
        }
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
      const int mma_thread_idx = thread_idx - cutlass::NumThreadsPerWarpGroup;
      Tensor accumulators = partition_fragment_C(tiled_mma, take<0, 2>(blk_shape));
      mainloop.mma(mainloop_pipeline, mainloop_consume, accumulators, k_tile_count, mma_thread_idx,
                   shared.tensors.mainloop, params.mainloop);
      mainloop.mma_tail(mainloop_pipeline, mainloop_consume, k_tile_count);
      // The epilogue's staging shares the stages' memory (a union): both warpgroups' products must have
      // read it first.
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
      cutlass::arch::launch_dependent_grids();
      auto [epi_load_next, epi_store_next] =
          epilogue.store(epi_load_pipeline, epi_load_consume, epi_store_pipeline, epi_store_produce,
                         problem_shape_MNKL, blk_shape, blk_coord, accumulators, tiled_mma, mma_thread_idx,
                         shared.tensors.epilogue);
      epilogue.store_tail(epi_load_pipeline, epi_load_next, epi_store_pipeline, epi_store_next);
    }
#endif
  }
};

// ---------------------------------------------------------------------------------------------
// The kernel: CUTLASS's conv and epilogue builders for one (dtype, activation, tile, cluster,
// consumer warpgroups).
// ---------------------------------------------------------------------------------------------

template <class Element, template <class> class Act, class TileShape, class ClusterShape, int Consumers>
struct Sm90Conv2d {
  static_assert(Consumers == 1 || Consumers == 2, "one or two consumer warpgroups");
  static constexpr int kAlignment = 16 / sizeof(Element);  // elements per 16 bytes: TMA's unit
  static constexpr auto kFprop = cutlass::conv::Operator::kFprop;
  using Layout = cutlass::layout::TensorNHWC;
  using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, Element, float, Element, void, float>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,  //
      void, Layout, kAlignment,                                       // no C operand
      Element, Layout, kAlignment,                                    // D
      cute::conditional_t<Consumers == 1, cutlass::epilogue::TmaWarpSpecialized,
                          cutlass::epilogue::TmaWarpSpecializedCooperative>,
      FusionOp>::CollectiveOp;

  // CUTLASS's one-warpgroup mainloop: its copies, shared-memory layouts and stage count.
  using OneConsumerMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, kFprop,  //
      Element, Layout, kAlignment,                                  // activations
      Element, Layout, kAlignment,                                  // filters
      float, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using Policy = typename OneConsumerMainloop::DispatchPolicy;
  static constexpr int kSpatialDims = Policy::NumSpatialDimensions;
  // The same mainloop with the tile's pixels split between two warpgroups.
  using TwoConsumerMainloop = cutlass::conv::collective::CollectiveConv<
      cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<kFprop, Policy::Stages, kSpatialDims, ClusterShape,
                                                                    TwoConsumerSchedule>,
      TileShape, Element, Element,
      decltype(cute::make_tiled_mma(
          cute::GMMA::ss_op_selector<Element, Element, float, TileShape, cute::GMMA::Major::K, cute::GMMA::Major::K>(),
          cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{})),
      cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<typename OneConsumerMainloop::GmemTiledCopyA,
                                                                    typename OneConsumerMainloop::SmemLayoutA>,
      cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<typename OneConsumerMainloop::GmemTiledCopyB,
                                                                    typename OneConsumerMainloop::SmemLayoutB>>;
  using CollectiveMainloop = cute::conditional_t<Consumers == 1, OneConsumerMainloop, TwoConsumerMainloop>;

  using ProblemShape = cutlass::conv::ConvProblemShape<kFprop, kSpatialDims>;
  using Kernel =
      cute::conditional_t<Consumers == 1,
                          cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>,
                          TwoConsumerConv<ProblemShape, CollectiveMainloop, CollectiveEpilogue>>;
  using Device = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
  using StrideD = typename Kernel::StrideD;
};

// ---------------------------------------------------------------------------------------------
// The launcher.
// ---------------------------------------------------------------------------------------------

template <class Element>
struct ImplicitGemmParams {
  const Element* input = nullptr;   // [n, h, w, c], packed
  const Element* weight = nullptr;  // [k, r, s, c], packed
  const Element* bias = nullptr;    // [k] or null
  Element* output = nullptr;        // [n, p, q, k], packed
  int n = 0, h = 0, w = 0, c = 0, k = 0, r = 0, s = 0;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  int device = 0, sm_count = 0;
};

// Launches one convolution on `stream`: no allocation, no host synchronisation (graph-capturable;
// the TMA descriptors travel as kernel parameters). cudaErrorNotSupported when CUTLASS cannot
// implement the shape (the Python API sends only shapes it can).
template <class Conv, class Element>
cudaError_t RunImplicitGemm(const ImplicitGemmParams<Element>& p, cudaStream_t stream) {
  using ProblemShape = typename Conv::ProblemShape;
  ProblemShape shape(cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, p.c}, {p.k, p.r, p.s, p.c},
                     {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, {p.stride_h, p.stride_w}, {1, 1}, 1);
  // D's strides over (q, p, n) from the packed [n, p, q, k] output.
  typename Conv::StrideD stride_d{};
  cute::for_each(cute::make_seq<cute::rank<0>(typename Conv::StrideD{})>{}, [&](auto i) {
    cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
  });
  typename Conv::Device::Arguments args(shape, {p.input, p.weight}, {{}, nullptr, stride_d, p.output, stride_d});
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.thread.bias_ptr = p.bias;
  args.hw_info.device_id = p.device;
  args.hw_info.sm_count = p.sm_count;
  if (Conv::Device::get_workspace_size(args) != 0) return cudaErrorNotSupported;
  if (Conv::Device::can_implement(args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  return run_cutlass<typename Conv::Device, typename Conv::Kernel>(args, stream);
}

}  // namespace oasr::conv2d
