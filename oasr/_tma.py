"""Layouts the Hopper tensor-memory accelerator (TMA) can address, for the CUTLASS ops (gemm, bmm).

TMA reads and writes a tile of a strided tensor whose innermost stride is 1 and whose other strides
and start address are multiples of 16 bytes; the extents may be anything (a ragged tile is
zero-filled on load and clipped on store). A ``[rows, 375]`` bf16 row has a 750-byte stride, so
such a tensor gets a padded row stride: results are allocated so (a strided view of the logical
shape), and an operand without one is copied into such a buffer.
"""

from __future__ import annotations

import torch
from torch import Tensor

ALIGN_BYTES = 16


def addressable(t: Tensor) -> bool:
    """Whether TMA can address ``t`` as it is (dimensions of size 1 have no stride to check)."""
    if t.data_ptr() % ALIGN_BYTES:
        return False
    item = t.itemsize
    if t.is_contiguous() and (t.shape[-1] * item) % ALIGN_BYTES == 0:  # (every call's usual case, first)
        return True
    *outer, last = t.shape
    if last > 1 and t.stride(-1) != 1:
        return False
    return all(
        size <= 1 or (stride * item) % ALIGN_BYTES == 0 for size, stride in zip(outer, t.stride()[:-1], strict=True)
    )


def padded_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
    """An uninitialised tensor of ``shape`` whose rows are padded to 16 bytes (contiguous when they already are)."""
    align = ALIGN_BYTES // dtype.itemsize
    last = shape[-1]
    padded = -(-last // align) * align
    if padded == last or not shape[:-1]:
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.empty((*shape[:-1], padded), dtype=dtype, device=device)[..., :last]


def addressable_copy(t: Tensor) -> Tensor:
    """``t`` itself when TMA can address it, else a copy with padded rows."""
    if addressable(t):
        return t
    copy = padded_empty(tuple(t.shape), t.dtype, t.device)
    copy.copy_(t)
    return copy
