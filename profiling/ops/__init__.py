"""The op registry, shared by the profiler, benchmarks and notebooks: one module per family."""

from __future__ import annotations

from .activation import GLU, SWISH
from .base import DTYPES, Config, Inputs, OpSpec, Work, dtype_name, parse_dtype
from .norm import ADD_LAYER_NORM, ADD_RMS_NORM, LAYER_NORM, RMS_NORM
from .scale import SCALE

OPS: dict[str, OpSpec] = {op.name: op for op in (SCALE, GLU, SWISH, LAYER_NORM, RMS_NORM, ADD_LAYER_NORM, ADD_RMS_NORM)}


def get_op(name: str) -> OpSpec:
    if name not in OPS:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}")
    return OPS[name]


__all__ = ["DTYPES", "OPS", "Config", "Inputs", "OpSpec", "Work", "dtype_name", "get_op", "parse_dtype"]
