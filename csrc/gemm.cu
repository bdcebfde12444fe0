// TVM-FFI launcher of the gemm family: out = act(input . weight^T + bias) on Hopper tensor cores.
// One module per (dtype, epilogue, tile configuration), chosen by oasr/jit/gemm_config.py; the Python API
// (oasr/gemm.py) validates the arguments and hands over [M, K], [N, K] and [M, N] views (a leading 1 reads the same:
// csrc/gemm_sm90.h's Batched). The direct schedule (3) runs group_gemm's own kernel over one group of every row, its
// epilogue in registers: the activations, and GLU (epilogue 6: weight [2N, K], out [M, N], value * sigmoid(gate)).
// The tail schedule (4) runs include/oasr/gemm/sm90_gemm_tail.cuh: one CTA per 128 x N tile, the epilogue mostly
// under the tile's last products.
#include <oasr/gemm/sm90_gemm_tail.cuh>
#include <oasr/gemm/sm90_group_gemm_direct.cuh>

#include "gemm_epilogue.h"
#include "group_gemm_sm90.h"

namespace {

#if OASR_GEMM_SCHEDULE >= 3  // the family's own kernels: their epilogue codes, plain (0) read as kNone
constexpr auto kEpilogue = static_cast<oasr::gemm::direct::Epilogue>(OASR_GEMM_EPILOGUE < 1 ? 1 : OASR_GEMM_EPILOGUE);
#endif

#if OASR_GEMM_SCHEDULE == 3
static_assert(OASR_GEMM_TILE_M == 128 && OASR_GEMM_TILE_N == 128 && OASR_GEMM_TILE_K == 64 &&
                  OASR_GEMM_CLUSTER_M == 1 && OASR_GEMM_CLUSTER_N == 1,
              "the direct kernel's tiles are 128 x 128 x 64, without clusters");
constexpr bool kGlu = kEpilogue == oasr::gemm::direct::Epilogue::kGlu;
constexpr int kStages = OASR_GEMM_STAGES > 0 ? OASR_GEMM_STAGES : oasr::gemm::direct::kStages;

void run_direct(TensorView output, TensorView input, TensorView weight, Optional bias) {
  using Element = oasr::gemm::config::Element;
  oasr::gemm::GroupGemmParams<Element> p = oasr::gemm::group_operands<Element>(output, input, weight);
  const oasr::gemm::Batched in{input}, w{weight}, out{output};
  const int64_t m = in.size(1), k = in.size(2), n = out.size(2), weight_rows = w.size(1);
  TVM_FFI_ICHECK(in.size(0) == 1 && w.size(0) == 1 && out.size(0) == 1 && out.size(1) == m && w.size(2) == k &&
                 weight_rows == (kGlu ? 2 * n : n))
      << "expected out [M, N], input [M, K] and weight [" << (kGlu ? "2N" : "N") << ", K] (or each with a leading 1)";
  TVM_FFI_ICHECK(m > 0 && n > 0 && k > 0 && m < (1LL << 31) && weight_rows < (1LL << 31) && k < (1LL << 31))
      << "extents must be positive and below 2^31 (the Python API handles empty problems)";
  if (bias.has_value()) {
    TensorView v = bias.value();
    TVM_FFI_ICHECK(v.ndim() == 1 && v.size(0) == weight_rows && (weight_rows == 1 || v.stride(0) == 1) &&
                   v.dtype() == oasr::gemm::config::kDLType)
        << "`bias` must be a contiguous vector of the weight's rows, of the module's dtype";
    p.bias = data_ptr<const Element>(v);
    p.group_stride_bias = weight_rows;
  }
  const cudaStream_t stream = get_stream(input.device());
  const cudaError_t status =
      bias.has_value() ? oasr::gemm::RunDirectGroup<Element, kStages, true, kEpilogue>(p, false, stream)
                       : oasr::gemm::RunDirectGroup<Element, kStages, false, kEpilogue>(p, false, stream);
  CHECK_CUDA_SUCCESS(status, "gemm kernel launch");
}
#elif OASR_GEMM_SCHEDULE == 4
static_assert(OASR_GEMM_TILE_M == 128 && OASR_GEMM_TILE_N % 64 == 0 && OASR_GEMM_TILE_N >= 128 &&
                  OASR_GEMM_TILE_N <= 256 && OASR_GEMM_TILE_K == 64 && OASR_GEMM_CLUSTER_M == 1 &&
                  OASR_GEMM_CLUSTER_N == 1 && OASR_GEMM_EPILOGUE <= 5,
              "the tail kernel's tiles are 128 x {128, 192, 256} x 64, without clusters, and it has no GLU");

struct TailGemm {};  // run_gemm's `Gemm` for the tail kernel: the Run below launches it
#endif

}  // namespace

#if OASR_GEMM_SCHEDULE == 4
namespace oasr::gemm {

// run_gemm's launch, for the tail kernel: one GEMM (oasr/gemm.py passes [M, K], [N, K] and [M, N] views).
template <>
cudaError_t Run<TailGemm, config::Element>(const GemmParams<config::Element>& p, cudaStream_t stream) {
  using Element = config::Element;
  TVM_FFI_ICHECK(p.batch == 1) << "the tail kernel computes one GEMM, not a batch";
  return p.bias != nullptr ? tail::RunTail<Element, OASR_GEMM_TILE_N, true, kEpilogue>(p, stream)
                           : tail::RunTail<Element, OASR_GEMM_TILE_N, false, kEpilogue>(p, stream);
}

}  // namespace oasr::gemm
#endif

// `epilogue` names the one this module was built for (so a call states what it computes). Returns 0 once launched, or
// (launching nothing) which operands TMA cannot address as they are: 1 input, 2 weight, 4 out, 8 a bias whose
// elements are not contiguous, for oasr/gemm.py to pass padded copies instead (the usual call costs it no check).
int64_t gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue) {
  TVM_FFI_ICHECK(epilogue == OASR_GEMM_EPILOGUE) << "this gemm module computes epilogue " << OASR_GEMM_EPILOGUE
                                                 << ", not " << epilogue;
  TVM_FFI_ICHECK(OASR_GEMM_EPILOGUE != 0 || !bias.has_value()) << "the plain epilogue takes no bias";
  const bool strided_bias = bias.has_value() && bias.value().ndim() == 1 && bias.value().size(0) > 1 &&
                            bias.value().stride(0) != 1;
  if (const int64_t refused = oasr::gemm::unaddressable(input, weight, output) | (strided_bias ? 8 : 0)) return refused;
#if OASR_GEMM_SCHEDULE == 3
  run_direct(output, input, weight, bias);
#elif OASR_GEMM_SCHEDULE == 4
  oasr::gemm::run_gemm<TailGemm>(output, input, weight, bias, "gemm kernel launch");
#else
  namespace config = oasr::gemm::config;
  oasr::gemm::run_gemm<config::Gemm<config::Epilogue>>(output, input, weight, bias, "gemm kernel launch");
#endif
  return 0;
}
