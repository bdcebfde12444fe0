"""The gemm family: ``gemm`` (a linear layer with bias and SiLU, the Conformer feed-forward's first
layer) and ``gemm_glu`` (a linear layer and GLU, the pointwise convolution before the depthwise one).

Config: ``m`` rows (batch x frames), ``n`` output features (``gemm_glu``: ``n`` after gating, so the
weight is ``[2n, k]``), ``k`` input features. float16 and bfloat16 only (the kernels refuse fp32).
Inputs ~ N(0, 1), weights ~ N(0, 1/k), so outputs are O(1) at any k. The ``torch`` backend is cuBLAS
through ``F.linear`` followed by torch's activation (two kernels). Work: FLOP = 2 m n k on tensor
cores (``gemm_glu``: 2 m (2n) k), bytes = the input, the weight and the bias read once and the
output written once.

Tolerances against the float64 reference computed from the same rounded inputs: the output is
rounded once (half an ulp: 2^-11 fp16, 2^-8 bf16) after an fp32 accumulation of k products (about
k * 2^-24 of the O(1) terms, 2.5e-4 at k = 4096) and a fast exp in SiLU/GLU: float16 2e-3 / 2e-3,
bfloat16 1e-2 / 1e-2 (``tests/conftest.py``'s ``gemm_tolerance`` is the k-scaled form the tests use).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work

# The Conformer shapes (feed-forward d=256/512, pointwise convolutions, long utterances).
GEMM_SWEEP: tuple[Config, ...] = tuple(
    {"m": m, "n": n, "k": k}
    for m, n, k in (
        (8000, 256, 256),
        (8000, 1024, 256),
        (8000, 256, 1024),
        (1500, 2048, 512),
        (16000, 512, 512),
        (16000, 2048, 256),
        (16000, 256, 2048),
    )
)
GLU_SWEEP: tuple[Config, ...] = tuple({"m": m, "n": n, "k": k} for m, n, k in ((16000, 256, 256), (8000, 512, 512)))
TOLERANCES: dict[str, tuple[float, float]] = {"float16": (2e-3, 2e-3), "bfloat16": (1e-2, 1e-2)}
DTYPES = ("float16", "bfloat16")


def _tensor_flops(dtype: torch.dtype, flop: int) -> dict[str, int]:
    return {"tensor_bf16" if dtype == torch.bfloat16 else "tensor_fp16": flop}


def _inputs(rows_per_output: int):
    def make(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
        generator = torch.Generator(device=device).manual_seed(seed)
        m, n, k = config["m"], config["n"] * rows_per_output, config["k"]

        def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (scale * torch.randn(*shape, device=device, generator=generator)).to(dtype)

        return {
            "x": randn(m, k),
            "weight": randn(n, k, scale=k**-0.5),
            "bias": randn(n, scale=0.1),
            "out": torch.empty(m, config["n"], dtype=dtype, device=device),
        }

    return make


def _gemm_work(config: Config, dtype: torch.dtype) -> Work:
    m, n, k = config["m"], config["n"], config["k"]
    return Work(bytes=(m * k + n * k + n + m * n) * dtype.itemsize, flops=_tensor_flops(dtype, 2 * m * n * k))


def _glu_work(config: Config, dtype: torch.dtype) -> Work:
    m, n, k = config["m"], config["n"], config["k"]
    return Work(bytes=(m * k + 2 * n * k + 2 * n + m * n) * dtype.itemsize, flops=_tensor_flops(dtype, 4 * m * n * k))


GEMM = OpSpec(
    name="gemm",
    family=families.GEMM,
    config_fields=("m", "n", "k"),
    make_inputs=_inputs(1),
    backends={
        "oasr": lambda i: oasr.gemm(i["x"], i["weight"], i["bias"], "silu", out=i["out"]),
        "torch": lambda i: F.silu(F.linear(i["x"], i["weight"], i["bias"])),
    },
    reference=lambda i: F.silu(F.linear(i["x"].double(), i["weight"].double(), i["bias"].double())),
    work=_gemm_work,
    dtypes=DTYPES,
    default_sweep=GEMM_SWEEP,
    large_case=lambda op, dtype: {"m": 24000, "n": 2048, "k": 512},
    tolerances=dict(TOLERANCES),
)

GEMM_GLU = OpSpec(
    name="gemm_glu",
    family=families.GEMM,
    config_fields=("m", "n", "k"),
    make_inputs=_inputs(2),
    backends={
        "oasr": lambda i: oasr.gemm_glu(i["x"], i["weight"], i["bias"], out=i["out"]),
        "torch": lambda i: F.glu(F.linear(i["x"], i["weight"], i["bias"]), -1),
    },
    reference=lambda i: F.glu(F.linear(i["x"].double(), i["weight"].double(), i["bias"].double()), -1),
    work=_glu_work,
    dtypes=DTYPES,
    default_sweep=GLU_SWEEP,
    tolerances=dict(TOLERANCES),
)
