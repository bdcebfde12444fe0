"""Normalisations over the last dimension: LayerNorm, RMSNorm and their fused residual forms.

Channels-last tensors ``[..., C]`` of float32, float16 or bfloat16; statistics and the
affine transform run in fp32 and each output is rounded once. ``weight`` and ``bias``
are ``[C]`` tensors of the input's dtype (an fp32 weight for a half input is refused,
not converted). Any C >= 1 works; rows up to ~58000 elements are read from DRAM once.

Arguments are checked before any launch (:func:`_check_norm`), types, dtypes and shapes
first (so those errors are the same on any machine), then devices, then memory and
autograd (``oasr/_checks.py``). Under ``torch.compile`` each op is the custom op
``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.compiler import is_compiling

from ._checks import (
    FLOATS,
    bad_input,
    bad_tensor,
    check_device,
    check_outs,
    check_real_scalar,
    other_device,
    ready_devices,
    requires_grad,
)
from ._custom_ops import define
from ._layouts import out_rows, rows
from .api_logging import oasr_api
from .jit.families import NORM

_READY = ready_devices(NORM)
_INF = math.inf
_grad_enabled = torch.is_grad_enabled
_NAMES = ("input", "residual", "weight", "bias", "out", "residual_out")


def _check_norm(
    op: str,
    input: object,
    residual: object,
    weight: object,
    bias: object,
    eps: object,
    alpha: object,
    out: object,
    residual_out: object,
    fused: bool,
) -> tuple[float, float]:
    """Every argument of a norm, in order (types, dtypes and shapes, scalars, devices, then memory); (eps, alpha)."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input(op, input)
    shape = input.shape
    if not shape:
        raise ValueError(f"oasr.{op}: `input` must have at least one dimension")
    if fused and not (isinstance(residual, Tensor) and residual.dtype is dtype and residual.shape == shape):
        raise bad_tensor(op, "residual", residual, dtype, shape)
    vector = (shape[-1],)
    if not (isinstance(weight, Tensor) and weight.dtype is dtype and weight.shape == vector):
        raise bad_tensor(op, "weight", weight, dtype, vector)
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == vector):
        raise bad_tensor(op, "bias", bias, dtype, vector)
    if type(eps) is not float:
        eps = check_real_scalar(op, "eps", eps)
    if not 0.0 <= eps < _INF:
        raise ValueError(f"oasr.{op}: `eps` must be finite and >= 0, got {eps}")
    if fused:
        if type(alpha) is not float:
            alpha = check_real_scalar(op, "alpha", alpha)
        if not -_INF < alpha < _INF:
            raise ValueError(f"oasr.{op}: `alpha` must be finite, got {alpha}")
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    if residual_out is not None:
        if not (isinstance(residual_out, Tensor) and residual_out.dtype is dtype and residual_out.shape == shape):
            raise bad_tensor(op, "residual_out", residual_out, dtype, shape)
        if residual_out is out:  # (the same memory in another tensor: refused with the overlaps, below)
            raise ValueError(f"oasr.{op}: `out` and `residual_out` must be different tensors")

    device = input.device
    if device not in _READY:
        check_device(op, NORM, device)
    if fused and residual.device != device:
        raise other_device(op, "residual", residual, device)
    if weight.device != device:
        raise other_device(op, "weight", weight, device)
    if bias is not None and bias.device != device:
        raise other_device(op, "bias", bias, device)
    if out is not None and out.device != device:
        raise other_device(op, "out", out, device)
    if residual_out is not None and residual_out.device != device:
        raise other_device(op, "residual_out", residual_out, device)
    # Memory: in place is exact aliasing of `input` (or `residual`); any other shared memory is refused.
    if residual_out is not None or (out is not None and (fused or out is not input)):
        check_outs(op, out, residual_out, input, residual)
    if _grad_enabled() and (
        input.requires_grad
        or weight.requires_grad
        or (fused and residual.requires_grad)
        or (bias is not None and bias.requires_grad)
        or (out is not None and out.requires_grad)
        or (residual_out is not None and residual_out.requires_grad)
    ):
        raise requires_grad(op, _NAMES, (input, residual, weight, bias, out, residual_out))
    return eps, alpha


def _norm(
    op: str,
    fused: bool,
    input: Tensor,
    residual: Tensor | None,
    weight: Tensor,
    bias: Tensor | None,
    eps: float,
    alpha: float,
    out: Tensor | None,
    residual_out: Tensor | None,
) -> Tensor:
    """The eager op: check, then launch on the tensors as they are (row views), copying only when
    the launcher refuses a layout."""
    eps, alpha = _check_norm(op, input, residual, weight, bias, eps, alpha, out, residual_out, fused)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch = getattr(NORM.module(), op)
    if fused:
        done = launch(out, residual_out, input, residual, weight, bias, eps, alpha)
    else:
        done = launch(out, input, weight, bias, eps)
    if not done:
        _norm_copied(launch, fused, input, residual, weight, bias, eps, alpha, out, residual_out)
    return out


def _norm_copied(
    launch: object,
    fused: bool,
    input: Tensor,
    residual: Tensor | None,
    weight: Tensor,
    bias: Tensor | None,
    eps: float,
    alpha: float,
    out: Tensor,
    residual_out: Tensor | None,
) -> None:
    """Layouts the launcher refuses: [rows, C] views where they exist, copies otherwise."""
    cols = input.shape[-1]
    source = rows(input, cols)
    weight, bias = weight.contiguous(), None if bias is None else bias.contiguous()
    target = out_rows(out, cols)
    sum_target = None if residual_out is None else out_rows(residual_out, cols)
    # A destination with no [rows, C] view: computed into a fresh tensor, then copied.
    fresh = target is None or (residual_out is not None and sum_target is None)
    if fresh:
        target = torch.empty(source.shape, dtype=input.dtype, device=input.device)
        sum_target = None if residual_out is None else torch.empty_like(target)
    if fused:
        launch(target, sum_target, source, rows(residual, cols), weight, bias, eps, alpha)
    else:
        launch(target, source, weight, bias, eps)
    if fresh:
        out.copy_(target.view(out.shape))
        if residual_out is not None:
            residual_out.copy_(sum_target.view(residual_out.shape))


@oasr_api
def layer_norm(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    out: Tensor | None = None,
) -> Tensor:
    """LayerNorm over the last dimension: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Two-pass fp32 statistics (the mean, then the biased variance around it) from one read
    of the row; matches ``torch.nn.functional.layer_norm(input, (C,), weight, bias, eps)``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., C]`` (float32, float16 or bfloat16). Evenly strided row views
        are read in place; other layouts are copied first.
    weight : torch.Tensor
        ``[C]``, same dtype and device as ``input``.
    bias : torch.Tensor, optional
        ``[C]``, same dtype and device as ``input``.
    eps : float
        Added to the variance; finite and >= 0.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` (in place),
        but must not otherwise share memory with it (a shifted view of ``input`` is
        refused), nor overlap itself.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        Non-tensor arguments, unsupported dtypes, or ``weight``/``bias``/``out`` whose dtype
        differs from ``input``'s; a non-numeric ``eps``.
    ValueError
        Wrong shapes (``weight``/``bias`` not ``[C]``, ``out`` not ``input.shape``), a
        negative, non-finite or too large ``eps``, tensors not on one CUDA device, a GPU
        whose compute capability the norm kernels do not support, ``out`` partly
        overlapping another argument or itself, or a tensor that requires grad while grad
        mode is on (the ops have no backward: use ``torch.no_grad()``).
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _LAYER_NORM(out, input, weight, bias, eps)
        return out
    return _norm("layer_norm", False, input, None, weight, bias, eps, 1.0, out, None)


@oasr_api
def rms_norm(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    out: Tensor | None = None,
) -> Tensor:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x^2) + eps) * weight (+ bias)``.

    Matches ``torch.nn.functional.rms_norm(input, (C,), weight, eps)`` (plus ``bias``).
    Parameters, return value and errors as :func:`layer_norm`.
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _RMS_NORM(out, input, weight, bias, eps)
        return out
    return _norm("rms_norm", False, input, None, weight, bias, eps, 1.0, out, None)


@oasr_api
def add_layer_norm(
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: Tensor | None = None,
    residual_out: Tensor | None = None,
) -> Tensor:
    """Fused residual add and LayerNorm: ``layer_norm(residual + alpha * input)``.

    The sum is formed in fp32 (one fma per element) and normalised without being rounded;
    with ``residual_out`` it is also written there, rounded once to the storage dtype.
    One kernel reads ``input`` and ``residual`` once and writes ``out`` (and the sum).

    Parameters
    ----------
    input, residual : torch.Tensor
        CUDA tensors ``[..., C]`` of one shape, dtype and device.
    weight, bias, eps, out
        As in :func:`layer_norm`. ``out`` may be ``input`` or ``residual`` (in place), but
        must not otherwise share memory with either.
    alpha : float
        Scale of ``input`` in the sum (e.g. 0.5 for the Macaron half-step feed-forward);
        finite.
    residual_out : torch.Tensor, optional
        Receives the sum; ``input``'s shape, dtype and device. May be ``residual`` or
        ``input`` (updated in place), not ``out``; must not otherwise share memory with
        ``input``, ``residual`` or ``out``, nor overlap itself.

    Returns
    -------
    torch.Tensor
        ``out`` (the sum, when asked for, is in ``residual_out``).

    Raises
    ------
    TypeError, ValueError
        As :func:`layer_norm`, for every tensor argument; ValueError also when ``out`` and
        ``residual_out`` are the same tensor or overlap, or ``alpha`` is not finite.
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _ADD_LAYER_NORM(out, residual_out, input, residual, weight, bias, eps, alpha)
        return out
    return _norm("add_layer_norm", True, input, residual, weight, bias, eps, alpha, out, residual_out)


@oasr_api
def add_rms_norm(
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: Tensor | None = None,
    residual_out: Tensor | None = None,
) -> Tensor:
    """Fused residual add and RMSNorm: ``rms_norm(residual + alpha * input)``.

    Parameters, return value and errors as :func:`add_layer_norm`.
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _ADD_RMS_NORM(out, residual_out, input, residual, weight, bias, eps, alpha)
        return out
    return _norm("add_rms_norm", True, input, residual, weight, bias, eps, alpha, out, residual_out)


# torch.compile: the custom ops (see oasr/_custom_ops.py), with the launchers' signatures.


def _layer_norm_op(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, eps: float) -> None:
    _norm("layer_norm", False, input, None, weight, bias, eps, 1.0, out, None)


def _rms_norm_op(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, eps: float) -> None:
    _norm("rms_norm", False, input, None, weight, bias, eps, 1.0, out, None)


def _add_layer_norm_op(
    out: Tensor,
    residual_out: Tensor | None,
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    eps: float,
    alpha: float,
) -> None:
    _norm("add_layer_norm", True, input, residual, weight, bias, eps, alpha, out, residual_out)


def _add_rms_norm_op(
    out: Tensor,
    residual_out: Tensor | None,
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    eps: float,
    alpha: float,
) -> None:
    _norm("add_rms_norm", True, input, residual, weight, bias, eps, alpha, out, residual_out)


_NORM = "(Tensor(a!) out, Tensor input, Tensor weight, Tensor? bias, float eps) -> ()"
_ADD_NORM = (
    "(Tensor(a!) out, Tensor(b!)? residual_out, Tensor input, Tensor residual, Tensor weight, Tensor? bias, "
    "float eps, float alpha) -> ()"
)
_LAYER_NORM = define("layer_norm", _NORM, ("out",), _layer_norm_op)
_RMS_NORM = define("rms_norm", _NORM, ("out",), _rms_norm_op)
_ADD_LAYER_NORM = define("add_layer_norm", _ADD_NORM, ("out", "residual_out"), _add_layer_norm_op)
_ADD_RMS_NORM = define("add_rms_norm", _ADD_NORM, ("out", "residual_out"), _add_rms_norm_op)
