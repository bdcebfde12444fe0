"""What an op entry is: :class:`OpSpec` and its work model :class:`Work`.

An :class:`OpSpec` says how to make inputs for one configuration, how each backend
runs it (``oasr`` and the PyTorch reference ``torch``), and how much work the op
must do (bytes it has to move, FLOP by kind): the analytic count that the roofline
checks the hardware counters against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

Inputs = dict[str, Any]
Config = dict[str, int]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """``"float16"``/``"fp16"``/``"half"``/``torch.float16`` -> ``torch.float16`` (ValueError otherwise)."""
    if isinstance(name, torch.dtype):
        return name
    aliases = {
        "fp32": "float32",
        "float": "float32",
        "fp16": "float16",
        "half": "float16",
        "bf16": "bfloat16",
    }
    key = aliases.get(name, name)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return DTYPES[key]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# (rtol, atol) against a float64 reference for an op computed in fp32 and rounded once
# to the storage type: half an ulp is 2^-24, 2^-11 and 2^-8 relative.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass(frozen=True)
class Work:
    """What an op must do at minimum: DRAM bytes (read + write) and FLOP by kind.

    FLOP kinds: ``fp32`` (CUDA-core fp32), ``fp16`` (CUDA-core half/bfloat16),
    ``tensor_fp16``/``tensor_bf16``/``tensor_tf32`` (tensor cores).
    """

    bytes: int
    flops: dict[str, int] = field(default_factory=dict)

    @property
    def total_flops(self) -> int:
        return sum(self.flops.values())


@dataclass(frozen=True)
class OpSpec:
    """One op: inputs, backends and work model. ``config`` holds the op's size fields."""

    name: str
    family: str
    config_fields: tuple[str, ...]
    make_inputs: Callable[[Config, torch.dtype, torch.device, int], Inputs]
    backends: dict[str, Callable[[Inputs], torch.Tensor]]
    reference: Callable[[Inputs], torch.Tensor]
    work: Callable[[Config, torch.dtype], Work]
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    default_sweep: tuple[Config, ...] = ()
    tolerances: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))

    def tolerance(self, dtype: str | torch.dtype) -> tuple[float, float]:
        """(rtol, atol) of this op's outputs in ``dtype`` against the float64 reference."""
        return self.tolerances[dtype_name(parse_dtype(dtype))]

    def config_label(self, config: Config, dtype: str | torch.dtype) -> str:
        fields = ",".join(f"{k}={config[k]}" for k in self.config_fields)
        return f"{fields},dtype={dtype_name(parse_dtype(dtype))}"
