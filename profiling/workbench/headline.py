"""The index's headline figures, made from a family's recorded timing tables.

One function, :func:`headlines`, reads the recordings (``reports/<gpu>/tables/<op>.timing.csv`` and the
ceilings measured with them) for a live run right after it stored them and for a replay alike, so the committed
and the replayed index say the same of the same recording.

Each op and dtype gets the figure of the ceiling that bounds its largest case: a case whose tensor-core FLOP take
longer at the measured cuBLAS rate than its bytes at the measured copy bandwidth is compute-bound (its FLOP rate
and share of cuBLAS's), any other memory-bound (its share of the copy bandwidth). A share above 100% is said to
be above that measured ceiling: the ceiling is one measurement (cuBLAS on one shape, one copy), not a limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..analysis import roofline
from ..harness.ops import OpSpec, parse_dtype
from ..readable import binary_size, significant
from .tables import load_table


@dataclass(frozen=True)
class Ceilings:
    """The measured ceilings a timing table was recorded with (bytes/s, FLOP/s; None when none was measured)."""

    copy_bytes_per_s: float | None
    cublas_flop_per_s: float | None


def recorded_ceilings(meta: Mapping[str, Any], gpu_slug: str) -> Ceilings:
    """The ceilings in a timing table's provenance sidecar; a recording older than that keeps them only in
    ``reports/<gpu>/ceilings.json``, the last ones measured on that GPU."""
    saved = roofline.load_measured_ceilings(gpu_slug) or {}
    copy = meta.get("copy_bytes_per_s", saved.get("copy_bytes_per_s"))
    cublas = meta.get("cublas_flop_per_s", saved.get("cublas_flop_per_s"))
    return Ceilings(float(copy) if copy else None, float(cublas) if cublas else None)


def tensor_flop(op: OpSpec, config: Mapping[str, int], dtype: str) -> float:
    """The tensor-core FLOP of ``op``'s work model at ``config`` (0 for an op without them)."""
    work = op.work(dict(config), parse_dtype(dtype))
    return float(sum(flop for kind, flop in work.flops.items() if kind.startswith("tensor_")))


def compute_bound(op: OpSpec, row: Mapping[str, Any], dtype: str, ceilings: Ceilings) -> bool:
    """Whether the case of timing ``row`` would take longer at the measured cuBLAS rate than at the copy bandwidth."""
    config = {field: int(row[field]) for field in op.config_fields}
    flop = tensor_flop(op, config, dtype)
    if flop <= 0 or not ceilings.cublas_flop_per_s:
        return False
    copy = ceilings.copy_bytes_per_s or float(row.get("copy_bytes_per_s", 0.0))
    return not copy or flop / ceilings.cublas_flop_per_s > float(row["bytes"]) / copy


def largest_is_compute_bound(op: OpSpec, rows: pd.DataFrame, ceilings: Ceilings) -> bool:
    """Whether the largest oasr case (most FLOP) of ``op``'s timing ``rows`` is compute-bound (any dtype): the
    metric its plots and headline use is then the FLOP rate, else the bandwidth."""
    oasr = rows[rows["backend"] == "oasr"]
    return any(
        compute_bound(op, group.loc[group["flop"].idxmax()], str(dtype), ceilings)
        for dtype, group in oasr.groupby("dtype", sort=False)
    )


def _share(pct: float) -> str:
    """``63`` -> ``"63%"``; a share above 100% keeps a decimal, so 100.1% does not read as 100%."""
    return f"{pct:.1f}%" if 99.5 <= pct < 101 else f"{pct:.0f}%"


def op_headline(op: OpSpec, dtype: str, rows: pd.DataFrame, ceilings: Ceilings) -> str:
    """One index line for ``op`` in ``dtype`` from its timing ``rows`` (both backends)."""
    oasr = rows[rows["backend"] == "oasr"]
    largest = oasr.loc[oasr["flop"].idxmax()] if len(oasr) else None
    if largest is not None and compute_bound(op, largest, dtype, ceilings):
        rate = float(largest["flop_per_s"])
        cublas = float(ceilings.cublas_flop_per_s or 0.0)
        share = 100 * rate / cublas
        where = (
            f"{significant(rate / 1e12)} TFLOP/s at {largest['config']} "
            f"({_share(share)} of cuBLAS's measured {significant(cublas / 1e12)} TFLOP/s"
            + (": above that measured rate)" if share > 100 else ")")
        )
    else:
        largest = oasr.loc[oasr["bytes"].idxmax()]
        pct = float(largest["pct_of_copy"])
        where = f"{_share(pct)} of copy bandwidth at {binary_size(float(largest['bytes']))}" + (
            " (above the measured copy bandwidth)" if pct > 100 else ""
        )
    wide = rows.pivot_table(index="config", columns="backend", values="seconds", sort=False)
    text = f"{op.name} {dtype}: {where}"
    if {"oasr", "torch"} <= set(wide.columns):
        speedups = (wide["torch"] / wide["oasr"]).dropna()
        text += f"; speedup over torch {speedups.min():.2f}x to {speedups.max():.2f}x"
    return text


def headlines(ops: Sequence[OpSpec], gpu_slug: str) -> list[str]:
    """The index lines of ``ops`` (one per op and dtype) from their recorded timing tables.

    Raises
    ------
    FileNotFoundError
        When an op has no recorded timing table.
    """
    lines = []
    for op in ops:
        table, meta = load_table(gpu_slug, op.name, "timing")
        ceilings = recorded_ceilings(meta, gpu_slug)
        for dtype, rows in table.groupby("dtype", sort=False):
            lines.append(op_headline(op, str(dtype), rows, ceilings))
    return lines
