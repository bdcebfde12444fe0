"""The attention family: ``attention`` and ``rel_pos_attention`` (ESPnet's shifted relative positions).

Config: ``b`` batch rows, ``t`` frames, ``h`` heads, ``d`` head size, ``kmin`` the shortest key length in percent of
``t``: 100 for full rows (no lengths), 50 for key lengths uniform in [t/2, t] ("ragged": one per batch row, int32 on
the device). q, k and v are the three views of one packed
QKV projection ``[b, t, 3, h, d]`` (what the model's QKV GEMM writes), ~ N(0, 1); p ~ N(0, 1) is ``[2t - 1, h, d]``
and the biases ~ N(0, 0.1^2) are ``[h, d]``. float16 and bfloat16.

Backends: ``oasr``; ``torch`` is SDPA (torch's own backend choice, a boolean key mask when ragged) for
``attention``, and ESPnet's eager ``RelPositionMultiHeadedAttention`` arithmetic (``(q + u) k^T``, ``(q + v) p^T``,
the pad/view/slice rel_shift, masked softmax, ``@ v``) for ``rel_pos_attention``. The key mask is built with the
inputs, as a model builds it once per forward.

Work: FLOP = 2 b h t t_k d per product, where t_k = t (1 + kmin / 100) / 2, the expected valid keys, for Q K^T
and P V, and for ``rel_pos_attention`` one more for the positional scores (one q.p product per score, what the
output needs: the kernel's 80-row windows do 1.25x that). Bytes: q, k, v read and the output written once (plus
p and the biases).

Tolerances against the float64 reference computed from the same rounded inputs (q + u and q + v rounded to the
storage dtype, as torch's add and the kernel round them): the probabilities are rounded to the storage dtype
before the P V product (2^-9 relative for bf16, 2^-11 fp16) and the output once more: bfloat16 1e-2 / 1e-2,
float16 2e-3 / 2e-3.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work

SHAPES: tuple[tuple[int, int, int, int], ...] = (
    (64, 250, 4, 64),
    (16, 375, 8, 64),
    (32, 188, 4, 64),
    (8, 750, 8, 64),
    (2, 3000, 8, 64),
    (16, 375, 8, 128),
)
"""The issue's (B, T, H, D): Conformer encoders after 4x subsampling (d_model 256/512, 4-8 heads, 7.5-120 s)."""
SWEEP: tuple[Config, ...] = tuple(
    {"b": b, "t": t, "h": h, "d": d, "kmin": kmin} for b, t, h, d in SHAPES for kmin in (100, 50)
)
DTYPES = ("float16", "bfloat16")
TOLERANCES: dict[str, tuple[float, float]] = {"float16": (2e-3, 2e-3), "bfloat16": (1e-2, 1e-2)}
BIAS_SCALE = 0.1


def _large_case(op: OpSpec, dtype: torch.dtype) -> Config:
    """One long utterance: T = 8192 frames (5.5 min at 40 ms), 8 heads of 64."""
    return {"b": 1, "t": 8192, "h": 8, "d": 64, "kmin": 100}


def key_lengths(config: Config, device: torch.device, generator: torch.Generator) -> torch.Tensor | None:
    """int32 [b] lengths uniform in [floor(t kmin / 100), t] (at least 1), or None for full rows (kmin >= 100)."""
    if config["kmin"] >= 100:
        return None
    t = config["t"]
    low = max(1, t * config["kmin"] // 100)
    return torch.randint(low, t + 1, (config["b"],), device=device, generator=generator, dtype=torch.int32)


def _inputs(relative: bool):
    def make(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
        generator = torch.Generator(device=device).manual_seed(seed)
        b, t, h, d = config["b"], config["t"], config["h"], config["d"]

        def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (scale * torch.randn(*shape, device=device, generator=generator)).to(dtype)

        qkv = randn(b, t, 3, h, d)
        lengths = key_lengths(config, device, generator)
        inputs: Inputs = {
            "q": qkv[:, :, 0],
            "k": qkv[:, :, 1],
            "v": qkv[:, :, 2],
            "lengths": lengths,
            # [b, 1, 1, t] True where a key is valid (None: all): SDPA's boolean mask, ESPnet's masked_fill.
            "key_mask": None if lengths is None else (torch.arange(t, device=device) < lengths[:, None])[:, None, None],
            "out": torch.empty(b, t, h, d, dtype=dtype, device=device),
        }
        if relative:
            inputs["p"] = randn(2 * t - 1, h, d)
            inputs["pos_bias_u"] = randn(h, d, scale=BIAS_SCALE)
            inputs["pos_bias_v"] = randn(h, d, scale=BIAS_SCALE)
        return inputs

    return make


def heads_first(x: torch.Tensor) -> torch.Tensor:
    """[b, t, h, d] -> [b, h, t, d] (a view)."""
    return x.transpose(1, 2)


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """ESPnet's rel_shift of ``x`` [b, h, t, 2t - 1]: pad a zero column on the left, view as [b, h, 2t, t], drop the
    first row, view back and keep the first t columns; ``out[..., i, j] = x[..., i, j + t - 1 - i]``."""
    b, h, t, n = x.shape
    padded = torch.cat([x.new_zeros(b, h, t, 1), x], dim=-1).view(b, h, n + 1, t)
    return padded[:, :, 1:].view_as(x)[..., : n // 2 + 1]


def positional_scores(q: torch.Tensor, p: torch.Tensor, pos_bias_v: torch.Tensor) -> torch.Tensor:
    """ESPnet's ``matrix_bd``: rel_shift((q + v) p^T), [b, h, t, t], in q's dtype."""
    return rel_shift(heads_first(q + pos_bias_v) @ p.permute(1, 2, 0))


def espnet_rel_pos_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    p: torch.Tensor,
    pos_bias_u: torch.Tensor,
    pos_bias_v: torch.Tensor,
    key_mask: torch.Tensor | None,
) -> torch.Tensor:
    """ESPnet's eager ``RelPositionMultiHeadedAttention`` (rel_pos, after the projections), [b, t, h, d] out."""
    matrix_ac = heads_first(q + pos_bias_u) @ heads_first(k).transpose(-2, -1)
    scores = (matrix_ac + positional_scores(q, p, pos_bias_v)) / math.sqrt(q.shape[-1])
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if key_mask is not None:
        weights = weights.masked_fill(~key_mask, 0.0)
    return (weights @ heads_first(v)).transpose(1, 2)


def _reference(i: Inputs, relative: bool) -> torch.Tensor:
    """float64 from the rounded inputs: the ESPnet arithmetic above, a row with no valid key zero."""
    q, k, v = i["q"], i["k"], i["v"]
    if relative:
        qu, qv = heads_first(q + i["pos_bias_u"]).double(), heads_first(q + i["pos_bias_v"]).double()
        scores = qu @ heads_first(k).double().transpose(-2, -1) + rel_shift(qv @ i["p"].double().permute(1, 2, 0))
    else:
        scores = heads_first(q).double() @ heads_first(k).double().transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1])
    mask = i["key_mask"]
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return (weights @ heads_first(v).double()).transpose(1, 2)


def _rel_pos_torch_reference(i: Inputs) -> torch.Tensor:
    """The ESPnet backend's own float64 reference: rounded where it rounds (both score products, their sum, the
    scaled scores and the probabilities, to the storage dtype), so it is checked at the same tolerance."""
    q, k, v = i["q"], i["k"], i["v"]
    dtype = q.dtype

    def rounded(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype).double()

    qu, qv = heads_first(q + i["pos_bias_u"]).double(), heads_first(q + i["pos_bias_v"]).double()
    matrix_ac = rounded(qu @ heads_first(k).double().transpose(-2, -1))
    matrix_bd = rel_shift(rounded(qv @ i["p"].double().permute(1, 2, 0)))
    scores = rounded(rounded(matrix_ac + matrix_bd) / math.sqrt(q.shape[-1]))
    mask = i["key_mask"]
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return (rounded(weights) @ heads_first(v).double()).transpose(1, 2)


def _attention_reference(i: Inputs) -> torch.Tensor:
    return _reference(i, relative=False)


def _rel_pos_reference(i: Inputs) -> torch.Tensor:
    return _reference(i, relative=True)


def _attention_oasr(i: Inputs) -> torch.Tensor:
    return oasr.attention(i["q"], i["k"], i["v"], i["lengths"], out=i["out"])


def _attention_torch(i: Inputs) -> torch.Tensor:
    q, k, v = (heads_first(i[name]) for name in ("q", "k", "v"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=i["key_mask"]).transpose(1, 2)


def _rel_pos_oasr(i: Inputs) -> torch.Tensor:
    return oasr.rel_pos_attention(
        i["q"], i["k"], i["v"], i["p"], i["pos_bias_u"], i["pos_bias_v"], i["lengths"], out=i["out"]
    )


def _rel_pos_torch(i: Inputs) -> torch.Tensor:
    return espnet_rel_pos_attention(i["q"], i["k"], i["v"], i["p"], i["pos_bias_u"], i["pos_bias_v"], i["key_mask"])


def products_flops(config: Config, products: int) -> int:
    """FLOP of ``products`` [t, t_k] x d products per batch row and head (t_k: the expected valid keys)."""
    b, t, h, d = config["b"], config["t"], config["h"], config["d"]
    keys = t if config["kmin"] >= 100 else t * (1 + config["kmin"] / 100) / 2
    return int(products * 2 * b * h * t * keys * d)


def _work(relative: bool):
    def work(config: Config, dtype: torch.dtype) -> Work:
        b, t, h, d = config["b"], config["t"], config["h"], config["d"]
        elements = 4 * b * t * h * d + ((2 * t - 1) * h * d + 2 * h * d if relative else 0)
        kind = "tensor_bf16" if dtype == torch.bfloat16 else "tensor_fp16"
        return Work(bytes=elements * dtype.itemsize, flops={kind: products_flops(config, 3 if relative else 2)})

    return work


ATTENTION = OpSpec(
    name="attention",
    family=families.ATTENTION,
    config_fields=("b", "t", "h", "d", "kmin"),
    make_inputs=_inputs(relative=False),
    backends={"oasr": _attention_oasr, "torch": _attention_torch},
    reference=_attention_reference,
    work=_work(relative=False),
    dtypes=DTYPES,
    default_sweep=SWEEP,
    large_case=_large_case,
    tolerances=dict(TOLERANCES),
)

REL_POS_ATTENTION = OpSpec(
    name="rel_pos_attention",
    family=families.ATTENTION,
    config_fields=("b", "t", "h", "d", "kmin"),
    make_inputs=_inputs(relative=True),
    backends={"oasr": _rel_pos_oasr, "torch": _rel_pos_torch},
    reference=_rel_pos_reference,
    work=_work(relative=True),
    dtypes=DTYPES,
    default_sweep=SWEEP,
    large_case=_large_case,
    tolerances=dict(TOLERANCES),
    backend_references={"torch": _rel_pos_torch_reference},
)
