"""Activations of the Conformer encoder: GLU and Swish (SiLU).

Channels-last tensors of float32, float16 or bfloat16; the math runs in fp32 and each
output is rounded once. Arguments are checked before any launch, shapes and dtypes first
(so those errors are the same on any machine), then devices.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ._checks import FLOAT_DTYPES, check_cuda_tensor
from .api_logging import oasr_api


@functools.cache
def _activation_module() -> Any:
    from .jit.activation import gen_activation_module

    return gen_activation_module().build_and_load()


def _check_tensor(op: str, name: str, tensor: object, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor of a supported dtype (``dtype`` exactly, when given); TypeError otherwise."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(tensor).__name__}")
    if dtype is not None and tensor.dtype != dtype:
        raise TypeError(f"oasr.{op}: `{name}` has dtype {tensor.dtype}, expected {dtype} (the dtype of `input`)")
    if tensor.dtype not in FLOAT_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in FLOAT_DTYPES)
        raise TypeError(f"oasr.{op}: `{name}` has dtype {tensor.dtype}; supported: {names}")
    return tensor


def _check_out_shape(op: str, out: torch.Tensor, shape: tuple[int, ...]) -> None:
    if out.shape != shape:
        raise ValueError(f"oasr.{op}: `out` has shape {tuple(out.shape)}, expected {tuple(shape)}")


def _check_same_device(op: str, name: str, tensor: torch.Tensor, device: torch.device) -> None:
    if tensor.device != device:
        raise ValueError(f"oasr.{op}: `{name}` is on {tensor.device}, expected {device} (the device of `input`)")


def _out_rows(out: torch.Tensor, cols: int) -> torch.Tensor | None:
    """A [rows, cols] view of ``out`` with a unit last stride, or None when there is none."""
    try:
        view = out.view(-1, cols)
    except RuntimeError:
        return None
    return view if cols <= 1 or view.stride(1) == 1 else None


@oasr_api
def glu(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gated linear unit over the last dimension: ``a * sigmoid(b)`` with ``a, b = input.chunk(2, -1)``.

    Same result as ``torch.nn.functional.glu(input, dim=-1)``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., 2C]`` (float32, float16 or bfloat16). Views whose rows are
        evenly strided with a contiguous last dimension (e.g. ``x[..., :2C]``) are read
        in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination ``[..., C]`` of ``input``'s dtype and device; must not overlap
        ``input``. Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument or an unsupported/mismatched dtype.
    ValueError
        ``input`` without dimensions or with an odd last dimension, ``out`` of the wrong
        shape, or tensors not on one CUDA device.
    """
    if not (
        isinstance(input, torch.Tensor)
        and input.is_cuda
        and input.dtype in FLOAT_DTYPES
        and input.dim() > 0
        and (
            out is None
            or (
                isinstance(out, torch.Tensor)
                and out.dtype == input.dtype
                and out.shape[:-1] == input.shape[:-1]
                and 2 * out.shape[-1] == input.shape[-1]
                and out.device == input.device
            )
        )
    ):
        _check_glu(input, out)
    in_cols = input.shape[-1]
    if in_cols % 2 != 0:
        raise ValueError(f"oasr.glu: `input` last dimension must be even (the two halves), got {in_cols}")
    cols = in_cols // 2
    if out is None:
        out = torch.empty((*input.shape[:-1], cols), dtype=input.dtype, device=input.device)
    if out.numel() == 0:
        return out
    if input.is_contiguous() and out.is_contiguous():
        _activation_module().glu(out, input)
        return out
    # Other layouts: [rows, C] views where they exist (x[..., :2C] slices), copies otherwise.
    source = input.reshape(-1, in_cols)
    if source.stride(1) != 1:
        source = source.contiguous()
    target = _out_rows(out, cols)
    if target is None:
        out.copy_(glu(input))
        return out
    _activation_module().glu(target, source)
    return out


def _check_glu(input: Any, out: Any) -> None:
    """Ordered checks of glu's arguments: types, dtypes and shapes, then devices."""
    _check_tensor("glu", "input", input)
    if input.dim() == 0:
        raise ValueError("oasr.glu: `input` must have at least one dimension")
    in_cols = input.shape[-1]
    if in_cols % 2 != 0:
        raise ValueError(f"oasr.glu: `input` last dimension must be even (the two halves), got {in_cols}")
    if out is not None:
        _check_tensor("glu", "out", out, input.dtype)
        _check_out_shape("glu", out, (*input.shape[:-1], in_cols // 2))
    check_cuda_tensor("glu", "input", input)
    if out is not None:
        _check_same_device("glu", "out", out, input.device)


@oasr_api
def swish(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Swish / SiLU, element-wise: ``input * sigmoid(input)`` (``torch.nn.functional.silu``).

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor of any shape (float32, float16 or bfloat16). Contiguous tensors and
        offset views are read in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` itself
        (in place). Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument or an unsupported/mismatched dtype.
    ValueError
        ``out`` of the wrong shape, or tensors not on one CUDA device.
    """
    if not (
        isinstance(input, torch.Tensor)
        and input.is_cuda
        and input.dtype in FLOAT_DTYPES
        and (
            out is None
            or (
                isinstance(out, torch.Tensor)
                and out.dtype == input.dtype
                and out.shape == input.shape
                and out.device == input.device
            )
        )
    ):
        _check_swish(input, out)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    source = input if input.is_contiguous() else input.contiguous()
    if out.is_contiguous():
        _activation_module().swish(out, source)
    else:
        out.copy_(swish(source))
    return out


def _check_swish(input: Any, out: Any) -> None:
    """Ordered checks of swish's arguments: types, dtypes and shapes, then devices."""
    _check_tensor("swish", "input", input)
    if out is not None:
        _check_tensor("swish", "out", out, input.dtype)
        _check_out_shape("swish", out, tuple(input.shape))
    check_cuda_tensor("swish", "input", input)
    if out is not None:
        _check_same_device("swish", "out", out, input.device)
