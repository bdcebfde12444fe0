"""Roofline analysis: ceilings, arithmetic intensity, bound classification, expected work.

Ceilings come from two sources (column ``source``):

``"counters"``
    The report's own peak-per-cycle metrics times the unit clocks it recorded
    (:data:`profiling.nsight.presets.CEILING_SPECS`): DRAM, L2, L1 bandwidth; FP32
    (2 FLOP per FFMA), FP16/BF16 non-tensor (4 FLOP per HFMA2 instruction as
    counted), and dense tensor rates per type (the ``_sparsity_off`` peaks, whose
    ``.sum`` is already whole-GPU: 4,096 BF16 FLOP/cycle/SM x 132 SMs = 540,672 on
    an H200). Clocks are the report's duration-weighted mean; under ncu's default
    ``--clock-control base`` they are base-clock ceilings.
``"measured"``
    What code achieves in practice, kept per GPU in ``reports/<gpu_slug>/ceilings.json``:
    device-to-device copy bandwidth (``copy``, read + write bytes/s) and a cuBLAS BF16
    GEMM rate (``cublas_bf16``).

Columns added to a launches table by :func:`classify` (units in the names):
``ai_dram_flop_per_byte``, ``ai_l2_flop_per_byte``, ``ai_l1_flop_per_byte`` (flop /
that level's bytes), ``compute_peak_flop_per_s`` (the launch's compute roof: for mixed
work ``flop / sum(flop_k / peak_k)``, the rate if every kind ran at its own peak one
after another), ``memory_peak_bytes_per_s``, ``knee_flop_per_byte`` (compute peak /
memory peak), ``bound`` (``"memory"`` if AI < knee else ``"compute"``),
``roof_flop_per_s`` (``min(compute peak, AI x bandwidth)``) and ``pct_of_roof``
(achieved / roof, computed as the roof's minimum time over the measured duration,
so kernels without FLOP get their bandwidth fraction).

Columns added by :func:`expected_work` (the op registry's analytic count next to the
counters): ``expected_bytes``, ``expected_flop``, ``expected_flop_<kind>``,
``effective_bw_bytes_per_s`` (expected bytes / duration: the "useful" bandwidth),
``bytes_vs_expected_pct`` (DRAM counters vs expected), ``flop_vs_expected_pct``,
``flop_<kind>_vs_expected_pct`` and the text columns ``bytes_note``/``flop_note``.
Two known, expected differences are reported there, not hidden: DRAM writes still
held in L2 when a kernel ends are not counted (small kernels show ~0 written, and a
256 MiB output tens of MB less), and half->float conversions count as FP16 ``hadd``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..files import atomic_write_text, reports_root
from ..harness.ops import get_op, parse_dtype
from ..nsight import plausibility
from ..nsight.presets import CEILING_COLUMNS, FLOP_COUNTERS, UNITS, counter_ceilings

LEVELS: tuple[str, ...] = ("dram", "l2", "l1")
NOTE_TOLERANCE_PCT = 2.0
"""Differences from the expected work beyond this get a ``*_note``."""


def ceilings_path(gpu_slug: str, root: str | Path | None = None) -> Path:
    """``<root>/<gpu_slug>/ceilings.json`` (root defaults to :func:`profiling.nsight.recordings.reports_root`)."""
    return Path(root if root is not None else reports_root()) / gpu_slug / "ceilings.json"


def load_measured_ceilings(gpu_slug: str, root: str | Path | None = None) -> dict[str, Any] | None:
    """The measured ceilings stored for ``gpu_slug``, or None when none were saved.

    Returns
    -------
    dict or None
        Keys ``gpu_slug``, ``copy_bytes_per_s``, ``cublas_flop_per_s``, ``provenance``, ``saved_at``.

    Raises
    ------
    ValueError
        When the file exists but lacks the two rates.
    """
    path = ceilings_path(gpu_slug, root)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    missing = [k for k in ("copy_bytes_per_s", "cublas_flop_per_s") if k not in data]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    return data


def save_measured_ceilings(
    gpu_slug: str,
    copy_bytes_per_s: float,
    cublas_flop_per_s: float,
    provenance: Mapping[str, Any],
    root: str | Path | None = None,
) -> Path:
    """Store measured ceilings for ``gpu_slug`` atomically (temp file + rename); returns the path.

    Parameters
    ----------
    gpu_slug : str
        Folder name of the GPU (:func:`profiling.provenance.gpu_slug`).
    copy_bytes_per_s : float
        Device-to-device copy bandwidth, read + write bytes per second.
    cublas_flop_per_s : float
        cuBLAS BF16 GEMM rate, FLOP per second.
    provenance : mapping
        Where the numbers came from (:func:`profiling.provenance.collect`, sizes, method).
    """
    for name, value in (("copy_bytes_per_s", copy_bytes_per_s), ("cublas_flop_per_s", cublas_flop_per_s)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    path = ceilings_path(gpu_slug, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "gpu_slug": gpu_slug,
        "copy_bytes_per_s": float(copy_bytes_per_s),
        "cublas_flop_per_s": float(cublas_flop_per_s),
        "provenance": dict(provenance),
        "saved_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    return path


def measured_ceilings(data: Mapping[str, Any] | None) -> pd.DataFrame:
    """Rows ``copy`` (memory, applies to DRAM bytes) and ``cublas_bf16`` (compute) from saved data."""
    if not data:
        return pd.DataFrame(columns=list(CEILING_COLUMNS))
    prov = data.get("provenance", {})
    where = f"measured {data.get('saved_at', '')} on {prov.get('gpu', data.get('gpu_slug', '?'))}".strip()
    rows = [
        ("copy", "memory", data["copy_bytes_per_s"], "dram", "device copy (measured)"),
        ("cublas_bf16", "compute", data["cublas_flop_per_s"], "tensor_bf16", "cuBLAS BF16 GEMM (measured)"),
    ]
    return pd.DataFrame(
        [
            {
                "name": name,
                "kind": kind,
                "value": float(value),
                "unit": UNITS[kind],
                "source": "measured",
                "applies_to": applies_to,
                "description": description,
                "formula": where,
            }
            for name, kind, value, applies_to, description in rows
        ],
        columns=list(CEILING_COLUMNS),
    )


def ceilings(device: Mapping[str, Any], root: str | Path | None = None, measured: bool = True) -> pd.DataFrame:
    """Counter ceilings of ``device`` plus, when ``measured``, the ones saved for its GPU."""
    frames = [counter_ceilings(device)]
    if measured:
        saved = load_measured_ceilings(str(device.get("gpu_slug", "unknown-gpu")), root)
        if saved:
            frames.append(measured_ceilings(saved))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _ceiling(ceilings: pd.DataFrame, name: str) -> pd.Series:
    rows = ceilings[ceilings["name"] == name]
    if rows.empty:
        raise ValueError(f"no ceiling {name!r}; have {', '.join(ceilings['name'])}")
    return rows.iloc[0]


def compute_time_s(launches: pd.DataFrame, ceilings: pd.DataFrame) -> pd.Series:
    """Seconds each launch's FLOP would take with every kind at its counter peak (kinds run in turn)."""
    counters = ceilings[(ceilings["source"] == "counters") & (ceilings["kind"] == "compute")]
    best = counters.groupby("applies_to")["value"].max()
    total = pd.Series(0.0, index=launches.index)
    for kind in FLOP_COUNTERS:
        flop = launches.get(f"flop_{kind}", pd.Series(np.nan, index=launches.index)).fillna(0.0)
        if kind in best.index:
            total = total + flop / best[kind]
    return total.where(launches["flop"].notna())


def arithmetic_intensity(launches: pd.DataFrame, flop: str = "flop") -> pd.DataFrame:
    """Add ``ai_<level>_flop_per_byte`` = ``launches[flop]`` / ``<level>_bytes`` for DRAM, L2, L1."""
    df = launches.copy()
    for level in LEVELS:
        bytes_ = df[f"{level}_bytes"]
        df[f"ai_{level}_flop_per_byte"] = df[flop] / bytes_.where(bytes_ > 0)
    return df


def classify(launches: pd.DataFrame, ceilings: pd.DataFrame, memory: str = "dram") -> pd.DataFrame:
    """Add AI per level, compute/memory roofs, knee, ``bound`` and ``pct_of_roof``.

    Parameters
    ----------
    launches : DataFrame
        ``ReportTables.launches``.
    ceilings : DataFrame
        From :func:`ceilings` or :func:`counter_ceilings`.
    memory : str
        The memory ceiling to classify against: ``"dram"`` (default), ``"l2"``, ``"l1"``, or a
        measured one such as ``"copy"`` (which applies to DRAM bytes).
    """
    df = arithmetic_intensity(launches)
    mem = _ceiling(ceilings, memory)
    if mem["kind"] != "memory":
        raise ValueError(f"ceiling {memory!r} is a compute ceiling, not a memory one")
    level = mem["applies_to"]
    bandwidth = float(mem["value"])
    t_compute = compute_time_s(df, ceilings)
    fp32 = float(_ceiling(ceilings, "fp32")["value"])
    peak = (df["flop"] / t_compute.where(t_compute > 0)).fillna(fp32)
    bytes_ = df[f"{level}_bytes"]
    ai = df[f"ai_{level}_flop_per_byte"]
    df["compute_peak_flop_per_s"] = peak
    df["memory_peak_bytes_per_s"] = bandwidth
    df["knee_flop_per_byte"] = peak / bandwidth
    df["bound"] = pd.Series(np.where(ai.fillna(0.0) < df["knee_flop_per_byte"], "memory", "compute"), index=df.index)
    df.loc[bytes_.isna() | df["flop"].isna(), "bound"] = None
    df["roof_flop_per_s"] = np.minimum(peak, ai * bandwidth)
    roof_time = np.maximum(t_compute, bytes_ / bandwidth)
    df["pct_of_roof"] = 100.0 * roof_time / df["duration_s"].where(df["duration_s"] > 0)
    return df


def _work_for(row: pd.Series) -> Any:

    if pd.isna(row.get("op")) or pd.isna(row.get("dtype")):
        return None
    try:
        spec = get_op(str(row["op"]))
        config = {f: int(row[f]) for f in spec.config_fields}
        return spec.work(config, parse_dtype(str(row["dtype"])))
    except (ValueError, KeyError, TypeError):
        return None


def _pct_diff(measured: pd.Series, expected: pd.Series) -> pd.Series:
    return 100.0 * (measured - expected) / expected.where(expected > 0)


def expected_work(launches: pd.DataFrame) -> pd.DataFrame:
    """Add the op registry's analytic work (``OpSpec.work``) and its difference from the counters.

    Rows whose op is not in the registry (or lacks a config field) get NaN. See the module
    docstring for the columns; ``bytes_vs_expected_pct`` compares DRAM bytes, which miss
    writes still held in L2 at kernel end.
    """
    df = launches.copy()
    works = [_work_for(row) for _, row in df.iterrows()]
    df["expected_bytes"] = [float(w.bytes) if w else np.nan for w in works]
    df["expected_flop"] = [float(w.total_flops) if w else np.nan for w in works]
    for kind in FLOP_COUNTERS:
        df[f"expected_flop_{kind}"] = [float(w.flops.get(kind, 0)) if w else np.nan for w in works]
    df["effective_bw_bytes_per_s"] = df["expected_bytes"] / df["duration_s"].where(df["duration_s"] > 0)
    df["bytes_vs_expected_pct"] = _pct_diff(df["dram_bytes"], df["expected_bytes"])
    df["flop_vs_expected_pct"] = _pct_diff(df["flop"], df["expected_flop"])
    for kind in FLOP_COUNTERS:
        df[f"flop_{kind}_vs_expected_pct"] = _pct_diff(df[f"flop_{kind}"], df[f"expected_flop_{kind}"])
    df["bytes_note"] = [_bytes_note(pct) for pct in df["bytes_vs_expected_pct"]]
    df["flop_note"] = [_flop_note(row) for _, row in df.iterrows()]
    return df


def _bytes_note(pct: float) -> str:
    if pd.isna(pct) or abs(pct) <= NOTE_TOLERANCE_PCT:
        return ""
    if pct < 0:
        return "fewer DRAM bytes than the op must move: writes still in L2 at kernel end are not counted"
    return "more DRAM bytes than the op must move (re-reads, partial sectors, or other traffic)"


def _flop_note(row: pd.Series) -> str:
    pct = row["flop_vs_expected_pct"]
    if pd.isna(pct) or abs(pct) <= NOTE_TOLERANCE_PCT:
        return ""
    if pct > 0 and row.get("flop_fp16", 0) > 0 and row.get("expected_flop_fp16", 0) == 0:
        return "fp16 counters include half<->float conversions (HADD2.F32), not only arithmetic"
    return "counted FLOP differ from the op's work model"


def analyze(tables: Any, root: str | Path | None = None, memory: str = "dram") -> pd.DataFrame:
    """``tables.launches`` with :func:`expected_work` and :func:`classify` columns added, and its ``flagged`` figures
    (:func:`profiling.nsight.plausibility.flag`) drawn again against the measured ceilings and the effective bandwidth.

    ``tables`` is a :class:`profiling.nsight.reader.ReportTables`; measured ceilings for its GPU are
    loaded from ``root`` (default :func:`profiling.nsight.recordings.reports_root`) when present.
    """
    limits = ceilings(tables.device, root)
    return plausibility.flag(classify(expected_work(tables.launches), limits, memory=memory), limits)
