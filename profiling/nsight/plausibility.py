"""Guards against impossible numbers: a launch figure near or past its ceiling is flagged, with the likely cause.

llm.c #851 is the case in point: a persisting-L2 window made a LayerNorm report 4x the HBM
bandwidth, and nothing in the table said so. Each :class:`Rule` of :data:`RULES` compares one
figure of a launch with one ceiling of a ceilings frame
(:func:`profiling.nsight.presets.counter_ceilings`, and the measured ones of
:func:`profiling.analysis.roofline.measured_ceilings`) and fires above ``limit`` x the ceiling:

- 95% of a *measured* ceiling (``copy``, ``cublas_bf16``): the code that measured it is the
  practical best, so a kernel at or past it is either as good as a copy or measured differently;
- 100% of a *spec* (counter) ceiling, the peak per cycle x the clock recorded: past it is impossible
  for bytes that really came from that level.

:func:`flag` adds two text columns: ``flagged`` (the fired rules' names, ``", "``-joined; ``""`` when
none) and ``flag_cause`` (their causes). A rule whose figure or ceiling is missing never fires.
The effective bandwidth (the op's analytic bytes over its time, from
:func:`profiling.analysis.roofline.expected_work`) is judged per entry (op, backend, config,
dtype, profile): a torch backend that launches several kernels moves the op's bytes over their
summed time, not over each kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .presets import FLOP_COUNTERS

COLUMNS = ("flagged", "flag_cause")
"""The columns :func:`flag` adds (last, after the reader's)."""
ENTRY_KEYS = ("profile", "op", "backend", "config", "dtype")
"""The columns that name one profiled entry (those present are used)."""


@dataclass(frozen=True)
class Rule:
    """``figure`` (a rate of :func:`figures`) above ``limit`` x the ceiling named ``ceiling`` fires ``cause``."""

    name: str
    figure: str
    ceiling: str
    limit: float
    cause: str


_CACHE_RESIDENT = (
    "the op's bytes cannot all have come from HBM: a persisting-L2 window (cudaLimitPersistingL2CacheSize, a "
    "stream access-policy window) or a working set that fits the L2 kept them on chip (llm.c #851: 4x HBM)."
)
_CLOCKS = (
    "the figure is past the peak at the clock ncu recorded: a launch too short for its clock reading, or clocks "
    "above base during it (ncu's --clock-control none); check device_state's clocks before and after."
)
_NEAR_COPY = (
    "near or past what a device copy reaches: a working set partly resident in the L2 (or a persisting-L2 window), "
    "or ncu's lone replay of the launch (flushed caches, clocks left free) against a ceiling timed sustained."
)
_TIMED_NEAR_COPY = (
    "as fast as the device copy timed with it: an op that streams like a copy has reached its ceiling; past it, part "
    "of its working set stayed in the L2 (too few rotated input sets, or a persisting-L2 window: llm.c #851)."
)
_ALONE = (
    "at or past what the measured ceiling's code reaches: ncu replays this launch alone (caches flushed, clocks left "
    "free), the ceiling was timed sustained over CUDA-graph replays, so its % of that ceiling overstates it."
)

RULES: tuple[Rule, ...] = (
    Rule("effective bandwidth > HBM peak", "effective_bw", "dram", 1.0, _CACHE_RESIDENT),
    Rule("effective bandwidth > 95% of copy", "effective_bw", "copy", 0.95, _NEAR_COPY),
    Rule("DRAM bandwidth > peak", "dram_bw", "dram", 1.0, _CLOCKS),
    Rule("DRAM bandwidth > 95% of copy", "dram_bw", "copy", 0.95, _ALONE),
    Rule("L2 bandwidth > peak", "l2_bw", "l2", 1.0, _CLOCKS),
    Rule("L1 bandwidth > peak", "l1_bw", "l1", 1.0, _CLOCKS),
    *(Rule(f"{kind} FLOP/s > peak", f"flop_{kind}", kind, 1.0, _CLOCKS) for kind in FLOP_COUNTERS),
    Rule("tensor FLOP/s > 95% of cuBLAS", "flop_tensor_16", "cublas_bf16", 0.95, _ALONE),
    Rule("bandwidth > 95% of copy", "bandwidth", "copy", 0.95, _TIMED_NEAR_COPY),
)
"""The rules, data: a spec ceiling at 100%, a measured one at 95%. ``flop_tensor_16`` is the FP16 and BF16 tensor
rates together, against cuBLAS's BF16 GEMM (on Hopper the two dense rates are one); ``bandwidth`` is a timing
table's (:mod:`profiling.harness.measure`: the op's bytes over its CUDA-graph time)."""
CAUSES = {rule.name: rule.cause for rule in RULES}


def figures(launches: pd.DataFrame) -> dict[str, pd.Series]:
    """The rates the rules judge, per launch or timing row (bytes/s, FLOP/s); a figure whose columns are missing is
    absent."""
    found = {"bandwidth": launches["bandwidth_bytes_per_s"]} if "bandwidth_bytes_per_s" in launches else {}
    if "duration_s" not in launches:  # a timing table: its rates are its own columns
        return found
    duration = launches["duration_s"].where(launches["duration_s"] > 0)
    found |= {
        f"{level}_bw": launches[f"{level}_bytes"] / duration
        for level in ("dram", "l2", "l1")
        if f"{level}_bytes" in launches
    }
    for kind in FLOP_COUNTERS:
        if f"flop_{kind}" in launches:
            found[f"flop_{kind}"] = launches[f"flop_{kind}"] / duration
    tensor = [c for c in ("flop_tensor_bf16", "flop_tensor_fp16") if c in launches]
    if tensor:
        found["flop_tensor_16"] = launches[tensor].sum(axis=1, min_count=1) / duration
    if "expected_bytes" in launches:
        keys = [k for k in ENTRY_KEYS if k in launches]
        total = launches.groupby(keys, dropna=False, sort=False)["duration_s"].transform("sum") if keys else duration
        found["effective_bw"] = launches["expected_bytes"] / total.where(total > 0)
    return found


def flag(launches: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    """``launches`` with ``flagged`` and ``flag_cause`` from :data:`RULES` against ``ceilings`` (recomputed).

    Parameters
    ----------
    launches : DataFrame
        A launches table (:mod:`profiling.nsight.reader`), optionally with ``expected_bytes``.
    ceilings : DataFrame
        Rows with ``name`` and ``value`` (:data:`profiling.nsight.presets.CEILING_COLUMNS`).

    Raises
    ------
    TypeError
        When ``launches`` or ``ceilings`` is not a DataFrame.
    ValueError
        When ``ceilings`` lacks the ``name`` or ``value`` column.
    """
    for name, frame in (("launches", launches), ("ceilings", ceilings)):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{name} must be a DataFrame, not {type(frame).__name__}")
    if not {"name", "value"} <= set(ceilings.columns):
        raise ValueError(f"ceilings needs the columns name and value; it has {', '.join(map(str, ceilings.columns))}")
    df = launches.copy()
    rates = figures(df)
    values = ceilings.drop_duplicates("name").set_index("name")["value"].astype(float)  # first: wgmma before mma
    fired = pd.DataFrame(False, index=df.index, columns=[rule.name for rule in RULES])
    for rule in RULES:
        ceiling = values.get(rule.ceiling, np.nan)
        if rule.figure in rates and np.isfinite(ceiling) and ceiling > 0:
            fired[rule.name] = (rates[rule.figure] > rule.limit * ceiling).fillna(False)
    names = [[name for name in fired.columns if row[name]] for _, row in fired.iterrows()]
    df["flagged"] = [", ".join(n) for n in names]
    df["flag_cause"] = [" ".join(dict.fromkeys(CAUSES[x] for x in n)) for n in names]
    return df


def flag_timing(table: pd.DataFrame) -> pd.DataFrame:
    """A timing table (:func:`profiling.harness.measure.measure`) flagged against the copy bandwidth timed with it
    (its ``copy_bytes_per_s``, the figure its ``pct_of_copy`` is of)."""
    if "copy_bytes_per_s" not in table or table.empty:
        return flag(table, pd.DataFrame(columns=["name", "value"]))
    return flag(table, pd.DataFrame({"name": ["copy"], "value": [float(table["copy_bytes_per_s"].iloc[0])]}))


def notes(launches: pd.DataFrame) -> list[str]:
    """One line per rule that fired in ``launches`` (a :func:`flag` output): how many launches, and the cause."""
    if "flagged" not in launches:
        return []
    counts = pd.Series([name for names in launches["flagged"] for name in names.split(", ") if name]).value_counts()
    return [f"flagged, {name} ({count} of {len(launches)}): {CAUSES[name]}" for name, count in counts.items()]
