// TVM-FFI launchers of the conv1d family: the depthwise convolution over time and the
// streaming step (the convolution and the state update: one launch when one tile covers the
// chunk, else two ordered on one stream).
//
// Tensors are channels-last [B, T, C] views with contiguous channels and any batch and
// time strides; weight is [K, C] contiguous, bias [C]; mask [B, T] of uint8 (0: zero the
// frame). The Python API (oasr/conv1d.py) validates every argument before calling here;
// the checks below are internal invariants.
#include <oasr/conv1d.cuh>

#include "tvm_ffi_utils.h"

namespace {

// The activations the kernels fuse.
oasr::Activation conv1d_activation(const OptionalName& name) {
  return activation_from_name(name, {oasr::Activation::kSilu, oasr::Activation::kRelu, oasr::Activation::kGelu});
}

// A [B, T, C] view with contiguous channels on `input`'s device, of its dtype.
void check_view(TensorView t, const char* name, TensorView input, int64_t channels) {
  icheck_like(t, input, name);
  TVM_FFI_ICHECK(t.ndim() == 3 && t.size(2) == channels && (channels <= 1 || t.stride(2) == 1))
      << "`" << name << "` must be [B, T, " << channels << "] with contiguous channels";
}

// weight [K, C] and bias [C], contiguous.
void check_weights(TensorView weight, const Optional& bias, TensorView input, int64_t channels) {
  icheck_like(weight, input, "weight");
  TVM_FFI_ICHECK(weight.ndim() == 2 && weight.size(0) >= 1 && weight.size(1) == channels && weight.IsContiguous())
      << "`weight` must be a contiguous [K, C] tensor";
  if (bias.has_value()) {
    icheck_like(bias.value(), input, "bias");
    TVM_FFI_ICHECK(bias.value().ndim() == 1 && bias.value().size(0) == channels && bias.value().IsContiguous())
        << "`bias` must be a contiguous [C] tensor";
  }
}

template <typename T>
void set_tensors(oasr::conv1d::DepthwiseConv1dParams<T>& p, TensorView output, TensorView input, TensorView weight,
                 const Optional& bias) {
  p.output = data_ptr<T>(output);
  p.output_batch_stride = output.stride(0);
  p.output_time_stride = output.stride(1);
  p.input = data_ptr<const T>(input);
  p.input_batch_stride = input.stride(0);
  p.input_time_stride = input.stride(1);
  p.weight = data_ptr<const T>(weight);
  p.bias = bias.has_value() ? data_ptr<const T>(bias.value()) : nullptr;
  p.kernel_size = static_cast<int>(weight.size(0));
}

// A failed launch as one sentence with what it asked for next to the device's limits.
void check_launch(cudaError_t status, const oasr::conv1d::staged::LaunchInfo& info, const char* what) {
  if (status == cudaSuccess) return;
  int device = 0, optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  TVM_FFI_THROW(RuntimeError) << what << " failed: " << cudaGetErrorString(status) << " (" << info.kernel << ": "
                              << info.smem << " bytes of dynamic shared memory, the device allows " << optin
                              << " per block; " << info.blocks << " blocks of " << info.threads << " threads)";
}

}  // namespace

void depthwise_conv1d(TensorView output, TensorView input, TensorView weight, Optional bias, int64_t pad_left,
                      int64_t pad_right, Optional mask, OptionalName activation) {
  const oasr::Activation act = conv1d_activation(activation);
  const int64_t channels = input.ndim() == 3 ? input.size(2) : -1;
  check_view(input, "input", input, channels);
  check_view(output, "output", input, channels);
  check_weights(weight, bias, input, channels);
  const int64_t batch = input.size(0), frames = input.size(1), k = weight.size(0);
  const int64_t out_len = frames + pad_left + pad_right - k + 1;
  TVM_FFI_ICHECK(pad_left >= 0 && pad_right >= 0 && k >= 1 && out_len >= 1 && output.size(0) == batch &&
                 output.size(1) == out_len)
      << "output length " << output.size(1) << ", expected " << out_len;
  TVM_FFI_ICHECK(frames + pad_left + pad_right < INT32_MAX && batch < INT32_MAX && channels < INT32_MAX);
  if (mask.has_value()) {
    TensorView m = mask.value();
    TVM_FFI_ICHECK(m.device().device_type == kDLCUDA && m.device().device_id == input.device().device_id &&
                   m.dtype().bits == 8 && m.ndim() == 2 &&
                   m.size(0) == batch && m.size(1) == frames)
        << "`mask` must be a [B, T] tensor of 8-bit values";
  }

  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    oasr::conv1d::DepthwiseConv1dParams<c_type> p;
    set_tensors(p, output, input, weight, bias);
    if (mask.has_value()) {
      p.mask = data_ptr<const uint8_t>(mask.value());
      p.mask_batch_stride = mask.value().stride(0);
      p.mask_time_stride = mask.value().stride(1);
    }
    p.batch = static_cast<int>(batch);
    p.channels = static_cast<int>(channels);
    p.out_len = static_cast<int>(out_len);
    p.lo = p.split = static_cast<int>(pad_left);
    p.hi = static_cast<int>(pad_left + frames);
    p.activation = act;
    oasr::conv1d::staged::LaunchInfo info;
    cudaError_t status = oasr::conv1d::DepthwiseConv1d<c_type>(p, {}, stream, &info);
    check_launch(status, info, "depthwise_conv1d kernel launch");
  });
}

void depthwise_conv1d_step(TensorView output, TensorView input, TensorView state, TensorView weight, Optional bias,
                           OptionalName activation) {
  const oasr::Activation act = conv1d_activation(activation);
  const int64_t channels = input.ndim() == 3 ? input.size(2) : -1;
  check_view(input, "input", input, channels);
  check_view(output, "output", input, channels);
  check_view(state, "state", input, channels);
  check_weights(weight, bias, input, channels);
  const int64_t batch = input.size(0), chunk_len = input.size(1), k = weight.size(0);
  TVM_FFI_ICHECK(k >= 1 && chunk_len >= 1 && state.size(0) == batch && state.size(1) == k - 1 &&
                 output.size(0) == batch && output.size(1) == chunk_len)
      << "`state` must be [B, K-1, C] and `output` [B, L, C]";
  TVM_FFI_ICHECK(chunk_len + k < INT32_MAX && batch < INT32_MAX && channels < INT32_MAX);

  cudaStream_t stream = get_stream(input.device());
  DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16(input.dtype(), c_type, [&] {
    oasr::conv1d::DepthwiseConv1dParams<c_type> p;
    set_tensors(p, output, input, weight, bias);
    p.state = data_ptr<const c_type>(state);
    p.state_batch_stride = state.stride(0);
    p.state_time_stride = state.stride(1);
    p.batch = static_cast<int>(batch);
    p.channels = static_cast<int>(channels);
    p.out_len = static_cast<int>(chunk_len);
    p.lo = 0;
    p.split = static_cast<int>(k - 1);
    p.hi = static_cast<int>(k - 1 + chunk_len);
    p.activation = act;
    // The state is read by the convolution and rewritten after it, by the same launch or the next.
    oasr::conv1d::staged::StepState<c_type> s;
    s.state = data_ptr<c_type>(state);
    s.batch_stride = state.stride(0);
    s.time_stride = state.stride(1);
    oasr::conv1d::staged::LaunchInfo info;
    cudaError_t status = oasr::conv1d::DepthwiseConv1d<c_type>(p, s, stream, &info);
    check_launch(status, info, "depthwise_conv1d_step kernel launch");
  });
}
