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

from oasr.jit.families import Family

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


GIB = 2**30

LargeCase = Callable[["OpSpec", torch.dtype], Config]
"""``(op, dtype) -> config`` of the case the benchmarks append to an op's default sweep."""


def gib_input_case(*, batch: int = 64, width: int = 1024, input_channels: int = 1, nbytes: int = GIB) -> LargeCase:
    """The large case of a ``[b, t, c]`` op: its input ``[batch, t, width]`` is exactly ``nbytes`` in every dtype.

    ``t = nbytes / (batch * width * itemsize)``: 8192 for fp16/bf16 and 4096 for fp32
    at the defaults. ``input_channels`` is how many times ``c`` the input is wide
    (2 for GLU, whose ``c`` is the output width), so ``c = width / input_channels``.
    """

    def case(op: OpSpec, dtype: torch.dtype) -> Config:
        return {"b": batch, "t": nbytes // (batch * width * dtype.itemsize), "c": width // input_channels}

    return case


@dataclass(frozen=True)
class OpSpec:
    """One op of the harness: inputs, backends, float64 reference, work model, sweeps, tolerances.

    ``family`` is the library family whose module runs the ``oasr`` backend;
    ``config`` holds the op's size fields (``config_fields``, in display order).
    ``large_case`` adds a case past the L2 to the benchmarks' sweep. ``backend_references`` gives a
    backend that rounds where ``reference`` does not (torch's unfused bias add) a float64 reference that
    rounds there too, so each backend is checked against its own arithmetic at the same tolerance.
    """

    name: str
    family: Family
    config_fields: tuple[str, ...]
    make_inputs: Callable[[Config, torch.dtype, torch.device, int], Inputs]
    backends: dict[str, Callable[[Inputs], torch.Tensor]]
    reference: Callable[[Inputs], torch.Tensor]
    work: Callable[[Config, torch.dtype], Work]
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    default_sweep: tuple[Config, ...] = ()
    large_case: LargeCase | None = None
    tolerances: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    backend_references: dict[str, Callable[[Inputs], torch.Tensor]] = field(default_factory=dict)

    def benchmark_configs(self, dtype: str | torch.dtype = "float16") -> list[Config]:
        """The default sweep, then the large case (whose shape may depend on ``dtype``)."""
        configs = [dict(c) for c in self.default_sweep]
        if self.large_case is not None:
            configs.append(self.large_case(self, parse_dtype(dtype)))
        return configs

    def reference_for(self, backend: str) -> Callable[[Inputs], torch.Tensor]:
        """The float64 reference ``backend`` is checked against (its own, else :attr:`reference`)."""
        return self.backend_references.get(backend, self.reference)

    def tolerance(self, dtype: str | torch.dtype) -> tuple[float, float]:
        """(rtol, atol) of this op's outputs in ``dtype`` against the float64 reference."""
        return self.tolerances[dtype_name(parse_dtype(dtype))]

    def config_label(self, config: Config) -> str:
        """``"b=16,t=1500,c=1024"``: the size fields in the op's order."""
        return ",".join(f"{k}={config[k]}" for k in self.config_fields)
