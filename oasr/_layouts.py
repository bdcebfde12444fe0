"""Layouts a kernel does not read or write as they are: the views or copies the ops launch with instead.

The launchers take contiguous tensors, and the row-view families (activation's GLU, norm) any
``[rows, C]`` view with a unit last stride. An op passes contiguous tensors as they are (its fast
path); these helpers are the slow path, shared by every op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def launch_contiguous(launch: Callable[..., None], out: Tensor, input: Tensor, *args: object) -> None:
    """An element-wise launcher on tensors that are not both contiguous: contiguous copies, then ``out`` back."""
    source = input.contiguous()
    if out.is_contiguous():
        launch(out, source, *args)
    else:
        target = torch.empty_like(source)
        launch(target, source, *args)
        out.copy_(target)


def launch_rows(
    launch: Callable[..., None], outputs: Sequence[Tensor | None], inputs: Sequence[Tensor | None], *args: object
) -> None:
    """A row-view launcher, ``launch(*outputs, *inputs, *args)``, on tensors of any layout: each as [rows, C] rows
    (inputs copied where no such view exists); if an output has none, every output is computed into a fresh
    tensor and copied back."""
    targets = [None if out is None else out_rows(out, out.shape[-1]) for out in outputs]
    fresh = any(t is None and out is not None for t, out in zip(targets, outputs, strict=True))
    if fresh:
        targets = [
            None if out is None else torch.empty(out.shape, dtype=out.dtype, device=out.device) for out in outputs
        ]
        targets = [None if t is None else t.view(-1, t.shape[-1]) for t in targets]
    sources = [None if t is None else rows(t, t.shape[-1]) for t in inputs]
    launch(*targets, *sources, *args)
    if fresh:
        for out, target in zip(outputs, targets, strict=True):
            if out is not None:
                out.copy_(target.view(out.shape))
