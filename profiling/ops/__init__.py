"""The op registry, shared by the profiler, benchmarks and notebooks: one module per family."""

from __future__ import annotations

from .base import DTYPES, Config, Inputs, OpSpec, Work, dtype_name, parse_dtype
from .scale import SCALE

OPS: dict[str, OpSpec] = {op.name: op for op in (SCALE,)}


def get_op(name: str) -> OpSpec:
    if name not in OPS:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}")
    return OPS[name]


__all__ = ["DTYPES", "OPS", "Config", "Inputs", "OpSpec", "Work", "dtype_name", "get_op", "parse_dtype"]
