"""Element-wise scale: ``out = input * factor``.

Arguments are checked before any launch (:func:`_check_scale`), types, dtypes and shapes
first, then devices, then memory and autograd (see ``oasr/_checks.py``). Under
``torch.compile`` the op is the custom op ``torch.ops.oasr.scale``.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.compiler import is_compiling

from ._checks import FLOATS, bad_input, bad_tensor, check_input_out, check_real_scalar, ready_devices
from ._custom_ops import define
from ._layouts import launch_contiguous
from .api_logging import oasr_api
from .jit.families import SCALE

_READY = ready_devices(SCALE)


def _check_scale(input: object, factor: object, out: object) -> float:
    """scale's arguments, in order: types, dtypes and shapes, the factor, devices, then memory; the factor."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("scale", input)
    if type(factor) is not float:
        factor = check_real_scalar("scale", "factor", factor)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == input.shape):
        raise bad_tensor("scale", "out", out, dtype, input.shape)
    check_input_out("scale", SCALE, _READY, input, out, True)
    return factor


def _scale(input: Tensor, factor: float, out: Tensor | None) -> Tensor:
    """The eager op: check, then launch, copying non-contiguous tensors."""
    factor = _check_scale(input, factor, out)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch = SCALE.module().run
    if not launch(out, input, factor):
        launch_contiguous(launch, out, input, factor)
    return out


@oasr_api
def scale(input: Tensor, factor: float, out: Tensor | None = None) -> Tensor:
    """Multiply every element by ``factor``, computing in fp32.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor of any shape; float32, float16 or bfloat16. Views with an
        offset (``x[1:]``) run in place; other non-contiguous inputs are
        made contiguous first.
    factor : float
        The scale factor (rounded to fp32, as torch does for ``x * factor``). Any
        float, inf and NaN included (as ``x * inf`` in torch); an int beyond the
        float range is refused.
    out : torch.Tensor, optional
        Destination with ``input``'s shape, dtype and device. May be ``input``
        itself (in place) but must not otherwise share memory with it, nor
        overlap itself (an ``expand``ed view). Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``, holding ``input * factor``; bit-identical to torch's ``input * factor``.

    Raises
    ------
    TypeError
        ``input``/``out`` not a tensor, an unsupported dtype, or a non-numeric ``factor``.
    ValueError
        ``out`` of the wrong shape, tensors not on one CUDA device, a GPU whose compute
        capability the scale kernel does not support, ``out`` partly overlapping ``input``
        or itself, an int ``factor`` too large for a float, or a tensor that requires grad
        while grad mode is on (the op has no backward: use ``torch.no_grad()``).
    """
    if is_compiling():
        out = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
        _SCALE(out, input, factor)
        return out
    return _scale(input, factor, out)


# torch.compile: the custom op (see oasr/_custom_ops.py), with the launcher's signature.


def _scale_op(out: Tensor, input: Tensor, factor: float) -> None:
    _scale(input, factor, out)


_SCALE = define("scale", "(Tensor(a!) out, Tensor input, float factor) -> ()", ("out",), _scale_op)
