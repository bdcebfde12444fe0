"""What limits a kernel: one sentence per profiled launch, from its counters.

Each unit's utilisation is its counted rate over the counter ceiling of the report
(``pct_*_peak`` of :mod:`profiling.nsight.reader`): DRAM, L2, L1/shared, the FMA pipes
(FP32 and FP16/BF16 non-tensor), the tensor pipe against its **dense** peak, and, in
``source``-preset reports, the issue slots (``issue_active_pct``). The verdict:

1. the busiest unit, when it is at :data:`BOUND_PCT` % of its peak or more, bounds the kernel
   (the H200 recordings: scale at 1 GiB moves DRAM at 88% of its peak; cuBLAS's 8192^3 bf16 GEMM
   runs at ~80% of the dense tensor peak, 790 of 989 TFLOP/s, ``shared/notes/ncu-hopper.md``;
   the threshold is half of those, so a unit at 40% is the one the kernel leans on);
2. otherwise, when ncu's SM throughput (the busiest SM pipe or issue, SpeedOfLight) is at
   :data:`SM_BOUND_PCT` % or more, an SM pipe that the explicit counters do not split out;
3. otherwise a launch under :data:`LAUNCH_S` seconds is launch-bound (the fixed cost of
   starting a grid and its ramp dominate);
4. otherwise latency/occupancy-bound: no unit is busy, warps wait; the achieved occupancy
   and, with a line table (:mod:`profiling.nsight.source`), the top stall reason say on what.

With a line table every sentence also gives the largest stall reason's share of the
warp samples (``"22% of warp samples stalled on gmma"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..nsight.source import ISSUED, stall_columns

BOUND_PCT = 40.0
"""A unit at this % of its peak or more, and the busiest, names the limit."""
SM_BOUND_PCT = 60.0
"""ncu's SM throughput at this % or more, with no counted unit at BOUND_PCT: an SM pipe bounds it."""
LAUNCH_S = 5e-6
"""Below this duration, with no unit busy, the launch itself is the cost."""

UNITS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("DRAM", "DRAM", ("pct_dram_peak",)),
    ("L2", "L2", ("pct_l2_peak",)),
    ("L1/shared", "L1/shared", ("pct_l1_peak",)),
    ("FMA", "FMA pipe", ("pct_fp32_peak", "pct_fp16_peak")),
    ("tensor-pipe", "tensor pipe", ("pct_tensor_bf16_peak", "pct_tensor_fp16_peak", "pct_tensor_tf32_peak")),
    ("issue", "issue slots", ("issue_active_pct",)),
)
"""(limiter name, how the sentence names the unit, the launch columns whose largest is its utilisation)."""

LIMITER_COLUMNS = ("profile", "launch", "op", "backend", "config", "dtype", "kernel", "limiter", "figure", "sentence")


@dataclass(frozen=True)
class Limit:
    """One launch's verdict: ``kind`` (``"DRAM"``, ``"tensor-pipe"``, ``"latency/occupancy"`` ...),
    the ``figure`` that says so (% of peak, or seconds for launch-bound) and the sentence."""

    kind: str
    figure: float
    sentence: str


def _number(row: Mapping[str, Any], column: str) -> float:
    value = row.get(column, math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def utilisation(row: Mapping[str, Any]) -> dict[str, float]:
    """Unit -> % of its peak for one launch row (units the report cannot measure are left out)."""
    found = {}
    for kind, _, columns in UNITS:
        values = [v for v in (_number(row, c) for c in columns) if not math.isnan(v)]
        if values:
            found[kind] = max(values)
    return found


def stall_shares(lines: pd.DataFrame) -> dict[str, float]:
    """Stall reason -> % of the warp samples of one launch's line table, largest first (issuing left out)."""
    total = float(lines["samples"].sum()) if "samples" in lines else 0.0
    if total <= 0:
        return {}
    shares = {c[len("stall_") :]: 100.0 * float(lines[c].sum()) / total for c in stall_columns(lines)}
    return dict(sorted(((k, v) for k, v in shares.items() if v > 0 and k != ISSUED), key=lambda kv: -kv[1]))


def limit(row: Mapping[str, Any], stalls: Mapping[str, float] | None = None) -> Limit:
    """The verdict for one launch row of :func:`profiling.nsight.reader.read_report` (see the module docstring).

    Parameters
    ----------
    row : mapping
        A ``launches`` row (``pct_*_peak``, ``duration_s``, occupancy, ``ncu_sol_sm_pct``).
    stalls : mapping, optional
        :func:`stall_shares` of the launch, from a ``source``-preset report.
    """
    busy = utilisation(row)
    names = {kind: name for kind, name, _ in UNITS}
    ranked = sorted(busy.items(), key=lambda kv: -kv[1])
    others = ", ".join(f"{names[k]} {v:.0f}%" for k, v in ranked[1:3])
    stall = ""
    if stalls:
        reason, share = next(iter(stalls.items()))
        stall = f"; {share:.0f}% of warp samples stalled on {reason}"
    top_kind, top = ranked[0] if ranked else ("", math.nan)
    if top >= BOUND_PCT:
        peak = "dense peak" if top_kind == "tensor-pipe" else "peak"
        text = f"{top_kind}-bound: {names[top_kind]} at {top:.0f}% of its {peak}"
        return Limit(top_kind, top, text + (f" ({others})" if others else "") + stall)
    busiest = f"no unit above {top:.0f}% of its peak ({names[top_kind]})" if ranked else "no unit measured"
    sm = _number(row, "ncu_sol_sm_pct")
    if sm >= SM_BOUND_PCT:
        text = f"SM-pipe-bound: ncu's SM throughput at {sm:.0f}% of peak while {busiest}"
        return Limit("SM-pipe", sm, text + stall)
    duration = _number(row, "duration_s")
    if duration < LAUNCH_S:
        grid = _number(row, "grid_size")
        blocks = f", a grid of {grid:.0f} blocks" if not math.isnan(grid) else ""
        text = f"launch-bound: {duration * 1e6:.1f} µs{blocks}; {busiest}"
        return Limit("launch", duration, text + stall)
    achieved, theoretical = _number(row, "achieved_occupancy_pct"), _number(row, "theoretical_occupancy_pct")
    occupancy = f"; achieved occupancy {achieved:.0f}% of a theoretical {theoretical:.0f}%"
    text = f"latency/occupancy-bound: {busiest}" + (occupancy if not math.isnan(achieved) else "")
    return Limit("latency/occupancy", top, text + stall)


def limiters(launches: pd.DataFrame, lines: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`limit` for every launch; columns :data:`LIMITER_COLUMNS`.

    ``lines`` (a line table of :mod:`profiling.nsight.source`, with ``launch`` and, for a
    multi-report result, ``profile``) adds each launch's largest stall reason.
    """
    rows = []
    for _, row in launches.iterrows():
        stalls = None
        if lines is not None and not lines.empty:
            mine = lines["launch"] == row["launch"]
            if "profile" in lines and "profile" in row:
                mine &= lines["profile"] == row["profile"]
            stalls = stall_shares(lines[mine])
        verdict = limit(row, stalls)
        base = {c: row.get(c) for c in LIMITER_COLUMNS[:7]}
        rows.append({**base, "limiter": verdict.kind, "figure": verdict.figure, "sentence": verdict.sentence})
    return pd.DataFrame(rows, columns=list(LIMITER_COLUMNS))


def with_advice(table: pd.DataFrame, advice: pd.DataFrame) -> pd.DataFrame:
    """``table`` (of :func:`limiters`) with ncu's own advice titles for each launch beside the sentence."""
    keys = [k for k in ("profile", "launch") if k in table and k in advice]
    titled = advice[advice["title"].astype(str) != ""] if "title" in advice else advice.iloc[0:0]
    joined = titled.groupby(keys)["title"].agg(lambda t: "; ".join(dict.fromkeys(t))).rename("ncu_advice")
    return table.merge(joined, left_on=keys, right_index=True, how="left").fillna({"ncu_advice": ""})
