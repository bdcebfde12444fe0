"""The conv2d family: ``conv2d`` (NHWC, bias + ReLU) and ``conv2d_subsampling`` (the fused front end).

``conv2d`` config: ``n, h, w, c`` input ``[n, h, w, c]``, ``k`` output channels, an ``r x r`` filter and
``stride`` on both axes; the padding is "same" (``(r - 1) // 2``) at stride 1 and none otherwise, as in
upstream Oasr's list (config sizes are positive); bias and ReLU fused. Inputs ~ N(0, 1), weights ~ N(0, 1 / (r r c)),
so outputs are O(1). Backends: ``oasr``; ``torch``: ``F.conv2d`` on the NHWC tensors seen as
channels-last NCHW (no copies; cuDNN's NHWC kernels) followed by ``F.relu``; ``torch_nchw``:
``F.conv2d`` on contiguous NCHW copies made in :func:`_conv_inputs` (not timed), torch's default layout.
Work: FLOP = 2 n p q k r r c, on tensor cores when k % 8 == 0 and c % 8 == 0 (the implicit GEMM) or
r r c <= 15 (the direct kernel's few-taps path), fp32 CUDA cores otherwise; bytes = the input, weight and
bias read once and the output written once. Conv #1 of the front end (c = 1, k = 256) writes 256 outputs
per input sample: DRAM-bound.
Conv #2 (c = k = 256) does 2304 multiply-adds per output: tensor-core bound.

``conv2d_subsampling`` config: ``b, t, f`` features and ``d`` channels (WeNet's Conv2dSubsampling4).
Backends: ``oasr`` (one kernel); ``torch``: the module's two ``nn.Conv2d`` + ReLU in channels-last
memory and its ``transpose(1, 2).contiguous().view`` flattening; ``torch_nchw``: the same in NCHW.
Work: FLOP = conv #1 on fp32 cores (2 b t1 f1 d 9) + conv #2 on tensor cores (2 b t2 f2 d d 9);
bytes = the input, the weights and biases read once and the output written once (the first conv's
output never reaches DRAM in the fused kernel).

Tolerances against the float64 references computed from the same rounded inputs (the front end's
first conv rounded to the storage dtype, as torch stores it): one rounding of the output after fp32
accumulation of up to 2304 products: float16 2e-3 / 2e-3, bfloat16 1e-2 / 1e-2 (``tests/conftest.py``'s
``gemm_tolerance`` is the depth-scaled form the tests use). Torch's backends round once more: ATen's cuDNN
path stores each convolution's output in the storage dtype and adds the bias as a second op, so their
references (:func:`_cudnn_conv_relu`) round there too. Against oasr's, the front end's second conv sums
that extra rounding of every first-conv output (2304 per output) and torch read 0.022-0.025 max error
(measured: dev/conv2d/RESULTS.md), over the bf16 tolerance; oasr's adds the bias in fp32 before its one
rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.conv2d import MAX_FEW_TAPS
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work

# Upstream Oasr's conv2d benchmark list (N, H, W, IC, K, stride; 3x3), then the front-end
# convolutions at B16 T1500 F80 d256.
CONV2D_SWEEP: tuple[Config, ...] = tuple(
    {"n": n, "h": h, "w": w, "c": c, "k": k, "r": 3, "stride": stride}
    for n, h, w, c, k, stride in (
        (16, 200, 80, 1, 64, 2),
        (16, 100, 40, 64, 64, 2),
        (32, 200, 80, 1, 64, 2),
        (32, 100, 40, 64, 64, 2),
        (8, 300, 80, 1, 256, 2),
        (8, 150, 40, 256, 256, 2),
        (16, 100, 40, 128, 128, 1),
        (16, 100, 40, 256, 256, 1),
        (16, 1500, 80, 1, 256, 2),
        (16, 749, 39, 256, 256, 2),
    )
)
SUBSAMPLING_SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "t": t, "f": f, "d": d}
    for b, t, f, d in ((16, 1500, 80, 256), (64, 250, 80, 256), (16, 1000, 80, 256), (16, 1500, 80, 144))
)
TOLERANCES: dict[str, tuple[float, float]] = {"float16": (2e-3, 2e-3), "bfloat16": (1e-2, 1e-2)}
DTYPES = ("float16", "bfloat16")


def _tensor_kind(dtype: torch.dtype) -> str:
    return "tensor_bf16" if dtype == torch.bfloat16 else "tensor_fp16"


def padding(config: Config) -> int:
    """The padding of a config: "same" at stride 1, none at larger strides (upstream Oasr's list)."""
    return (config["r"] - 1) // 2 if config["stride"] == 1 else 0


def _out_size(size: int, config: Config) -> int:
    return (size + 2 * padding(config) - config["r"]) // config["stride"] + 1


# ---------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------


def _conv_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    n, h, w, c, k, r = (config[f] for f in ("n", "h", "w", "c", "k", "r"))

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, device=device, generator=generator)).to(dtype)

    x = randn(n, h, w, c)
    weight = randn(k, r, r, c, scale=(r * r * c) ** -0.5)
    p, q = _out_size(h, config), _out_size(w, config)
    return {
        "x": x,
        "weight": weight,
        "bias": randn(k, scale=0.1),
        "x_nchw": x.permute(0, 3, 1, 2).contiguous(),  # torch's default layout, made once, not timed
        "weight_nchw": weight.permute(0, 3, 1, 2).contiguous(),
        "stride": config["stride"],
        "pad": padding(config),
        "out": torch.empty(n, p, q, k, dtype=dtype, device=device),
    }


def _conv_oasr(i: Inputs) -> torch.Tensor:
    return oasr.conv2d(i["x"], i["weight"], i["bias"], i["stride"], i["pad"], "relu", out=i["out"])


def _conv_torch(i: Inputs) -> torch.Tensor:
    # NHWC memory seen as channels-last NCHW: cuDNN's NHWC kernels, no copies.
    x, w = i["x"].permute(0, 3, 1, 2), i["weight"].permute(0, 3, 1, 2)
    return F.relu(F.conv2d(x, w, i["bias"], stride=i["stride"], padding=i["pad"])).permute(0, 2, 3, 1)


def _conv_torch_nchw(i: Inputs) -> torch.Tensor:
    y = F.relu(F.conv2d(i["x_nchw"], i["weight_nchw"], i["bias"], stride=i["stride"], padding=i["pad"]))
    return y.permute(0, 2, 3, 1)


def _conv_reference(i: Inputs) -> torch.Tensor:
    x, w = i["x"].double().permute(0, 3, 1, 2), i["weight"].double().permute(0, 3, 1, 2)
    return F.relu(F.conv2d(x, w, i["bias"].double(), stride=i["stride"], padding=i["pad"])).permute(0, 2, 3, 1)


def _cudnn_conv_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, stride: int, padding: int) -> torch.Tensor:
    """float64 ``relu(conv2d(x, w) + b)`` (NCHW) rounded where torch's cuDNN path rounds: the convolution's
    output is stored in ``x``'s dtype before the bias is added (that add's own rounding is the output's,
    left out as for every backend)."""
    y = F.conv2d(x.double(), w.double(), stride=stride, padding=padding).to(x.dtype).double()
    return F.relu(y + b.double()[:, None, None])


def _conv_torch_reference(i: Inputs) -> torch.Tensor:
    x, w = i["x"].permute(0, 3, 1, 2), i["weight"].permute(0, 3, 1, 2)
    return _cudnn_conv_relu(x, w, i["bias"], i["stride"], i["pad"]).permute(0, 2, 3, 1)


def _conv_work(config: Config, dtype: torch.dtype) -> Work:
    n, h, w, c, k, r = (config[f] for f in ("n", "h", "w", "c", "k", "r"))
    p, q = _out_size(h, config), _out_size(w, config)
    elements = n * h * w * c + k * r * r * c + k + n * p * q * k
    tensor_cores = k % 8 == 0 and (c % 8 == 0 or r * r * c <= MAX_FEW_TAPS)  # implicit GEMM or few-taps kernel
    kind = _tensor_kind(dtype) if tensor_cores else "fp32"
    return Work(bytes=elements * dtype.itemsize, flops={kind: 2 * n * p * q * k * r * r * c})


CONV2D = OpSpec(
    name="conv2d",
    family=families.CONV2D,
    config_fields=("n", "h", "w", "c", "k", "r", "stride"),
    make_inputs=_conv_inputs,
    backends={"oasr": _conv_oasr, "torch": _conv_torch, "torch_nchw": _conv_torch_nchw},
    reference=_conv_reference,
    backend_references={"torch": _conv_torch_reference, "torch_nchw": _conv_torch_reference},
    work=_conv_work,
    dtypes=DTYPES,
    default_sweep=CONV2D_SWEEP,
    large_case=lambda op, dtype: {"n": 16, "h": 1500, "w": 80, "c": 1, "k": 256, "r": 3, "stride": 2},
    tolerances=dict(TOLERANCES),
)


# ---------------------------------------------------------------------------
# conv2d_subsampling
# ---------------------------------------------------------------------------


def _sub_inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    b, t, f, d = config["b"], config["t"], config["f"], config["d"]

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, device=device, generator=generator)).to(dtype)

    w1, w2 = randn(d, 1, 3, 3, scale=1 / 3), randn(d, d, 3, 3, scale=(9 * d) ** -0.5)
    t2, f2 = ((t - 1) // 2 - 1) // 2, ((f - 1) // 2 - 1) // 2
    return {
        "x": randn(b, t, f),
        "weight1": w1,
        "bias1": randn(d, scale=0.1),
        "weight2": w2,
        "bias2": randn(d, scale=0.1),
        "weight1_cl": w1.contiguous(memory_format=torch.channels_last),
        "weight2_cl": w2.contiguous(memory_format=torch.channels_last),
        "weight2_packed": oasr.pack_subsampling_weight2(w2),  # packed once, as torch's weights go channels-last once
        "out": torch.empty(b, t2, d * f2, dtype=dtype, device=device),
    }


def _sub_oasr(i: Inputs) -> torch.Tensor:
    return oasr.conv2d_subsampling(i["x"], i["weight1"], i["bias1"], i["weight2_packed"], i["bias2"], out=i["out"])


def _module(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, cl: bool):
    """WeNet's Conv2dSubsampling4.forward (conv, ReLU, conv, ReLU, flatten) in channels-last or NCHW memory."""
    x = x[:, None]
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    y = F.relu(F.conv2d(F.relu(F.conv2d(x, w1, b1, stride=2)), w2, b2, stride=2))
    b, c, t, f = y.shape
    return y.transpose(1, 2).contiguous().view(b, t, c * f)


def _sub_torch(i: Inputs) -> torch.Tensor:
    return _module(i["x"], i["weight1_cl"], i["bias1"], i["weight2_cl"], i["bias2"], True)


def _sub_torch_nchw(i: Inputs) -> torch.Tensor:
    return _module(i["x"], i["weight1"], i["bias1"], i["weight2"], i["bias2"], False)


def _sub_reference(i: Inputs) -> torch.Tensor:
    x = i["x"]
    y1 = F.relu(F.conv2d(x.double()[:, None], i["weight1"].double(), i["bias1"].double(), stride=2)).to(x.dtype)
    y2 = F.relu(F.conv2d(y1.double(), i["weight2"].double(), i["bias2"].double(), stride=2))
    b, c, t, f = y2.shape
    return y2.transpose(1, 2).reshape(b, t, c * f)


def _sub_torch_reference(i: Inputs) -> torch.Tensor:
    x = i["x"]
    y1 = _cudnn_conv_relu(x[:, None], i["weight1"], i["bias1"], 2, 0).to(x.dtype)  # the bias add's rounding
    y2 = _cudnn_conv_relu(y1, i["weight2"], i["bias2"], 2, 0)
    b, c, t, f = y2.shape
    return y2.transpose(1, 2).reshape(b, t, c * f)


def _sub_work(config: Config, dtype: torch.dtype) -> Work:
    b, t, f, d = config["b"], config["t"], config["f"], config["d"]
    t1, f1 = (t - 1) // 2, (f - 1) // 2
    t2, f2 = (t1 - 1) // 2, (f1 - 1) // 2
    elements = b * t * f + 9 * d + d + 9 * d * d + d + b * t2 * d * f2
    flops = {"fp32": 2 * b * t1 * f1 * d * 9, _tensor_kind(dtype): 2 * b * t2 * f2 * d * d * 9}
    return Work(bytes=elements * dtype.itemsize, flops=flops)


CONV2D_SUBSAMPLING = OpSpec(
    name="conv2d_subsampling",
    family=families.CONV2D,
    config_fields=("b", "t", "f", "d"),
    make_inputs=_sub_inputs,
    backends={"oasr": _sub_oasr, "torch": _sub_torch, "torch_nchw": _sub_torch_nchw},
    reference=_sub_reference,
    backend_references={"torch": _sub_torch_reference, "torch_nchw": _sub_torch_reference},
    work=_sub_work,
    dtypes=DTYPES,
    default_sweep=SUBSAMPLING_SWEEP,
    tolerances=dict(TOLERANCES),
)
