"""Numbers and column headers for people: what a table in base units reads like in a notebook or a terminal.

The workbench's tables keep base units (seconds, bytes, bytes/s, FLOP); a column's name carries its unit
(:mod:`profiling.harness.measure`). For people: times in µs, bandwidth in GB/s, FLOP rates in TFLOP/s, sizes in
KiB/MiB/GiB, three significant digits, integers as integers, ``—`` for a missing value, and a header that names
the quantity and its unit (``seconds`` -> ``time (µs)``). The notebooks' tables
(:mod:`profiling.workbench.display`) and the command lines' tables (``python -m profiling.nsight``) both read
through :func:`people`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import units
from .units import format_rate

MISSING = "—"
INTEGER_COLUMNS = {
    "launch", "grid_size", "block_size", "registers_per_thread", "samples", "launches_per_sample", "input_sets", "run",
}  # fmt: skip
"""Columns that count things: shown as integers even when stored as floats (``128.0``)."""

HEADERS = {
    "seconds": "time (µs)",
    "build_seconds": "build (s)",
    "eager_seconds": "eager (µs)",
    "base_seconds": "base (µs)",
    "head_seconds": "head (µs)",
    "p10_seconds": "p10 (µs)",
    "p90_seconds": "p90 (µs)",
    "std_seconds": "std (µs)",
    "duration_s": "duration (µs)",
    "bandwidth_bytes_per_s": "bandwidth (GB/s)",
    "dram_bw_bytes_per_s": "DRAM bandwidth (GB/s)",
    "effective_bw_bytes_per_s": "effective bandwidth (GB/s)",
    "copy_bytes_per_s": "copy ceiling (GB/s)",
    "memory_peak_bytes_per_s": "memory roof (GB/s)",
    "flop_per_s": "TFLOP/s",
    "compute_peak_flop_per_s": "compute roof (TFLOP/s)",
    "roof_flop_per_s": "roof (TFLOP/s)",
    "pct_of_copy": "% of copy",
    "pct_dram_peak": "% of DRAM peak",
    "pct_of_roof": "% of roof",
    "flagged": "flagged (implausible)",
    "bytes_vs_expected_pct": "bytes vs expected (%)",
    "flop_vs_expected_pct": "FLOP vs expected (%)",
    "iqr_rel": "IQR / median",
    "speedup_vs_torch": "speedup vs torch",
    "grid_size": "grid",
    "block_size": "block",
    "registers_per_thread": "registers",
    "dram_bytes": "DRAM bytes",
    "expected_bytes": "expected bytes",
    "expected_flop": "expected FLOP",
    "flop": "FLOP",
    "max_abs_err": "max abs err",
    "max_rel_err": "max rel err (of max |ref|)",
    "err_over_tol": "error / tolerance (passes ≤ 1)",
    "pct_samples": "% of warp samples",
    "warp_samples": "warp samples",
    "inst_executed": "warp instructions",
    "l2_excess_sectors": "excess L2 sectors (uncoalesced)",
    "shared_excess_wavefronts": "excess shared wavefronts (bank conflicts)",
    "top_stalls": "top stall reasons",
    "pcs": "SASS instructions",
    "knee_flop_per_byte": "knee (FLOP/B)",
    "oasr_seconds": "oasr (µs)",
    "torch_seconds": "torch (µs)",
    "oasr_pct_of_copy": "oasr % of copy",
    "torch_pct_of_copy": "torch % of copy",
}
"""Headers for people; other columns get theirs from :func:`header`'s suffix rules."""


def _is_missing(value: Any) -> bool:
    try:
        return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    except TypeError:
        return False


def significant(value: float, digits: int = 3) -> str:
    """``4055.3`` -> ``"4,055"``, ``14.83`` -> ``"14.8"``, ``0.0123`` -> ``"0.0123"``; never scientific."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def binary_size(nbytes: float) -> str:
    """``2**30`` -> ``"1.00 GiB"``, ``16384`` -> ``"16.0 KiB"``, ``512`` -> ``"512 B"``."""
    return units.binary(nbytes, significant, lambda v: f"{v:.0f}")


def _formatter(column: str, values: pd.Series) -> Callable[[Any], str]:
    """How one column's values read for people, from its name (its unit) and its values."""
    name = column.lower()
    if name == "build_seconds":
        return lambda v: significant(v)
    if name in ("seconds", "duration_s") or (name.endswith(("_seconds", "_s")) and not name.endswith("_per_s")):
        return lambda v: significant(v * 1e6)
    if name.endswith("bytes_per_s"):
        return lambda v: significant(v / 1e9)
    if name.endswith("flop_per_s"):
        return lambda v: significant(v / 1e12)
    if name.endswith("_hz"):
        return lambda v: f"{v / 1e9:.3f}"
    if name == "bytes" or name.endswith("_bytes"):
        return binary_size
    if name.startswith("pct_") or name.endswith("_pct") or "_pct_" in name:
        signed = "_vs_" in name
        return lambda v: f"{v:+.1f}" if signed else f"{v:.1f}"
    if name.startswith("speedup"):
        return lambda v: f"{v:.2f}×"
    if name == "iqr_rel":
        return lambda v: f"{100 * v:.1f}%"
    if name.endswith("flop_per_byte"):
        return lambda v: significant(v)
    if name in ("rtol", "atol") or name.endswith("_err"):
        return lambda v: f"{v:.2e}"
    if name == "flop" or name.startswith(("flop_", "expected_flop")):
        return lambda v: units.decimal(v, "", ".3g").strip() if abs(v) >= 1e3 else f"{v:.0f}"
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if name in INTEGER_COLUMNS or (numeric and _integral(values)):
        return lambda v: f"{v:.0f}"
    if numeric:
        return lambda v: significant(float(v), 4)
    return str


def _integral(values: pd.Series) -> bool:
    present = pd.to_numeric(values, errors="coerce").dropna()
    return bool(len(present)) and bool((present == present.round()).all())


def header(column: Any) -> str:
    """The header people read for a base-unit column: ``seconds`` -> ``time (µs)``."""
    name = str(column)
    if name in HEADERS:
        return HEADERS[name]
    for suffix, unit in (("_bytes_per_s", "GB/s"), ("_flop_per_s", "TFLOP/s"), ("_seconds", "µs"), ("_hz", "GHz")):
        if name.endswith(suffix):
            return f"{name[: -len(suffix)].replace('_', ' ')} ({unit})"
    if name.endswith("_flop_per_byte"):
        return f"{name[: -len('_flop_per_byte')].replace('_', ' ').replace('ai ', 'AI ')} (FLOP/B)"
    if name.endswith("_pct"):
        return f"{name[:-4].replace('_', ' ')} (%)"
    if name.startswith("pct_"):
        return f"% of {name[4:].replace('_', ' ')}"
    return name.replace("_", " ")


def _rate_by_unit(values: pd.Series, units: pd.Series) -> list[str]:
    """A ceilings table's ``value`` column, each in its row's unit (``byte/s`` or ``FLOP/s``)."""
    return [
        MISSING if _is_missing(v) else format_rate(float(v), "B/s" if str(u).startswith("byte") else str(u))
        for v, u in zip(values, units, strict=True)
    ]


def people(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as text for people: units in the headers, values formatted, ``—`` where missing."""
    out = pd.DataFrame(index=df.index)
    rates = "value" in df and "unit" in df  # a ceilings table: each value in its own unit, so no unit column
    for column in df.columns:
        values = df[column]
        if rates and column == "unit":
            continue
        if rates and column == "value":
            out[header(column)] = _rate_by_unit(values, df["unit"])
            continue
        fmt = _formatter(str(column), values)
        out[header(column)] = [MISSING if _is_missing(v) else _safe(fmt, v) for v in values]
    return out


def _safe(fmt: Callable[[Any], str], value: Any) -> str:
    try:
        return fmt(value)
    except (TypeError, ValueError):
        return str(value)


def text(df: pd.DataFrame) -> str:
    """``df`` for a terminal: :func:`people`'s text in aligned columns, numbers right-aligned."""
    shown = people(df)
    numeric = {header(c) for c in df.columns if pd.api.types.is_numeric_dtype(df[c])}
    widths = {c: max([len(str(c)), *(len(v) for v in shown[c])]) for c in shown.columns}

    def cell(column: str, value: str) -> str:
        return value.rjust(widths[column]) if column in numeric else value.ljust(widths[column])

    lines = ["  ".join(cell(c, str(c)) for c in shown.columns).rstrip()]
    lines += ["  ".join(cell(c, row[c]) for c in shown.columns).rstrip() for _, row in shown.iterrows()]
    return "\n".join(lines)
