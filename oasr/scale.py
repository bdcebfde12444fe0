"""Element-wise scale: ``out = input * factor``."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ._checks import check_cuda_tensor, check_out, check_real_scalar
from .api_logging import oasr_api


@functools.cache
def _scale_module() -> Any:
    from .jit.scale import gen_scale_module

    return gen_scale_module().build_and_load()


@oasr_api
def scale(input: torch.Tensor, factor: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """Multiply every element by ``factor``, computing in fp32.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor of any shape; float32, float16 or bfloat16. Views with an
        offset (``x[1:]``) run in place; other non-contiguous inputs are
        made contiguous first.
    factor : float
        The scale factor (rounded to fp32, as torch does for ``x * factor``).
    out : torch.Tensor, optional
        Destination with ``input``'s shape, dtype and device. May be ``input``
        itself (in place). Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``, holding ``input * factor``; bit-identical to torch's ``input * factor``.

    Raises
    ------
    TypeError
        ``input``/``out`` not a tensor, an unsupported dtype, or a non-numeric ``factor``.
    ValueError
        A tensor not on a CUDA device, or ``out`` of the wrong shape or device.
    """
    check_cuda_tensor("scale", "input", input)
    factor = check_real_scalar("scale", "factor", factor)
    if out is None:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    else:
        check_out("scale", out, input.shape, input.dtype, input.device)
    source = input if input.is_contiguous() else input.contiguous()
    if out.is_contiguous():
        _scale_module().run(out, source, factor)
    else:
        out.copy_(scale(source, factor))
    return out
