// dev/ module of the tail-split kernel (dev/gemm/tail.cuh), with csrc/gemm.cu's entry point: dev/gemm/tail.py
// builds it per (dtype, epilogue, OASR_TAIL_BN, OASR_TAIL_BLOCKS) and times it against cuBLAS and the rule's pick.
#include "gemm_epilogue.h"
#include "tail.cuh"

#ifndef OASR_TAIL_BLOCKS
#error "dev/gemm/tail.cu needs -DOASR_TAIL_BLOCKS=<k-blocks issued in two parts> (dev/gemm/tail.py)"
#endif

namespace {

constexpr auto kEpilogue = static_cast<oasr::gemm::direct::Epilogue>(OASR_GEMM_EPILOGUE < 1 ? 1 : OASR_GEMM_EPILOGUE);
#ifndef OASR_TAIL_BN
#define OASR_TAIL_BN 192
#endif

}  // namespace

int64_t gemm(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t epilogue) {
  TVM_FFI_ICHECK(epilogue == OASR_GEMM_EPILOGUE) << "this gemm module computes epilogue " << OASR_GEMM_EPILOGUE;
  if (const int64_t refused = oasr::gemm::unaddressable(input, weight, output)) return refused;
  using Element = oasr::gemm::config::Element;
  const oasr::gemm::Batched a = oasr::gemm::icheck_tma_view(input, "a"), b = oasr::gemm::icheck_tma_view(weight, "b"),
                            d = oasr::gemm::icheck_tma_view(output, "out");
  TVM_FFI_ICHECK(a.size(0) == 1 && b.size(0) == 1 && d.size(0) == 1 && b.size(2) == a.size(2) &&
                 d.size(1) == a.size(1) && d.size(2) == b.size(1))
      << "expected out [M, N], input [M, K], weight [N, K]";
  oasr::gemm::GemmParams<Element> p;
  p.m = static_cast<int>(a.size(1));
  p.n = static_cast<int>(b.size(1));
  p.k = static_cast<int>(a.size(2));
  p.a = data_ptr<const Element>(input);
  p.lda = oasr::gemm::row_stride(a);
  p.b = data_ptr<const Element>(weight);
  p.ldb = oasr::gemm::row_stride(b);
  p.d = data_ptr<Element>(output);
  p.ldd = oasr::gemm::row_stride(d);
  if (bias.has_value()) p.bias = data_ptr<const Element>(bias.value());
  const cudaStream_t stream = get_stream(input.device());
  const cudaError_t status =
      bias.has_value()
          ? oasr::gemm::tail::RunTail<Element, OASR_TAIL_BN, OASR_TAIL_BLOCKS, true, kEpilogue>(p, stream)
          : oasr::gemm::tail::RunTail<Element, OASR_TAIL_BN, OASR_TAIL_BLOCKS, false, kEpilogue>(p, stream);
  CHECK_CUDA_SUCCESS(status, "tail gemm kernel launch");
  return 0;
}
