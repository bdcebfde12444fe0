#!/usr/bin/env python3
"""The fused epilogues' sigmoid against float64 on an sm90 GPU: ``fast_sigmoid2`` (``include/oasr/common/math.cuh``)
for bf16 outputs (one tanh.approx.f16x2 per pair) and fp16 outputs (__expf and a fast reciprocal), and the
tanh.approx.f32 form bf16 took before, over every multiple of 2^-10 in [-24, 24] (needs cupy).

    python dev/gemm/sigmoid_error.py

Per form: the largest absolute error of sigmoid(x), of silu(x) = x sigmoid(x) for |x| <= 4 and |x| <= 8, and
silu's largest relative error for x >= 0.25 (the outputs' own rounding is 2^-9 relative for bf16, 2^-12 for fp16).
"""

from __future__ import annotations

from pathlib import Path

import cupy as cp
import numpy as np

INCLUDE = Path(__file__).resolve().parents[2] / "include"
SOURCE = r"""
#include "oasr/common/math.cuh"
extern "C" __global__ void sigmoid(const float* x, float* s, int pairs, int form) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const float a = x[2 * i], b = x[2 * i + 1];
  float2 y;
  if (form == 0) {
    y = oasr::fast_sigmoid2<nv_bfloat16>(a, b);
  } else if (form == 1) {
    y = oasr::fast_sigmoid2<half>(a, b);
  } else {
    y = {0.5f + 0.5f * oasr::tanh_approx(0.5f * a), 0.5f + 0.5f * oasr::tanh_approx(0.5f * b)};
  }
  s[2 * i] = y.x;
  s[2 * i + 1] = y.y;
}
"""
FORMS = ("bf16: tanh.approx.f16x2", "fp16: __expf + rcp", "bf16 before: tanh.approx.f32")


def main() -> None:
    kernel = cp.RawKernel(SOURCE, "sigmoid", options=("-std=c++17", f"-I{INCLUDE}"), backend="nvcc")
    x = np.arange(-24 * 1024, 24 * 1024 + 2, dtype=np.float64) / 1024  # an even count: whole pairs
    truth = 1 / (1 + np.exp(-x))
    x_gpu, s_gpu = cp.asarray(x.astype(np.float32)), cp.empty(x.size, dtype=cp.float32)
    pairs = x.size // 2
    print(f"{x.size} points in [-24, 24], step 2^-10")
    heads = ("sigmoid abs", "silu abs |x|<=4", "silu abs |x|<=8", "silu rel x>=.25")
    print(f"{'form':32s} {heads[0]:>12s} {heads[1]:>16s} {heads[2]:>16s} {heads[3]:>16s}")
    for form, name in enumerate(FORMS):
        kernel(((pairs + 255) // 256,), (256,), (x_gpu, s_gpu, np.int32(pairs), np.int32(form)))
        s = cp.asnumpy(s_gpu).astype(np.float64)
        silu_error = np.abs(x * s - x * truth)
        positive = x >= 0.25
        print(
            f"{name:32s} {np.abs(s - truth).max():12.3e} {silu_error[np.abs(x) <= 4].max():16.3e} "
            f"{silu_error[np.abs(x) <= 8].max():16.3e} {(silu_error / np.abs(x * truth))[positive].max():16.3e}"
        )


if __name__ == "__main__":
    main()
