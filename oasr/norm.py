"""Normalisations over the last dimension: LayerNorm, RMSNorm and their fused residual forms.

Channels-last tensors ``[..., C]`` of float32, float16 or bfloat16; statistics and the
affine transform run in fp32 and each output is rounded once. ``weight`` and ``bias``
are ``[C]`` tensors of the input's dtype (an fp32 weight for a half input is refused,
not converted). Any C >= 1 works; rows up to ~58000 elements are read from DRAM once.

Arguments are checked before any launch, types, dtypes and shapes first (so those errors
are the same on any machine), then devices.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from ._checks import FLOAT_DTYPES, check_cuda_tensor, check_real_scalar
from .activation import _check_out_shape, _check_same_device, _check_tensor, _out_rows
from .api_logging import oasr_api


@functools.cache
def _norm_module() -> Any:
    from .jit.norm import gen_norm_module

    return gen_norm_module().build_and_load()


def _rows(tensor: torch.Tensor, cols: int) -> torch.Tensor:
    """A [rows, cols] view with a unit last stride (copied only when no such view exists)."""
    view = tensor.reshape(-1, cols)
    return view if cols <= 1 or view.stride(1) == 1 else view.contiguous()


def _well_formed(
    input: Any,
    residual: Any,
    weight: Any,
    bias: Any,
    eps: Any,
    alpha: Any,
    out: Any,
    residual_out: Any,
    fused: bool,
) -> bool:
    """The common case, tested quickly: CUDA tensors of one dtype and device, right shapes."""
    tensor = torch.Tensor
    if not (isinstance(input, tensor) and input.is_cuda and input.dtype in FLOAT_DTYPES and input.dim() > 0):
        return False
    dtype, device, shape = input.dtype, input.device, input.shape
    c = shape[-1]
    if not (isinstance(weight, tensor) and weight.dtype == dtype and weight.shape == (c,) and weight.device == device):
        return False
    if bias is not None and not (
        isinstance(bias, tensor) and bias.dtype == dtype and bias.shape == (c,) and bias.device == device
    ):
        return False
    if type(eps) not in (float, int) or not 0.0 <= eps < math.inf:
        return False
    if type(alpha) not in (float, int):
        return False
    for t in (residual, out, residual_out) if fused else (out,):
        if t is not None and not (
            isinstance(t, tensor) and t.dtype == dtype and t.shape == shape and t.device == device
        ):
            return False
    if fused and residual is None:
        return False
    return not (out is not None and residual_out is not None and residual_out.data_ptr() == out.data_ptr())


def _diagnose(
    op: str,
    input: Any,
    residual: Any,
    weight: Any,
    bias: Any,
    eps: Any,
    alpha: Any,
    out: Any,
    residual_out: Any,
    fused: bool,
) -> None:
    """Raise the error for the first bad argument: types, dtypes and shapes, then devices."""
    _check_tensor(op, "input", input)
    if input.dim() == 0:
        raise ValueError(f"oasr.{op}: `input` must have at least one dimension")
    shape = tuple(input.shape)
    cols = shape[-1]
    if fused:
        _check_tensor(op, "residual", residual, input.dtype)
        if tuple(residual.shape) != shape:
            raise ValueError(f"oasr.{op}: `residual` has shape {tuple(residual.shape)}, expected {shape}")
    _check_tensor(op, "weight", weight, input.dtype)
    if tuple(weight.shape) != (cols,):
        raise ValueError(f"oasr.{op}: `weight` has shape {tuple(weight.shape)}, expected ({cols},)")
    if bias is not None:
        _check_tensor(op, "bias", bias, input.dtype)
        if tuple(bias.shape) != (cols,):
            raise ValueError(f"oasr.{op}: `bias` has shape {tuple(bias.shape)}, expected ({cols},)")
    eps = check_real_scalar(op, "eps", eps)
    if not 0.0 <= eps < math.inf:
        raise ValueError(f"oasr.{op}: `eps` must be finite and >= 0, got {eps}")
    check_real_scalar(op, "alpha", alpha)
    if out is not None:
        _check_tensor(op, "out", out, input.dtype)
        _check_out_shape(op, out, shape)
    if residual_out is not None:
        _check_tensor(op, "residual_out", residual_out, input.dtype)
        if tuple(residual_out.shape) != shape:
            raise ValueError(f"oasr.{op}: `residual_out` has shape {tuple(residual_out.shape)}, expected {shape}")
        if out is not None and residual_out.data_ptr() == out.data_ptr():
            raise ValueError(f"oasr.{op}: `out` and `residual_out` must be different tensors")
    check_cuda_tensor(op, "input", input)
    for name, tensor in (
        ("residual", residual),
        ("weight", weight),
        ("bias", bias),
        ("out", out),
        ("residual_out", residual_out),
    ):
        if tensor is not None:
            _check_same_device(op, name, tensor, input.device)


def _norm(
    op: str,
    rms: bool,
    input: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float,
    alpha: float,
    out: torch.Tensor | None,
    residual_out: torch.Tensor | None,
) -> torch.Tensor:
    fused = op.startswith("add_")
    if not _well_formed(input, residual, weight, bias, eps, alpha, out, residual_out, fused):
        _diagnose(op, input, residual, weight, bias, eps, alpha, out, residual_out, fused)
    eps, alpha = float(eps), float(alpha)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    if input.numel() == 0:
        return out
    module = _norm_module()

    # Contiguous tensors (the common case) go to the kernel as they are.
    if (
        input.is_contiguous()
        and out.is_contiguous()
        and weight.is_contiguous()
        and (bias is None or bias.is_contiguous())
        and (not fused or residual.is_contiguous())
        and (residual_out is None or residual_out.is_contiguous())
    ):
        if fused:
            (module.add_rms_norm if rms else module.add_layer_norm)(
                out, residual_out, input, residual, weight, bias, eps, alpha
            )
        else:
            (module.rms_norm if rms else module.layer_norm)(out, input, weight, bias, eps)
        return out

    # Other layouts: [rows, C] views where they exist (x[..., :C] slices), copies otherwise.
    cols = input.shape[-1]
    target = _out_rows(out, cols)
    sum_target = None if residual_out is None else _out_rows(residual_out, cols)
    if target is None or (residual_out is not None and sum_target is None):
        # A destination with no [rows, C] view: compute into fresh tensors, then copy.
        fresh_sum = None if residual_out is None else torch.empty_like(input, memory_format=torch.contiguous_format)
        result = _norm(op, rms, input, residual, weight, bias, eps, alpha, None, fresh_sum)
        out.copy_(result)
        if residual_out is not None:
            residual_out.copy_(fresh_sum)
        return out
    source = _rows(input, cols)
    w = weight.contiguous()
    b = None if bias is None else bias.contiguous()
    if fused:
        (module.add_rms_norm if rms else module.add_layer_norm)(
            target, sum_target, source, _rows(residual, cols), w, b, eps, alpha
        )
    else:
        (module.rms_norm if rms else module.layer_norm)(target, source, w, b, eps)
    return out


@oasr_api
def layer_norm(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
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
        Destination of ``input``'s shape, dtype and device; may be ``input`` (in place).

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
        negative ``eps``, or tensors not on one CUDA device.
    """
    return _norm("layer_norm", False, input, None, weight, bias, eps, 1.0, out, None)


@oasr_api
def rms_norm(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x^2) + eps) * weight (+ bias)``.

    Matches ``torch.nn.functional.rms_norm(input, (C,), weight, eps)`` (plus ``bias``).
    Parameters, return value and errors as :func:`layer_norm`.
    """
    return _norm("rms_norm", True, input, None, weight, bias, eps, 1.0, out, None)


@oasr_api
def add_layer_norm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fused residual add and LayerNorm: ``layer_norm(residual + alpha * input)``.

    The sum is formed in fp32 (one fma per element) and normalised without being rounded;
    with ``residual_out`` it is also written there, rounded once to the storage dtype.
    One kernel reads ``input`` and ``residual`` once and writes ``out`` (and the sum).

    Parameters
    ----------
    input, residual : torch.Tensor
        CUDA tensors ``[..., C]`` of one shape, dtype and device.
    weight, bias, eps, out
        As in :func:`layer_norm`. ``out`` may be ``input`` or ``residual``.
    alpha : float
        Scale of ``input`` in the sum (e.g. 0.5 for the Macaron half-step feed-forward).
    residual_out : torch.Tensor, optional
        Receives the sum; ``input``'s shape, dtype and device. May be ``residual`` or
        ``input`` (updated in place), not ``out``.

    Returns
    -------
    torch.Tensor
        ``out`` (the sum, when asked for, is in ``residual_out``).

    Raises
    ------
    TypeError, ValueError
        As :func:`layer_norm`, for every tensor argument; ValueError also when ``out`` and
        ``residual_out`` are the same tensor.
    """
    return _norm("add_layer_norm", False, input, residual, weight, bias, eps, alpha, out, residual_out)


@oasr_api
def add_rms_norm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fused residual add and RMSNorm: ``rms_norm(residual + alpha * input)``.

    Parameters, return value and errors as :func:`add_layer_norm`.
    """
    return _norm("add_rms_norm", True, input, residual, weight, bias, eps, alpha, out, residual_out)
