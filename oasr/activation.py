"""Activations of the Conformer encoder: GLU and Swish (SiLU).

Channels-last tensors of float32, float16 or bfloat16; the math runs in fp32 and each
output is rounded once. Arguments are checked before any launch (:func:`_check_glu`,
:func:`_check_swish`), types, dtypes and shapes first (so those errors are the same on any
machine), then devices, then memory and autograd (``oasr/_checks.py``). Under
``torch.compile`` each op is the custom op ``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.compiler import is_compiling

from ._checks import FLOATS, bad_input, bad_tensor, check_input_out, ready_devices
from ._custom_ops import define
from ._layouts import launch_contiguous, out_rows, rows
from .api_logging import oasr_api
from .jit.families import ACTIVATION

_READY = ready_devices(ACTIVATION)


def _check_glu(input: object, out: object) -> None:
    """glu's arguments, in order: types, dtypes and shapes, devices, then memory."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("glu", input)
    shape = input.shape
    if not shape:
        raise ValueError("oasr.glu: `input` must have at least one dimension")
    in_cols = shape[-1]
    if in_cols % 2 != 0:
        raise ValueError(f"oasr.glu: `input` last dimension must be even (the two halves), got {in_cols}")
    if out is not None:
        expected = (*shape[:-1], in_cols // 2)
        if not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == expected):
            raise bad_tensor("glu", "out", out, dtype, expected)
    check_input_out("glu", ACTIVATION, _READY, input, out, False)


def _glu(input: Tensor, out: Tensor | None) -> Tensor:
    """The eager op: check, then launch on row views, copying only when the launcher refuses a layout."""
    _check_glu(input, out)
    if out is None:
        out = torch.empty((*input.shape[:-1], input.shape[-1] // 2), dtype=input.dtype, device=input.device)
    launch = ACTIVATION.module().glu
    if not launch(out, input):
        # Layouts that are not row views ([..., 2C] slices are): copied.
        cols = out.shape[-1]
        target = out_rows(out, cols)
        if target is None:
            target = torch.empty(out.shape, dtype=out.dtype, device=out.device)
            launch(target, rows(input, 2 * cols))
            out.copy_(target)
        else:
            launch(target, rows(input, 2 * cols))
    return out


@oasr_api
def glu(input: Tensor, out: Tensor | None = None) -> Tensor:
    """Gated linear unit over the last dimension: ``a * sigmoid(b)`` with ``a, b = input.chunk(2, -1)``.

    Same result as ``torch.nn.functional.glu(input, dim=-1)``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., 2C]`` (float32, float16 or bfloat16). Views whose rows are
        evenly strided with a contiguous last dimension (e.g. ``x[..., :2C]``) are read
        in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination ``[..., C]`` of ``input``'s dtype and device; must not share memory
        with ``input`` (their address ranges may not intersect) nor overlap itself.
        Allocated when omitted.

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
        shape, tensors not on one CUDA device, a GPU whose compute capability the
        activation kernels do not support, ``out`` overlapping ``input`` or itself, or a
        tensor that requires grad while grad mode is on (no backward: use ``torch.no_grad()``).
    """
    if is_compiling():
        if out is None:
            # (a 0-dim input gets an empty `out`: the op refuses it with the eager sentence)
            shape = (*input.shape[:-1], input.shape[-1] // 2) if input.dim() else (0,)
            out = torch.empty(shape, dtype=input.dtype, device=input.device)
        _GLU(out, input)
        return out
    return _glu(input, out)


def _check_swish(input: object, out: object) -> None:
    """swish's arguments, in order: types, dtypes and shapes, devices, then memory."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("swish", input)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == input.shape):
        raise bad_tensor("swish", "out", out, dtype, input.shape)
    check_input_out("swish", ACTIVATION, _READY, input, out, True)


def _swish(input: Tensor, out: Tensor | None) -> Tensor:
    """The eager op: check, then launch, copying non-contiguous tensors."""
    _check_swish(input, out)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch = ACTIVATION.module().swish
    if not launch(out, input):
        launch_contiguous(launch, out, input)
    return out


@oasr_api
def swish(input: Tensor, out: Tensor | None = None) -> Tensor:
    """Swish / SiLU, element-wise: ``input * sigmoid(input)`` (``torch.nn.functional.silu``).

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor of any shape (float32, float16 or bfloat16). Contiguous tensors and
        offset views are read in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` itself
        (in place) but must not otherwise share memory with it, nor overlap itself.
        Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument or an unsupported/mismatched dtype.
    ValueError
        ``out`` of the wrong shape, tensors not on one CUDA device, a GPU whose compute
        capability the activation kernels do not support, ``out`` partly overlapping
        ``input`` or itself, or a tensor that requires grad while grad mode is on.
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _SWISH(out, input)
        return out
    return _swish(input, out)


# torch.compile: the custom ops (see oasr/_custom_ops.py), with the launchers' signatures.


def _glu_op(out: Tensor, input: Tensor) -> None:
    _glu(input, out)


def _swish_op(out: Tensor, input: Tensor) -> None:
    _swish(input, out)


_GLU = define("glu", "(Tensor(a!) out, Tensor input) -> ()", ("out",), _glu_op)
_SWISH = define("swish", "(Tensor(a!) out, Tensor input) -> ()", ("out",), _swish_op)
