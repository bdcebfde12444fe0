"""Argument checks shared by the Python APIs: raised before any launch, naming the argument."""

from __future__ import annotations

from collections.abc import Sequence

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_DTYPES = (torch.float16, torch.bfloat16)


def _names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def check_cuda_tensor(op: str, name: str, tensor: object, dtypes: Sequence[torch.dtype] = FLOAT_DTYPES) -> torch.Tensor:
    """A CUDA tensor of one of ``dtypes``; TypeError/ValueError naming ``name`` otherwise."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in dtypes:
        raise TypeError(f"oasr.{op}: `{name}` has dtype {tensor.dtype}; supported: {_names(dtypes)}")
    if not tensor.is_cuda:
        hint = "" if torch.cuda.is_available() else " (this machine has no CUDA GPU)"
        raise ValueError(
            f"oasr.{op}: `{name}` is on {tensor.device}, but Oasr kernels run on CUDA tensors{hint}; "
            f"move it with `{name}.cuda()`."
        )
    return tensor


def check_out(
    op: str, out: object, shape: torch.Size | tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """``out`` must match the result's shape, dtype and device exactly."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"oasr.{op}: `out` must be a torch.Tensor, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"oasr.{op}: `out` has shape {tuple(out.shape)}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"oasr.{op}: `out` has dtype {out.dtype}, expected {dtype}")
    if out.device != device:
        raise ValueError(f"oasr.{op}: `out` is on {out.device}, expected {device}")
    return out


def check_real_scalar(op: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"oasr.{op}: `{name}` must be a real number, got {type(value).__name__}")
    return float(value)
