// TVM-FFI glue shared by the tensor-core launchers (gemm, bmm, group_gemm): the configuration a JIT module was built
// for (-D flags chosen per call by oasr/jit/gemm_config.py) and one launcher over batched [L, rows, cols] views.
//
// Flags: OASR_GEMM_DTYPE (1 float16, 2 bfloat16), OASR_GEMM_TILE_{M,N,K}, OASR_GEMM_CLUSTER_{M,N},
// OASR_GEMM_STAGES (0: auto), OASR_GEMM_B_NMAJOR (0: B is [L, N, K], 1: B is [L, K, N]); a CUTLASS module's
// schedule is csrc/gemm_cutlass.h's.
#pragma once

#include <oasr/common/launch.cuh>
#include <oasr/gemm/sm90_gemm.cuh>

#include "tvm_ffi_utils.h"

#if !defined(OASR_GEMM_DTYPE) || !defined(OASR_GEMM_TILE_M) || !defined(OASR_GEMM_TILE_N) || \
    !defined(OASR_GEMM_TILE_K) || !defined(OASR_GEMM_CLUSTER_M) || !defined(OASR_GEMM_CLUSTER_N) ||  \
    !defined(OASR_GEMM_STAGES) || !defined(OASR_GEMM_B_NMAJOR)
#error "a gemm/bmm module is built for one configuration: oasr/jit/gemm_config.py passes its -D flags"
#endif

namespace oasr::gemm::config {

using Element = cute::conditional_t<OASR_GEMM_DTYPE == 1, cutlass::half_t, cutlass::bfloat16_t>;
constexpr DLDataType kDLType = OASR_GEMM_DTYPE == 1 ? dl_float16 : dl_bfloat16;
using Tile = cute::Shape<cute::Int<OASR_GEMM_TILE_M>, cute::Int<OASR_GEMM_TILE_N>, cute::Int<OASR_GEMM_TILE_K>>;
using Cluster = cute::Shape<cute::Int<OASR_GEMM_CLUSTER_M>, cute::Int<OASR_GEMM_CLUSTER_N>, cute::_1>;
using LayoutB = cute::conditional_t<OASR_GEMM_B_NMAJOR == 1, NMajorB, KMajorB>;

}  // namespace oasr::gemm::config

namespace oasr::gemm {

constexpr int64_t kAlign = 16 / sizeof(config::Element);  // elements per 16 bytes

// The launchers' [L, rows, cols] reading of a 2-D or 3-D view: a 2-D one is a single batch (oasr/gemm.py passes
// its operands so, which spares the Python layer a view per operand and call).
struct Batched {
  TensorView t;
  int64_t size(int d) const { return t.ndim() == 3 ? t.size(d) : d == 0 ? 1 : t.size(d - 1); }
  int64_t stride(int d) const { return t.ndim() == 3 ? t.stride(d) : d == 0 ? 0 : t.stride(d - 1); }
};

// Whether TMA can address `t`, a 2-D or 3-D view, as it is (oasr/_tma.py's addressable): its last dimension
// contiguous, its other strides and its address multiples of 16 bytes (dimensions of size 1 excepted).
inline bool tma_addressable(TensorView t) {
  if (t.ndim() != 2 && t.ndim() != 3) return false;
  const Batched v{t};
  return (v.size(2) <= 1 || v.stride(2) == 1) && (v.size(1) <= 1 || v.stride(1) % kAlign == 0) &&
         (v.size(0) <= 1 || v.stride(0) % kAlign == 0) && reinterpret_cast<uintptr_t>(data_ptr<char>(t)) % 16 == 0;
}

// Internal invariants (oasr/gemm.py and oasr/bmm.py make every tensor so, oasr/_tma.py): a 2-D or 3-D CUDA
// view of the module's dtype whose address and strides TMA can use (dimensions of size 1 excepted).
inline Batched icheck_tma_view(TensorView t, const char* name) {
  TVM_FFI_ICHECK((t.ndim() == 2 || t.ndim() == 3) && t.device().device_type == kDLCUDA &&
                 t.dtype() == config::kDLType)
      << "`" << name << "` must be a 2-D or 3-D CUDA tensor of " << dtype_name(config::kDLType);
  TVM_FFI_ICHECK(tma_addressable(t))
      << "`" << name << "` must have a contiguous last dimension and 16-byte aligned strides and address";
  return Batched{t};
}

// The row stride of `v` (one TMA accepts when there is a single row: it is never used).
inline int64_t row_stride(const Batched& v) {
  return v.size(1) > 1 ? v.stride(1) : (v.size(2) + kAlign - 1) / kAlign * kAlign;
}

// The batch stride of `v` (likewise for a single batch).
inline int64_t batch_stride(const Batched& v, int64_t ld) { return v.size(0) > 1 ? v.stride(0) : v.size(1) * ld; }

// d[l] = epilogue(a[l] . b[l]^T): a [L, M, K], b [L, N, K] (or [L, K, N] when B is N-major), d [L, M, N], or all
// three without L (one batch), by `Gemm` (csrc/gemm_cutlass.h's config::Gemm<Epilogue>, or the tail kernel).
template <class Gemm>
void run_gemm(TensorView d_view, TensorView a_view, TensorView b_view, Optional bias, const char* what) {
  using Element = config::Element;
  const Batched a = icheck_tma_view(a_view, "a");
  const Batched b = icheck_tma_view(b_view, "b");
  const Batched d = icheck_tma_view(d_view, "out");
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2);
  const int64_t n = OASR_GEMM_B_NMAJOR ? b.size(2) : b.size(1);
  TVM_FFI_ICHECK(b.size(0) == batch && (OASR_GEMM_B_NMAJOR ? b.size(1) : b.size(2)) == k)
      << "`b` does not match `a`'s batch and K";
  TVM_FFI_ICHECK(d.size(0) == batch && d.size(1) == m && d.size(2) == n) << "`out` must be [L, M, N] (or [M, N])";
  TVM_FFI_ICHECK(m > 0 && n > 0 && k > 0 && batch > 0 && m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31))
      << "extents must be positive and below 2^31 (the Python API handles empty problems)";
  GemmParams<Element> p;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.batch = static_cast<int>(batch);
  p.a = data_ptr<const Element>(a_view);
  p.lda = row_stride(a);
  p.b = data_ptr<const Element>(b_view);
  p.ldb = row_stride(b);
  p.d = data_ptr<Element>(d_view);
  p.ldd = row_stride(d);
  p.batch_stride_a = batch_stride(a, p.lda);
  p.batch_stride_b = batch_stride(b, p.ldb);
  p.batch_stride_d = batch_stride(d, p.ldd);
  if (bias.has_value()) {
    TensorView v = bias.value();
    TVM_FFI_ICHECK(v.ndim() == 1 && v.size(0) == n && (n == 1 || v.stride(0) == 1) && v.dtype() == config::kDLType)
        << "`bias` must be a contiguous [N] vector of the module's dtype";
    p.bias = data_ptr<const Element>(v);
  }
  p.device = a_view.device().device_id;
  p.sm_count = multiprocessor_count(p.device);  // the persistent schedulers size their grid by it
  cudaError_t status = Run<Gemm>(p, get_stream(a_view.device()));
  CHECK_CUDA_SUCCESS(status, what);
}

}  // namespace oasr::gemm
