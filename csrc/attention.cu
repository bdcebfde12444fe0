// TVM-FFI launchers of the attention family: attention and the relative-position form (ESPnet's shifted p, WeNet's
// unshifted one). The Python API (oasr/attention.py) validates every argument and passes views the kernel can copy
// in 16-byte pieces; what a launcher assumes it checks with TVM_FFI_ICHECK, before any launch.
#include <oasr/attention.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "tvm_ffi_utils.h"

namespace {

using oasr::attention::Params;
using oasr::attention::RelPos;

constexpr DLDataType kInt32{kDLInt, 32, 1};

// `t` is read or written in 16-byte pieces: its start and the strides of its dimensions of size > 1 (but the last,
// which is contiguous) are multiples of 16 bytes.
void icheck_pieces(TensorView t, const char* name) {
  const int nd = static_cast<int>(t.ndim());
  bool ok = reinterpret_cast<uintptr_t>(data_ptr<char>(t)) % 16 == 0 && (t.size(nd - 1) <= 1 || t.stride(nd - 1) == 1);
  for (int i = 0; i < nd - 1; ++i) ok = ok && (t.size(i) <= 1 || (t.stride(i) * 2) % 16 == 0);
  TVM_FFI_ICHECK(ok) << "`" << name << "` must have a contiguous last dimension and a start and strides that are "
                     << "multiples of 16 bytes (the Python API copies other layouts)";
}

// `t` is [B, T, H, D] as q, on q's device and of its dtype, laid out in 16-byte pieces; its batch, time, head strides.
void icheck_heads(TensorView t, const char* name, TensorView q, int64_t (&stride)[3]) {
  icheck_like(t, q, name);
  TVM_FFI_ICHECK(t.ndim() == 4 && t.size(0) == q.size(0) && t.size(1) == q.size(1) && t.size(2) == q.size(2) &&
                 t.size(3) == q.size(3))
      << "`" << name << "` must have q's shape [B, T, H, D]";
  icheck_pieces(t, name);
  for (int i = 0; i < 3; ++i) stride[i] = t.stride(i);
}

template <typename T>
void run(TensorView out, TensorView q, TensorView k, TensorView v, const TensorView* pos, const TensorView* bias_u,
         const TensorView* bias_v, Optional lengths, RelPos rel, double scale, int64_t chunk_size,
         int64_t left_chunks) {
  Params<T> p;
  TVM_FFI_ICHECK(q.ndim() == 4) << "`q` must be [B, T, H, D]";
  const int64_t batch = q.size(0), time = q.size(1), heads = q.size(2), head_dim = q.size(3);
  TVM_FFI_ICHECK(head_dim == 64 || head_dim == 128) << "head size D must be 64 or 128, got " << head_dim;
  TVM_FFI_ICHECK(time < (int64_t{1} << 29) && batch < (int64_t{1} << 31) && heads < (int64_t{1} << 31))
      << "B, T or H too large";
  TVM_FFI_ICHECK(std::isfinite(scale) && scale > 0) << "`scale` must be finite and > 0, got " << scale;
  TVM_FFI_ICHECK(chunk_size >= 0) << "`chunk_size` must be >= 0 (0: no chunk mask), got " << chunk_size;
  icheck_heads(q, "q", q, p.q_stride);
  icheck_heads(k, "k", q, p.k_stride);
  icheck_heads(v, "v", q, p.v_stride);
  icheck_heads(out, "out", q, p.out_stride);
  if (rel != RelPos::kNone) {
    const int64_t rows = rel == RelPos::kShifted ? 2 * time - 1 : time;
    icheck_like(*pos, q, "p");
    TVM_FFI_ICHECK(pos->ndim() == 3 && pos->size(0) == rows && pos->size(1) == heads && pos->size(2) == head_dim)
        << "`p` must be [" << rows << ", H, D]";
    icheck_pieces(*pos, "p");
    for (const auto& [bias, name] : {std::pair{bias_u, "pos_bias_u"}, std::pair{bias_v, "pos_bias_v"}}) {
      icheck_like(*bias, q, name);
      TVM_FFI_ICHECK(bias->ndim() == 2 && bias->size(0) == heads && bias->size(1) == head_dim)
          << "`" << name << "` must be [H, D]";
      icheck_pieces(*bias, name);
    }
    p.p = data_ptr<const T>(*pos);
    p.p_stride[0] = pos->stride(0);
    p.p_stride[1] = pos->stride(1);
    p.pos_bias_u = data_ptr<const T>(*bias_u);
    p.pos_bias_v = data_ptr<const T>(*bias_v);
    p.u_stride = bias_u->stride(0);
    p.v_bias_stride = bias_v->stride(0);
  }
  if (lengths.has_value()) {
    const TensorView len = lengths.value();
    TVM_FFI_ICHECK(len.device().device_type == kDLCUDA && len.device().device_id == q.device().device_id &&
                   len.dtype() == kInt32 && len.ndim() == 1 && len.size(0) == batch &&
                   (batch <= 1 || len.stride(0) == 1))
        << "`lengths` must be a contiguous int32 [B] tensor on q's device";
    p.lengths = data_ptr<const int32_t>(len);
  }
  p.q = data_ptr<const T>(q);
  p.k = data_ptr<const T>(k);
  p.v = data_ptr<const T>(v);
  p.out = data_ptr<T>(out);
  p.batch = static_cast<int>(batch);
  p.time = static_cast<int>(time);
  p.heads = static_cast<int>(heads);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  // A chunk of T frames or more, or T chunks to the left or more, are the same masks as T.
  p.chunk = static_cast<int>(std::min(chunk_size, time));
  p.left_chunks = static_cast<int>(std::max<int64_t>(std::min(left_chunks, time), -1));
  const cudaError_t status =
      oasr::attention::Attention<T>(p, static_cast<int>(head_dim), rel, get_stream(q.device()));
  CHECK_CUDA_SUCCESS(status, "attention kernel launch");
}

void dispatch(TensorView out, TensorView q, TensorView k, TensorView v, const TensorView* pos,
              const TensorView* bias_u, const TensorView* bias_v, Optional lengths, RelPos rel, double scale,
              int64_t chunk_size, int64_t left_chunks) {
  DISPATCH_HALF_TYPES(q.dtype(), c_type, [&] {
    run<c_type>(out, q, k, v, pos, bias_u, bias_v, lengths, rel, scale, chunk_size, left_chunks);
  });
}

}  // namespace

void attention(TensorView out, TensorView q, TensorView k, TensorView v, Optional lengths, double scale,
               int64_t chunk_size, int64_t left_chunks) {
  dispatch(out, q, k, v, nullptr, nullptr, nullptr, lengths, RelPos::kNone, scale, chunk_size, left_chunks);
}

void rel_pos_attention(TensorView out, TensorView q, TensorView k, TensorView v, TensorView p, TensorView pos_bias_u,
                       TensorView pos_bias_v, Optional lengths, bool shift, double scale, int64_t chunk_size,
                       int64_t left_chunks) {
  dispatch(out, q, k, v, &p, &pos_bias_u, &pos_bias_v, lengths, shift ? RelPos::kShifted : RelPos::kUnshifted, scale,
           chunk_size, left_chunks);
}
