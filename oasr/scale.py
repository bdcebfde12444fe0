"""Element-wise scale: ``out = input * factor``.

Arguments are checked before any launch (:func:`_check_scale`), types, dtypes and shapes
first, then devices, then memory and autograd (see ``oasr/_checks.py``). The op is declared
once (``oasr/_op.py``), which also makes it the custom op ``torch.ops.oasr.scale``.
"""

from __future__ import annotations

from torch import Tensor

from ._checks import FLOATS, bad_input, bad_tensor, check_placement, check_real_scalar, ready_devices
from ._layouts import launch_contiguous
from ._op import LIKE_INPUT, op
from .jit.families import SCALE

_READY = ready_devices(SCALE)


def _check_scale(input: object, factor: object, out: object) -> tuple[int, ...]:
    """scale's arguments, in order: types, dtypes and shapes, the factor, devices, then memory; ``out``'s shape."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("scale", input)
    if type(factor) is not float:
        check_real_scalar("scale", "factor", factor)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == input.shape):
        raise bad_tensor("scale", "out", out, dtype, input.shape)
    check_placement("scale", SCALE, _READY, (("input", input),), (("out", out),), in_place=("input",))
    return input.shape


def _launch_scale(out: Tensor, input: Tensor, factor: float) -> None:
    """The kernel reads and writes contiguous tensors: others go through contiguous copies."""
    launch = SCALE.module().scale
    factor = factor if type(factor) is float else float(factor)
    if input.is_contiguous() and out.is_contiguous():
        launch(out, input, factor)
    else:
        launch_contiguous(launch, out, input, factor)


@op(check=_check_scale, launch=_launch_scale, layout=LIKE_INPUT)
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
