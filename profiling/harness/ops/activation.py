"""The activation family: ``glu`` (``[b, t, 2c] -> [b, t, c]``) and ``swish`` (SiLU, ``[b, t, c]``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work, gib_input_case

# Conformer shapes of the public Oasr's benchmarks, plus a large case (98 MB of fp16 in
# and out for swish: past the 50 MB L2). For glu, c is the output width (input 2c).
ACTIVATION_SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "t": t, "c": c}
    for b, t, c in ((32, 250, 256), (64, 250, 256), (64, 250, 512), (64, 500, 256), (64, 500, 512), (16, 1500, 1024))
)

# Per output element: exp, add, divide, multiply.
_SIGMOID_GATE_FLOPS = 4


def _glu_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    b, t, c = config["b"], config["t"], config["c"]
    x = torch.randn(b, t, 2 * c, dtype=dtype, device=device, generator=generator)
    return {"x": x, "out": torch.empty(b, t, c, dtype=dtype, device=device)}


def _glu_oasr(inputs: Inputs) -> torch.Tensor:
    return oasr.glu(inputs["x"], out=inputs["out"])


def _glu_torch(inputs: Inputs) -> torch.Tensor:
    return F.glu(inputs["x"], dim=-1)


def _glu_reference(inputs: Inputs) -> torch.Tensor:
    a, g = inputs["x"].double().chunk(2, dim=-1)
    return a * torch.sigmoid(g)


def _glu_work(config: Config, dtype: torch.dtype) -> Work:
    n = config["b"] * config["t"] * config["c"]
    return Work(bytes=3 * n * dtype.itemsize, flops={"fp32": _SIGMOID_GATE_FLOPS * n})


def _swish_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(config["b"], config["t"], config["c"], dtype=dtype, device=device, generator=generator)
    return {"x": x, "out": torch.empty_like(x)}


def _swish_oasr(inputs: Inputs) -> torch.Tensor:
    return oasr.swish(inputs["x"], out=inputs["out"])


def _swish_torch(inputs: Inputs) -> torch.Tensor:
    return F.silu(inputs["x"])


def _swish_reference(inputs: Inputs) -> torch.Tensor:
    x = inputs["x"].double()
    return x * torch.sigmoid(x)


def _swish_work(config: Config, dtype: torch.dtype) -> Work:
    n = config["b"] * config["t"] * config["c"]
    return Work(bytes=2 * n * dtype.itemsize, flops={"fp32": _SIGMOID_GATE_FLOPS * n})


GLU = OpSpec(
    name="glu",
    family=families.ACTIVATION,
    config_fields=("b", "t", "c"),
    make_inputs=_glu_inputs,
    backends={"oasr": _glu_oasr, "torch": _glu_torch},
    reference=_glu_reference,
    work=_glu_work,
    default_sweep=ACTIVATION_SWEEP,
    large_case=gib_input_case(input_channels=2),
)

SWISH = OpSpec(
    name="swish",
    family=families.ACTIVATION,
    config_fields=("b", "t", "c"),
    make_inputs=_swish_inputs,
    backends={"oasr": _swish_oasr, "torch": _swish_torch},
    reference=_swish_reference,
    work=_swish_work,
    default_sweep=ACTIVATION_SWEEP,
    large_case=gib_input_case(),
)
