"""Layouts a launcher refuses (it returns False): the views or copies the ops retry with.

The launchers take tensors as they are when they can (contiguous tensors, row views with a
unit last stride); these helpers are the slow path, shared by every op.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def rows(tensor: Tensor, cols: int) -> Tensor:
    """A [rows, cols] view with a unit last stride (copied only when no such view exists)."""
    view = tensor.reshape(-1, cols)
    return view if cols <= 1 or view.stride(1) == 1 else view.contiguous()


def out_rows(out: Tensor, cols: int) -> Tensor | None:
    """A [rows, cols] view of ``out`` with a unit last stride, or None when there is none."""
    try:
        view = out.view(-1, cols)
    except RuntimeError:
        return None
    return view if cols <= 1 or view.stride(1) == 1 else None


def launch_contiguous(launch: Callable[..., bool], out: Tensor, input: Tensor, *args: object) -> None:
    """An element-wise launcher that refused ``out``/``input``: run it on contiguous copies, then copy back."""
    source = input.contiguous()
    if out.is_contiguous():
        launch(out, source, *args)
    else:
        target = torch.empty_like(source)
        launch(target, source, *args)
        out.copy_(target)
