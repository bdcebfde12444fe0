// Hopper (sm90a) 2-D convolution on tensor cores through CUTLASS 3.x's implicit GEMM (fprop):
// out[n, p, q, k] = act(bias[k] + sum_{r, s, c} weight[k, r, s, c] * x[n, p * sh - ph + r, q * sw - pw + s, c]).
//
// Layout: x [N, H, W, C] (NHWC), weight [K, R, S, C] (KRSC), out [N, P, Q, K] (NHWC), all packed.
// As a GEMM: M = N * P * Q output pixels, N = K output channels, K = R * S * C. TMA's im2col mode
// gathers each A tile (the windows of a tile of pixels, zero-filled in the padding) straight from
// x; C and K must be multiples of 8 (16-byte rows for TMA), which is why C = 1 has a direct kernel.
//
// Kernel: CUTLASS's implicit-GEMM mainloop (a producer warp streams A and B tiles into a ring of
// shared-memory stages; a consumer warpgroup runs wgmma into fp32 accumulators); CUTLASS 4.2 offers
// only the non-persistent schedule for conv (one CTA per output tile). Epilogue: the visitor tree
// act(acc + bias[k]) in fp32, rounded once (a null bias reads as 0), stored by TMA.
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
// The kernel: CUTLASS's conv and epilogue builders for one (dtype, activation, tile, cluster).
// ---------------------------------------------------------------------------------------------

template <class Element, template <class> class Act, class TileShape, class ClusterShape>
struct Sm90Conv2d {
  static constexpr int kAlignment = 16 / sizeof(Element);  // elements per 16 bytes: TMA's unit
  static constexpr auto kFprop = cutlass::conv::Operator::kFprop;
  using Layout = cutlass::layout::TensorNHWC;
  using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, Element, float, Element, void, float>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,  //
      void, Layout, kAlignment,                                       // no C operand
      Element, Layout, kAlignment,                                    // D
      cutlass::epilogue::TmaWarpSpecialized, FusionOp>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, kFprop,  //
      Element, Layout, kAlignment,                                  // activations
      Element, Layout, kAlignment,                                  // filters
      float, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;

  using ProblemShape = cutlass::conv::ConvProblemShape<kFprop, CollectiveMainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
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
