"""The bmm family: attention scores ``q [b, m, k] @ keys [b, n, k]^T`` (keys passed transposed, as
``torch.bmm(q, keys.transpose(1, 2))``).

Config: ``b`` batch x heads, ``m`` query frames, ``n`` key frames, ``k`` head size; odd frame counts
(375: the frames of a 15 s utterance after 4x subsampling) are the case cuBLAS handles slowly.
float16 and bfloat16 only. q and keys ~ N(0, k^-1/2) so scores are O(1). Work: FLOP = 2 b m n k on
tensor cores; bytes = both operands read once and the scores written once (the oasr result's rows
are padded to 16 bytes: 1/375 more). Tolerances as the gemm family's (``profiling/harness/ops/gemm.py``).
"""

from __future__ import annotations

import torch

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work
from .gemm import DTYPES, TOLERANCES

# The issue's attention scores (64 heads x batch, T' = 375 and 376), then upstream Oasr's bmm list.
BMM_SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "m": m, "n": n, "k": k}
    for b, m, n, k in (
        (64, 375, 375, 64),
        (64, 376, 376, 64),
        (64, 200, 200, 64),
        (256, 200, 200, 64),
        (512, 400, 400, 64),
    )
)


def _inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    b, m, n, k = config["b"], config["m"], config["n"], config["k"]

    def randn(*shape: int) -> torch.Tensor:
        return (k**-0.25 * torch.randn(*shape, device=device, generator=generator)).to(dtype)

    keys = randn(b, n, k)
    return {"q": randn(b, m, k), "keys_t": keys.transpose(1, 2), "out": oasr_out(b, m, n, dtype, device)}


def oasr_out(b: int, m: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The layout oasr.bmm allocates: rows padded to 16 bytes."""
    pad = -n % (16 // dtype.itemsize)
    return torch.empty(b, m, n + pad, dtype=dtype, device=device)[..., :n]


def _work(config: Config, dtype: torch.dtype) -> Work:
    b, m, n, k = config["b"], config["m"], config["n"], config["k"]
    kind = "tensor_bf16" if dtype == torch.bfloat16 else "tensor_fp16"
    return Work(bytes=b * (m * k + n * k + m * n) * dtype.itemsize, flops={kind: 2 * b * m * n * k})


BMM = OpSpec(
    name="bmm",
    family=families.BMM,
    config_fields=("b", "m", "n", "k"),
    make_inputs=_inputs,
    backends={
        "oasr": lambda i: oasr.bmm(i["q"], i["keys_t"], out=i["out"]),
        "torch": lambda i: torch.bmm(i["q"], i["keys_t"]),
    },
    reference=lambda i: i["q"].double() @ i["keys_t"].double(),
    work=_work,
    dtypes=DTYPES,
    default_sweep=BMM_SWEEP,
    tolerances=dict(TOLERANCES),
)
