#!/usr/bin/env python3
"""The fused epilogues' sigmoid against float64 on an sm90 GPU: ``times_one_plus_tanh(0.5, x / 2)``
(``include/oasr/common/math.cuh``, one tanh.approx.f32), the form fp16 took before it (__expf and a fast
reciprocal, two SFU ops), and a rejected form, tanh.approx.f16x2 on a pair's fp16 roundings, over every
multiple of 2^-10 in [-24, 24] (needs cupy).

    python dev/gemm/sigmoid_error.py

Per form: the largest absolute error of sigmoid(x), of silu(x) = x sigmoid(x) for |x| <= 4 and |x| <= 8, and
silu's largest relative error for x >= 0.25 (the outputs' own rounding is 2^-9 relative for bf16, 2^-12 for fp16).
The f16x2 form was meant to halve the SFU ops of a SiLU epilogue; ptxas splits it into two MUFU.TANH.F16, so it
saved nothing and lost two orders of accuracy (``RESULTS.md``).
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
    y = {oasr::times_one_plus_tanh(0.5f, 0.5f * a), oasr::times_one_plus_tanh(0.5f, 0.5f * b)};
  } else if (form == 1) {
    y = {__fdividef(1.f, 1.f + __expf(-a)), __fdividef(1.f, 1.f + __expf(-b))};
  } else {
    uint32_t h, t;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(0.5f * b), "f"(0.5f * a));
    asm("tanh.approx.f16x2 %0, %1;" : "=r"(t) : "r"(h));
    const float2 u = __half22float2(*reinterpret_cast<const __half2*>(&t));
    y = {0.5f + 0.5f * u.x, 0.5f + 0.5f * u.y};
  }
  s[2 * i] = y.x;
  s[2 * i + 1] = y.y;
}
"""
FORMS = ("tanh.approx.f32 (production)", "__expf + rcp (fp16 before)", "rejected: tanh.approx.f16x2")


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
        positive = x >= 0.25  # (silu's relative error where it is not near 0)
        print(
            f"{name:32s} {np.abs(s - truth).max():12.3e} {silu_error[np.abs(x) <= 4].max():16.3e} "
            f"{silu_error[np.abs(x) <= 8].max():16.3e} {(silu_error[positive] / (x * truth)[positive]).max():16.3e}"
        )


if __name__ == "__main__":
    main()
