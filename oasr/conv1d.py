"""Depthwise convolution over time on channels-last ``[B, T, C]`` tensors (the Conformer convolution module).

* :func:`depthwise_conv1d`: padding, bias, mask and activation fused in one kernel.
* :func:`depthwise_conv1d_step`: the streaming form, a chunk convolved with the left
  context kept in a ``[B, K-1, C]`` state that is updated in place.
* :func:`fold_batch_norm`: an inference BatchNorm folded into the conv's weight and bias,
  so that conv -> BatchNorm -> SiLU is one :func:`depthwise_conv1d` call.

float32, float16 and bfloat16 storage; products are summed in fp32 and each output is
rounded once. Weights are ``[K, C]`` (``[K, 1, C]`` accepted), of the input's dtype:
``weight[k, c]`` is PyTorch's ``conv.weight[c, 0, k]``. Any K >= 1, any C. float16 and
bfloat16 convolutions with K <= 65 on 16-byte aligned views run on tensor cores
(``include/oasr/conv1d/tensor_core.cuh``); there an inf or NaN input frame also makes NaN the
outputs of every 8-output block that reads it (at K = 15 and 31: up to 9 outputs before its
window and 7 after), and SiLU is ``x * (0.5 + 0.5 tanh(x / 2))`` through ``tanh.approx`` (an
absolute error near ``4e-6 * |x|``, measured on the H200, under fp16's rounding of O(1) outputs).

Layouts: the channels must be contiguous; the batch and time strides are free, so batch
views (``x[::2]``, ``x[:, 10:]``, a slice of a bigger tensor) are read in place. Other
layouts (non-contiguous channels) are copied first.

Arguments are checked before any launch in ``oasr/_checks.py``'s order and wording: types,
dtypes and shapes first (so those errors are the same on any machine), then devices, then
memory (a written tensor overlapping a read one or itself) and autograd. The two convolutions are declared once
(``oasr/_op.py``), which also makes them the custom ops ``torch.ops.oasr.<op>``; :func:`fold_batch_norm` is
plain torch, which dynamo traces.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ._checks import (
    FLOAT_DTYPES,
    FLOATS,
    bad_input,
    bad_tensor,
    check_activation,
    check_pair,
    check_placement,
    check_real_scalar,
    dtype_names,
    ready_devices,
)
from ._op import op
from .api_logging import oasr_api
from .jit.families import CONV1D

ACTIVATIONS = (None, "silu", "relu", "gelu")
"""The activations the kernels fuse (``"gelu"`` is the exact, erf form); passed to them by name."""
MAX_PADDING = 2**30
"""Padding beyond any sequence a kernel indexes in 32 bits (refused before it reaches an allocation)."""

_READY = ready_devices(CONV1D)
_FOLD_DTYPES = (*FLOAT_DTYPES, torch.float64)
"""What fold_batch_norm folds (in float64): real floating tensors; integers would be truncated, float8 is storage."""


# ---------------------------------------------------------------------------
# Argument checks (oasr/_checks.py's order and wording), raised before any launch
# ---------------------------------------------------------------------------


def _weights(op: str, weight: object, bias: object, dtype: torch.dtype, channels: int) -> int:
    """Check ``weight`` ([K, C] or [K, 1, C]) and ``bias`` ([C]); return K."""
    if not (isinstance(weight, Tensor) and weight.dtype is dtype):
        raise bad_tensor(op, "weight", weight, dtype, (-1, channels))  # a type or dtype error
    shape = tuple(weight.shape)
    if not (len(shape) == 2 or (len(shape) == 3 and shape[1] == 1)) or shape[-1] != channels or shape[0] < 1:
        raise ValueError(
            f"oasr.{op}: `weight` has shape {shape}, expected [K, {channels}] or [K, 1, {channels}], K >= 1"
        )
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == (channels,)):
        raise bad_tensor(op, "bias", bias, dtype, (channels,))
    return shape[0]


def _check_conv(input: Any, weight: Any, bias: Any, padding: Any, activation: Any, mask: Any, out: Any) -> tuple:
    """Every check of :func:`depthwise_conv1d`'s arguments; ``out``'s shape."""
    op = "depthwise_conv1d"
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input(op, input)
    if input.dim() != 3:
        raise ValueError(f"oasr.{op}: `input` must be [B, T, C], got shape {tuple(input.shape)}")
    b, t, c = input.shape
    k = _weights(op, weight, bias, dtype, c)
    left, right = check_pair(op, "padding", padding, 0, "(left, right)", MAX_PADDING)
    out_len = t + left + right - k + 1
    if out_len < 1:
        raise ValueError(
            f"oasr.{op}: the kernel size K={k} (from `weight`) is larger than the padded length "
            f"T + left + right = {t} + {left} + {right} = {t + left + right} (`input` and `padding`): "
            f"the output would have {out_len} frames"
        )
    check_activation(op, activation, ACTIVATIONS)
    if mask is not None:
        if not isinstance(mask, Tensor):
            raise TypeError(f"oasr.{op}: `mask` must be a torch.Tensor or None, got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(f"oasr.{op}: `mask` has dtype {mask.dtype}, expected torch.bool (True keeps a frame)")
        if tuple(mask.shape) not in ((b, t), (b, t, 1)):
            raise ValueError(f"oasr.{op}: `mask` has shape {tuple(mask.shape)}, expected ({b}, {t}) or ({b}, {t}, 1)")
    shape = (b, out_len, c)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    # The convolution reads neighbours: never in place.
    check_placement(
        op,
        CONV1D,
        _READY,
        (("input", input), ("weight", weight), ("bias", bias), ("mask", mask)),
        (("out", out),),
    )
    return shape


def _check_step(input_chunk: Any, state: Any, weight: Any, bias: Any, activation: Any, out: Any) -> tuple:
    """Every check of :func:`depthwise_conv1d_step`'s arguments; ``out``'s shape."""
    op = "depthwise_conv1d_step"
    if not (isinstance(input_chunk, Tensor) and (dtype := input_chunk.dtype) in FLOATS):
        raise bad_input(op, input_chunk, name="input_chunk")
    if input_chunk.dim() != 3:
        raise ValueError(f"oasr.{op}: `input_chunk` must be [B, L, C], got shape {tuple(input_chunk.shape)}")
    b, length, c = input_chunk.shape
    if length < 1:
        raise ValueError(f"oasr.{op}: `input_chunk` must have at least one frame (L >= 1), got L={length}")
    k = _weights(op, weight, bias, dtype, c)
    if not (isinstance(state, Tensor) and state.dtype is dtype and state.shape == (b, k - 1, c)):
        raise bad_tensor(op, "state", state, dtype, (b, k - 1, c))
    if state.numel() and state.stride(2) != 1 and c > 1:
        raise ValueError(f"oasr.{op}: `state` must have contiguous channels (it is updated in place)")
    check_activation(op, activation, ACTIVATIONS)
    shape = input_chunk.shape
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, (b, length, c))
    check_placement(
        op,
        CONV1D,
        _READY,
        (("input_chunk", input_chunk), ("weight", weight), ("bias", bias)),
        (("state", state), ("out", out)),
    )
    return shape


# ---------------------------------------------------------------------------
# Launches: channels must be contiguous (others are copied), the weight a packed [K, C]
# ---------------------------------------------------------------------------


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when its channels (last dim) are contiguous, else a contiguous copy."""
    return t if t.shape[-1] <= 1 or t.stride(-1) == 1 else t.contiguous()


def _flat_weights(weight: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    w = weight.reshape(weight.shape[0], weight.shape[-1]).contiguous()
    return w, None if bias is None else bias.contiguous()


def _launch_conv(
    out: Tensor,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    padding: int | tuple[int, int],
    activation: str | None,
    mask: Tensor | None,
) -> None:
    if out.numel() == 0:
        return
    left, right = (padding, padding) if isinstance(padding, int) else padding
    target = _channels_last(out)
    w, b = _flat_weights(weight, bias)
    m = None if mask is None else (mask.squeeze(-1) if mask.dim() == 3 else mask).view(torch.uint8)
    CONV1D.module().depthwise_conv1d(target, _channels_last(input), w, b, left, right, m, activation)
    if target is not out:
        out.copy_(target)


def _launch_step(
    out: Tensor, input_chunk: Tensor, state: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None
) -> None:
    if out.numel() == 0:
        return
    target = _channels_last(out)
    w, b = _flat_weights(weight, bias)
    CONV1D.module().depthwise_conv1d_step(target, _channels_last(input_chunk), state, w, b, activation)
    if target is not out:
        out.copy_(target)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


@op(check=_check_conv, launch=_launch_conv)
def depthwise_conv1d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    padding: int | tuple[int, int] = 0,
    activation: str | None = None,
    mask: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Depthwise (per-channel) convolution over time: ``act(conv(x * mask) + bias)``.

    ``out[b, o, c] = act(bias[c] + sum_k weight[k, c] * x[b, o + k - left, c])`` with ``x``
    zero outside ``[0, T)`` and on masked frames; the same as
    ``act(F.conv1d(F.pad(x.transpose(1, 2), (left, right)), weight.t().unsqueeze(1), bias, groups=C))``
    transposed back to ``[B, T_out, C]``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[B, T, C]`` (float32, float16 or bfloat16). Any batch and time
        strides with contiguous channels are read in place; other layouts are copied.
    weight : torch.Tensor
        ``[K, C]`` or ``[K, 1, C]``, of ``input``'s dtype and device.
    bias : torch.Tensor, optional
        ``[C]``, of ``input``'s dtype and device.
    padding : int or (int, int)
        Zero frames added before and after the sequence (``(K - 1) // 2`` each side keeps
        the length for odd K; ``(K - 1, 0)`` is the causal form). Any value >= 0, also
        larger than K.
    activation : {None, "silu", "relu", "gelu"}
        Applied after the bias (``"gelu"``: the exact erf form, as ``F.gelu``).
    mask : torch.Tensor, optional
        ``[B, T]`` or ``[B, T, 1]`` bool on ``input``'s device: frames where it is False
        are zeroed before the convolution (WeNet's ``mask_pad``). Any strides.
    out : torch.Tensor, optional
        Destination ``[B, T_out, C]``, ``T_out = T + left + right - K + 1``, of ``input``'s
        dtype and device, not overlapping ``input``. Any batch and time strides with
        contiguous channels are written in place.

    Returns
    -------
    torch.Tensor
        ``out`` (allocated contiguous when omitted).

    Raises
    ------
    TypeError
        Non-tensor arguments, unsupported dtypes, dtypes differing from ``input``'s,
        a non-bool ``mask``, a padding or activation of the wrong type.
    ValueError
        Wrong shapes, ``K > T + left + right`` (an empty output), negative padding, an
        unknown activation, tensors not on one CUDA device, ``out`` overlapping ``input`` or
        itself (an ``expand``ed view), a tensor that requires grad while grad mode is on
        (no backward: use ``torch.no_grad()``).
    """


@op(check=_check_step, launch=_launch_step, mutates=("state",))
def depthwise_conv1d_step(
    input_chunk: torch.Tensor,
    state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """One streaming step of a causal depthwise convolution; updates ``state`` in place.

    The output is the convolution of ``cat([state, input_chunk], dim=1)`` without padding
    (``L`` frames), and afterwards ``state`` holds the last ``K - 1`` frames of that
    concatenation. Feeding a sequence chunk by chunk from a zero state gives the same
    frames as ``depthwise_conv1d(x, weight, bias, padding=(K - 1, 0))``. Any chunk length
    ``L >= 1``, also shorter than ``K - 1``. Two kernels on the current stream (the
    convolution, then the state update); no host synchronisation and no allocation
    besides ``out``, so the step can be captured in a CUDA graph.

    Parameters
    ----------
    input_chunk : torch.Tensor
        CUDA tensor ``[B, L, C]`` (float32, float16 or bfloat16); batch and time strides free.
    state : torch.Tensor
        ``[B, K - 1, C]`` of ``input_chunk``'s dtype and device, channels contiguous, not
        overlapping ``input_chunk`` (zeros at the start of a stream). Updated in place.
    weight, bias, activation
        As in :func:`depthwise_conv1d`.
    out : torch.Tensor, optional
        Destination ``[B, L, C]``, not overlapping ``input_chunk`` or ``state``.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As :func:`depthwise_conv1d`; ValueError also for a ``state`` of the wrong shape,
        with non-contiguous channels, overlapping ``input_chunk`` or itself; ``out``
        overlapping ``state``; ``L < 1``.
    """


@oasr_api
def fold_batch_norm(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    bn_weight: torch.Tensor | None = None,
    bn_bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold an inference BatchNorm into the depthwise conv that precedes it.

    ``bn(conv(x, weight, bias)) == conv(x, w', b')`` with ``s = bn_weight / sqrt(running_var + eps)``,
    ``w' = weight * s`` (per channel) and ``b' = (bias - running_mean) * s + bn_bias``.
    Computed in float64, returned in ``weight``'s dtype (and device). Pure PyTorch: works
    on CPU and CUDA tensors.

    Parameters
    ----------
    weight : torch.Tensor
        ``[K, C]`` or ``[K, 1, C]`` conv weight (the returned weight has the same shape).
    bias : torch.Tensor or None
        ``[C]`` conv bias (None: zero).
    running_mean, running_var : torch.Tensor
        ``[C]`` BatchNorm statistics.
    bn_weight, bn_bias : torch.Tensor, optional
        ``[C]`` BatchNorm affine parameters (None: 1 and 0, ``affine=False``).
    eps : float
        BatchNorm's epsilon.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        The folded weight (``weight``'s shape and dtype) and bias (``[C]``, ``weight``'s dtype).

    Raises
    ------
    TypeError
        Non-tensor arguments or a non-numeric ``eps``.
    ValueError
        Parameters that are not ``[C]``, or a negative ``eps``.
    """
    op = "fold_batch_norm"
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"oasr.{op}: `weight` must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dtype not in _FOLD_DTYPES:
        raise TypeError(f"oasr.{op}: `weight` has dtype {weight.dtype}; supported: {dtype_names(_FOLD_DTYPES)}")
    if weight.dim() not in (2, 3) or (weight.dim() == 3 and weight.shape[1] != 1):
        raise ValueError(f"oasr.{op}: `weight` has shape {tuple(weight.shape)}, expected [K, C] or [K, 1, C]")
    c = weight.shape[-1]
    for name, value in (
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("bn_weight", bn_weight),
        ("bn_bias", bn_bias),
    ):
        if value is None and name in ("running_mean", "running_var"):
            raise TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got None")
        if value is not None:
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor or None, got {type(value).__name__}")
            if value.dtype not in _FOLD_DTYPES:
                raise TypeError(f"oasr.{op}: `{name}` has dtype {value.dtype}; supported: {dtype_names(_FOLD_DTYPES)}")
            if tuple(value.shape) != (c,):
                raise ValueError(f"oasr.{op}: `{name}` has shape {tuple(value.shape)}, expected ({c},)")
    eps = check_real_scalar(op, "eps", eps)
    if not 0.0 <= eps < math.inf:
        raise ValueError(f"oasr.{op}: `eps` must be finite and >= 0, got {eps}")

    def f64(t: torch.Tensor | None, default: float) -> torch.Tensor:
        if t is None:
            return torch.full((c,), default, dtype=torch.float64, device=weight.device)
        return t.detach().to(device=weight.device, dtype=torch.float64)

    scale = f64(bn_weight, 1.0) / torch.sqrt(f64(running_var, 0.0) + float(eps))
    folded_weight = (weight.detach().double() * scale).to(weight.dtype)
    folded_bias = ((f64(bias, 0.0) - f64(running_mean, 0.0)) * scale + f64(bn_bias, 0.0)).to(weight.dtype)
    return folded_weight, folded_bias
