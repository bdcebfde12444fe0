"""The scale op: ``x * factor``."""

from __future__ import annotations

import torch

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work

SCALE_FACTOR = 1.7


def _scale_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(config["n"], dtype=dtype, device=device, generator=generator)
    return {"x": x, "factor": SCALE_FACTOR, "out": torch.empty_like(x)}


def _scale_oasr(inputs: Inputs) -> torch.Tensor:
    return oasr.scale(inputs["x"], inputs["factor"], out=inputs["out"])


def _scale_torch(inputs: Inputs) -> torch.Tensor:
    return torch.mul(inputs["x"], inputs["factor"], out=inputs["out"])


def _scale_reference(inputs: Inputs) -> torch.Tensor:
    return inputs["x"].double() * float(torch.tensor(inputs["factor"], dtype=torch.float32))


def _scale_work(config: Config, dtype: torch.dtype) -> Work:
    n = config["n"]
    return Work(bytes=2 * n * dtype.itemsize, flops={"fp32": n})


SCALE = OpSpec(
    name="scale",
    family=families.SCALE,
    config_fields=("n",),
    make_inputs=_scale_inputs,
    backends={"oasr": _scale_oasr, "torch": _scale_torch},
    reference=_scale_reference,
    work=_scale_work,
    # 4 KiB .. 1 GiB of fp16 input, every 4x.
    default_sweep=tuple({"n": 2048 * 4**k} for k in range(0, 10)),
)
