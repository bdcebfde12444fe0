"""Argument checks of the public ops: raised before any launch, naming the argument.

Each op checks its arguments in one function (``_check_<op>`` in its module), in one order:
every tensor's type, dtype and shape, and the scalars, first (so those errors are the same
on any machine), then devices: ``input`` on a CUDA GPU whose compute capability the op's
family supports (:func:`check_device`, looked up once per device), every other tensor on
``input``'s device. The CUDA launchers in ``csrc/`` check nothing a user can get wrong.

A call costs a few microseconds, so an op tests each condition inline (an attribute read
is about 40 ns) and calls the helpers below only to word the error it raises.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .jit.families import Family

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FLOATS = frozenset(FLOAT_DTYPES)
"""The same, for a membership test (twice as fast as the tuple's)."""


def _names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def bad_input(op: str, value: object, dtypes: Sequence[torch.dtype] = FLOAT_DTYPES) -> TypeError:
    """``input`` is not a tensor, or not of one of ``dtypes``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `input` must be a torch.Tensor, got {type(value).__name__}")
    return TypeError(f"oasr.{op}: `input` has dtype {value.dtype}; supported: {_names(dtypes)}")


def bad_tensor(op: str, name: str, value: object, dtype: torch.dtype, shape: Sequence[int]) -> Exception:
    """``name`` is not a tensor of ``input``'s ``dtype`` and of ``shape``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        return TypeError(f"oasr.{op}: `{name}` has dtype {value.dtype}, expected {dtype} (the dtype of `input`)")
    return ValueError(f"oasr.{op}: `{name}` has shape {tuple(value.shape)}, expected {tuple(shape)}")


def check_real_scalar(op: str, name: str, value: object) -> float:
    """``value`` as a float; TypeError naming ``name`` unless it is a real number (bool is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"oasr.{op}: `{name}` must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"oasr.{op}: `{name}` is too large for a float: {value}") from None


def other_device(op: str, name: str, tensor: torch.Tensor, device: torch.device) -> ValueError:
    """``name`` is not on ``input``'s device."""
    return ValueError(f"oasr.{op}: `{name}` is on {tensor.device}, expected {device} (the device of `input`)")


# Devices each family's kernels were found to run on: {family name: {torch.device}}. A hit
# costs one set lookup; forget_devices() empties them (tests that fake a GPU).
_READY: dict[str, set[torch.device]] = {}


def ready_devices(family: Family) -> set[torch.device]:
    """The set of devices :func:`check_device` accepted for ``family`` (an op tests membership first)."""
    return _READY.setdefault(family.name, set())


def forget_devices() -> None:
    """Check every device again on its next call (after :func:`compute_capability` changed)."""
    for devices in _READY.values():
        devices.clear()


def compute_capability(device: torch.device) -> tuple[int, int]:
    """(major, minor) compute capability of a CUDA device."""
    return torch.cuda.get_device_capability(device)


def check_device(op: str, family: Family, device: torch.device) -> None:
    """``input``'s ``device`` must be a CUDA GPU of a compute capability in ``family.capabilities``.

    Remembered for ``family`` once it passes, so later calls on the device cost a set lookup.
    """
    if device.type != "cuda":
        hint = "" if torch.cuda.is_available() else " (this machine has no CUDA GPU)"
        raise ValueError(
            f"oasr.{op}: `input` is on {device}, but Oasr kernels run on CUDA tensors{hint}; "
            f"move it with `input.cuda()`."
        )
    major, minor = compute_capability(device)
    if major * 10 + minor not in family.capabilities:
        listed = ", ".join(f"{cc // 10}.{cc % 10}" for cc in sorted(family.capabilities))
        raise ValueError(
            f"oasr.{op}: `input` is on {device}, a GPU of compute capability {major}.{minor}, "
            f"but the {family.name} kernels run only on compute capability {listed}."
        )
    ready_devices(family).add(device)
