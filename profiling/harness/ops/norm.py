"""The norm family over ``[b, t, c]``: ``layer_norm``, ``rms_norm`` and the fused residual forms.

``add_layer_norm`` / ``add_rms_norm`` compute ``norm(residual + ALPHA * x)``. The Oasr
backend writes only the normalised output (the sum stays in registers); torch has no
fused op, so its backend is ``torch.add`` followed by the norm, which materialises the
sum. The work model counts the op's minimal traffic: read ``x`` and ``residual``, write
the output (plus the ``[c]`` parameters).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .activation import ACTIVATION_SWEEP
from .base import Config, Inputs, OpSpec, Work, gib_input_case

EPS = 1e-5
ALPHA = 0.5  # the Macaron half-step feed-forward residual

NORM_SWEEP: tuple[Config, ...] = (*ACTIVATION_SWEEP[:-1], {"b": 32, "t": 500, "c": 512}, ACTIVATION_SWEEP[-1])
ADD_NORM_SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "t": t, "c": c} for b, t, c in ((16, 1500, 384), (32, 250, 512), (8, 200, 1024), (16, 1500, 1024))
)

# fp32 operations per element (statistics + affine transform).
_LAYER_NORM_FLOPS = 8  # sum; subtract, fma (variance); subtract, multiply, fma (output)
_RMS_NORM_FLOPS = 4  # fma (sum of squares); multiply, multiply (output)
_ADD_FLOPS = 1  # one fma


def _norm_inputs(
    config: Config, dtype: torch.dtype, device: torch.device, seed: int, *, bias: bool, residual: bool
) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    b, t, c = config["b"], config["t"], config["c"]

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float32, device=device, generator=generator)

    inputs: Inputs = {
        "x": randn(b, t, c).to(dtype),
        "weight": (1.0 + 0.1 * randn(c)).to(dtype),
        "bias": (0.1 * randn(c)).to(dtype) if bias else None,
        "out": torch.empty(b, t, c, dtype=dtype, device=device),
    }
    if residual:
        inputs["residual"] = randn(b, t, c).to(dtype)
    return inputs


def _layer_norm_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).square().mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + EPS) * weight.double()
    return y if bias is None else y + bias.double()


def _rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    y = x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + EPS) * weight.double()
    return y if bias is None else y + bias.double()


def _sum_ref(inputs: Inputs) -> torch.Tensor:
    return inputs["residual"].double() + ALPHA * inputs["x"].double()


def _norm_work(config: Config, dtype: torch.dtype, *, flops: int, params: int, tensors: int) -> Work:
    n = config["b"] * config["t"] * config["c"]
    return Work(
        bytes=(tensors * n + params * config["c"]) * dtype.itemsize,
        flops={"fp32": flops * n},
    )


# Named module-level functions (no lambdas), so the entries pickle and read well in traces.


def _layer_norm_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    return _norm_inputs(config, dtype, device, seed, bias=True, residual=False)


def _rms_norm_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    return _norm_inputs(config, dtype, device, seed, bias=False, residual=False)


def _add_layer_norm_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    return _norm_inputs(config, dtype, device, seed, bias=True, residual=True)


def _add_rms_norm_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    return _norm_inputs(config, dtype, device, seed, bias=False, residual=True)


def _layer_norm_oasr(i: Inputs) -> torch.Tensor:
    return oasr.layer_norm(i["x"], i["weight"], i["bias"], EPS, out=i["out"])


def _rms_norm_oasr(i: Inputs) -> torch.Tensor:
    return oasr.rms_norm(i["x"], i["weight"], None, EPS, out=i["out"])


def _add_layer_norm_oasr(i: Inputs) -> torch.Tensor:
    return oasr.add_layer_norm(i["x"], i["residual"], i["weight"], i["bias"], EPS, ALPHA, out=i["out"])


def _add_rms_norm_oasr(i: Inputs) -> torch.Tensor:
    return oasr.add_rms_norm(i["x"], i["residual"], i["weight"], None, EPS, ALPHA, out=i["out"])


def _layer_norm_torch(i: Inputs) -> torch.Tensor:
    return F.layer_norm(i["x"], (i["x"].shape[-1],), i["weight"], i["bias"], EPS)


def _rms_norm_torch(i: Inputs) -> torch.Tensor:
    return F.rms_norm(i["x"], (i["x"].shape[-1],), i["weight"], EPS)


def _add_layer_norm_torch(i: Inputs) -> torch.Tensor:
    summed = torch.add(i["residual"], i["x"], alpha=ALPHA)
    return F.layer_norm(summed, (summed.shape[-1],), i["weight"], i["bias"], EPS)


def _add_rms_norm_torch(i: Inputs) -> torch.Tensor:
    summed = torch.add(i["residual"], i["x"], alpha=ALPHA)
    return F.rms_norm(summed, (summed.shape[-1],), i["weight"], EPS)


def _layer_norm_reference(i: Inputs) -> torch.Tensor:
    return _layer_norm_ref(i["x"].double(), i["weight"], i["bias"])


def _rms_norm_reference(i: Inputs) -> torch.Tensor:
    return _rms_norm_ref(i["x"].double(), i["weight"], None)


def _add_layer_norm_reference(i: Inputs) -> torch.Tensor:
    return _layer_norm_ref(_sum_ref(i), i["weight"], i["bias"])


def _add_rms_norm_reference(i: Inputs) -> torch.Tensor:
    return _rms_norm_ref(_sum_ref(i), i["weight"], None)


def _layer_norm_work(config: Config, dtype: torch.dtype) -> Work:
    return _norm_work(config, dtype, flops=_LAYER_NORM_FLOPS, params=2, tensors=2)


def _rms_norm_work(config: Config, dtype: torch.dtype) -> Work:
    return _norm_work(config, dtype, flops=_RMS_NORM_FLOPS, params=1, tensors=2)


def _add_layer_norm_work(config: Config, dtype: torch.dtype) -> Work:
    return _norm_work(config, dtype, flops=_LAYER_NORM_FLOPS + _ADD_FLOPS, params=2, tensors=3)


def _add_rms_norm_work(config: Config, dtype: torch.dtype) -> Work:
    return _norm_work(config, dtype, flops=_RMS_NORM_FLOPS + _ADD_FLOPS, params=1, tensors=3)


LAYER_NORM = OpSpec(
    name="layer_norm",
    family=families.NORM,
    config_fields=("b", "t", "c"),
    make_inputs=_layer_norm_inputs,
    backends={"oasr": _layer_norm_oasr, "torch": _layer_norm_torch},
    reference=_layer_norm_reference,
    work=_layer_norm_work,
    default_sweep=NORM_SWEEP,
    large_case=gib_input_case(),
)

RMS_NORM = OpSpec(
    name="rms_norm",
    family=families.NORM,
    config_fields=("b", "t", "c"),
    make_inputs=_rms_norm_inputs,
    backends={"oasr": _rms_norm_oasr, "torch": _rms_norm_torch},
    reference=_rms_norm_reference,
    work=_rms_norm_work,
    default_sweep=NORM_SWEEP,
    large_case=gib_input_case(),
)

ADD_LAYER_NORM = OpSpec(
    name="add_layer_norm",
    family=families.NORM,
    config_fields=("b", "t", "c"),
    make_inputs=_add_layer_norm_inputs,
    backends={"oasr": _add_layer_norm_oasr, "torch": _add_layer_norm_torch},
    reference=_add_layer_norm_reference,
    work=_add_layer_norm_work,
    default_sweep=ADD_NORM_SWEEP,
    large_case=gib_input_case(),
)

ADD_RMS_NORM = OpSpec(
    name="add_rms_norm",
    family=families.NORM,
    config_fields=("b", "t", "c"),
    make_inputs=_add_rms_norm_inputs,
    backends={"oasr": _add_rms_norm_oasr, "torch": _add_rms_norm_torch},
    reference=_add_rms_norm_reference,
    work=_add_rms_norm_work,
    default_sweep=ADD_NORM_SWEEP,
    large_case=gib_input_case(),
)
