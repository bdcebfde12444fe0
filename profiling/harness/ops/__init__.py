"""The harness's ops: one module per family, listed once in :data:`OPS`.

Each entry (:class:`~profiling.harness.ops.base.OpSpec`) says how to make inputs
for a config, how each backend runs it (``oasr`` and the PyTorch baseline
``torch``), its float64 reference, its work model (bytes it must move, FLOP by
kind), its default sweep and large case, and its tolerances. Tests, benchmarks,
the profiler and the notebooks iterate :data:`OPS`.
"""

from __future__ import annotations

from oasr.jit.families import Family

from . import activation, attention, bmm, conv1d, conv2d, gemm, group_gemm, norm, scale
from .base import DTYPES, Config, Inputs, OpSpec, Work, dtype_name, parse_dtype

OPS: dict[str, OpSpec] = {
    op.name: op
    for op in (
        scale.SCALE,
        activation.GLU,
        activation.SWISH,
        norm.LAYER_NORM,
        norm.RMS_NORM,
        norm.ADD_LAYER_NORM,
        norm.ADD_RMS_NORM,
        conv1d.DEPTHWISE_CONV1D,
        conv2d.CONV2D,
        conv2d.CONV2D_SUBSAMPLING,
        gemm.GEMM,
        gemm.GEMM_GLU,
        bmm.BMM,
        group_gemm.GROUP_GEMM,
        attention.ATTENTION,
        attention.REL_POS_ATTENTION,
    )
}


def get_op(name: str) -> OpSpec:
    """The op called ``name``; ValueError naming the known ops otherwise."""
    if name not in OPS:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(OPS)}")
    return OPS[name]


def ops_of(family: Family) -> list[OpSpec]:
    """The harness ops of a library family, in :data:`OPS` order."""
    return [op for op in OPS.values() if op.family == family]


__all__ = ["DTYPES", "OPS", "Config", "Inputs", "OpSpec", "Work", "dtype_name", "get_op", "ops_of", "parse_dtype"]
