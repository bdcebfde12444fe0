"""The conv1d family over ``[b, t, c]``: ``depthwise_conv1d`` with kernel size ``k``.

The op is the Conformer's depthwise convolution with "same" padding ``(k - 1) // 2`` on
each side and a bias: ``out [b, t_out, c]``, ``t_out = t + 2 * ((k - 1) // 2) - k + 1``
(``t`` for odd ``k``). The Oasr backend reads and writes channels-last tensors. The
``torch`` backend is PyTorch's best layout: ``F.conv1d(groups=c)`` on a contiguous
``[b, c, t]`` copy of the input made in :func:`make_inputs` (not timed); it returns a
``[b, t_out, c]`` view of its ``[b, c, t_out]`` result, so both compare against one
reference. The work model counts the op's minimal traffic (read the input, the weights
and the bias once, write the output) and ``2 k`` fp32 FLOP (one FMA per tap) per output.

Tolerances (rtol, atol) against the float64 reference computed from the same rounded
inputs: the kernel sums ``k`` products in fp32 (relative error ~ k * 2^-24 of the sum of
``|w x|``, ~1e-6 at k = 31 for the unit-scale data here) and rounds once to the storage
type, whose half ulp is 2^-24, 2^-11 and 2^-8 relative. Hence float32 1e-5 / 1e-5 (the
accumulation, with room), float16 1e-3 / 1e-3 and bfloat16 1e-2 / 1e-2 (about 2 ulp of
the output; atol for outputs near zero).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work

# Upstream Oasr's depthwise benchmark shapes (benchmarks/routines/conv.py), then the
# long-utterance cases of the issue (16 x 1500 frames).
CONV1D_SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "t": t, "c": c, "k": k}
    for b, t, c, k in (
        (32, 250, 256, 15),
        (64, 250, 256, 15),
        (64, 250, 512, 31),
        (64, 500, 256, 15),
        (64, 500, 512, 31),
        (32, 125, 256, 15),
        (32, 125, 256, 31),
        (16, 1500, 256, 31),
        (16, 1500, 512, 15),
    )
)

TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}


def same_padding(k: int) -> int:
    """Padding on each side used by the harness op: ``(k - 1) // 2`` ("same" for odd ``k``)."""
    return (k - 1) // 2


def out_len(config: Config) -> int:
    return config["t"] + 2 * same_padding(config["k"]) - config["k"] + 1


def _inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    b, t, c, k = config["b"], config["t"], config["c"], config["k"]

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float32, device=device, generator=generator)

    x = randn(b, t, c).to(dtype)
    weight = (randn(k, c) / k**0.5).to(dtype)  # unit-scale outputs
    return {
        "x": x,
        "x_nct": x.transpose(1, 2).contiguous(),  # torch's layout, made once, not timed
        "weight": weight,
        "weight_ck": weight.t().unsqueeze(1).contiguous(),  # [c, 1, k] for F.conv1d
        "bias": (0.1 * randn(c)).to(dtype),
        "padding": same_padding(k),
        "out": torch.empty(b, out_len(config), c, dtype=dtype, device=device),
    }


def _oasr(i: Inputs) -> torch.Tensor:
    return oasr.depthwise_conv1d(i["x"], i["weight"], i["bias"], padding=i["padding"], out=i["out"])


def _torch(i: Inputs) -> torch.Tensor:
    y = F.conv1d(i["x_nct"], i["weight_ck"], i["bias"], padding=i["padding"], groups=i["x_nct"].shape[1])
    return y.transpose(1, 2)


def _reference(i: Inputs) -> torch.Tensor:
    x = i["x"].double().transpose(1, 2)
    w = i["weight"].double().t().unsqueeze(1)
    y = F.conv1d(x, w, i["bias"].double(), padding=i["padding"], groups=x.shape[1])
    return y.transpose(1, 2)


def _work(config: Config, dtype: torch.dtype) -> Work:
    b, t, c, k = config["b"], config["t"], config["c"], config["k"]
    t_out = out_len(config)
    elements = b * t * c + b * t_out * c + k * c + c  # input, output, weight, bias
    return Work(bytes=elements * dtype.itemsize, flops={"fp32": 2 * k * b * t_out * c})


DEPTHWISE_CONV1D = OpSpec(
    name="depthwise_conv1d",
    family=families.CONV1D,
    config_fields=("b", "t", "c", "k"),
    make_inputs=_inputs,
    backends={"oasr": _oasr, "torch": _torch},
    reference=_reference,
    work=_work,
    default_sweep=CONV1D_SWEEP,
    tolerances=dict(TOLERANCES),
)
