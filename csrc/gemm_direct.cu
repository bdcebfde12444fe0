// TVM-FFI launcher of the gemm family's direct schedule: group_gemm's own kernel (sm90_group_gemm_direct.cuh) over
// one group of every row, its epilogue in registers: the activations, and GLU (weight [2N, K], out [M, N],
// value * sigmoid(gate)). oasr/jit/gemm_config.py's DIRECT; the Python API (oasr/gemm.py) validates the arguments and
// hands over [M, K], [N, K] and [M, N] views TMA can address.
#include <oasr/gemm/sm90_group_gemm_direct.cuh>

#include "gemm_epilogue.h"
#include "group_gemm_sm90.h"

namespace {

static_assert(OASR_GEMM_TILE_M == 128 && OASR_GEMM_TILE_N == 128 && OASR_GEMM_TILE_K == 64 &&
                  OASR_GEMM_CLUSTER_M == 1 && OASR_GEMM_CLUSTER_N == 1,
              "the direct kernel's tiles are 128 x 128 x 64, without clusters");
constexpr auto kEpilogue = oasr::gemm::config::kOwnEpilogue;
constexpr bool kGlu = kEpilogue == oasr::gemm::direct::Epilogue::kGlu;
constexpr int kStages = OASR_GEMM_STAGES > 0 ? OASR_GEMM_STAGES : oasr::gemm::direct::kStages;

}  // namespace

void gemm(TensorView output, TensorView input, TensorView weight, Optional bias) {
  using Element = oasr::gemm::config::Element;
  TVM_FFI_ICHECK(oasr::gemm::config::kModuleEpilogue != oasr::gemm::config::ModuleEpilogue::kPlain ||
                 !bias.has_value())
      << "the plain epilogue takes no bias";
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
