"""Read an Nsight Compute report (``.ncu-rep``) into tidy pandas tables.

Works without a GPU and without ncu: the reader is NVIDIA's ``ncu_report`` module
(PyPI package ``ncu-report``), or, failing that, the copy shipped with Nsight Compute
under ``/opt/nvidia/nsight-compute/*/extras/python``.

:func:`read_report` returns a :class:`ReportTables` with three parts.

``launches``: one row per profiled kernel launch, in report order
---------------------------------------------------------------------
All quantities are in base units; a column's name carries its unit. A metric the
report lacks (e.g. byte counters in a ``timing``-preset report) gives NaN, not an
error. Launches outside a recognisable ``oasr`` range (see
:mod:`profiling.nsight.naming`) are **kept**, with ``op``/``backend``/``dtype``/``config``
missing (NA), so that nothing profiled silently disappears; drop them with
``launches.dropna(subset=["op"])``.

=========================  ==============================================================
column                     meaning
=========================  ==============================================================
launch                     0-based position of the launch in the report
op, backend, dtype         from the innermost ``oasr`` range ``op:backend:fields,dtype=..``
config                     the range's size fields as text, e.g. ``"n=65536"``
<field> (n, b, t, c ...)   each config field as its own integer column (NA where absent)
nvtx_range                 innermost push/pop range name (``oasr`` domain first), or NA
kernel                     kernel function name (``ScaleKernel``)
kernel_demangled           full demangled signature, with template arguments
grid_size                  blocks in the grid (``launch__grid_size``)
block_size                 threads per block (``launch__block_size``)
registers_per_thread       ``launch__registers_per_thread``
duration_s                 ``gpu__time_duration.sum``, seconds
sm_clock_hz, dram_clock_hz,
l2_clock_hz, l1_clock_hz   unit clocks during this launch (``*__cycles_elapsed.avg.per_second``)
dram_read_bytes            ``dram__bytes_read.sum``
dram_write_bytes           ``dram__bytes_write.sum``; writes still held in L2 when the kernel
                           ends are **not** counted, so small kernels show ~0 and a 256 MiB
                           output can show tens of MB fewer than were written
dram_bytes                 read + write
l2_bytes                   ``lts__t_bytes.sum`` (all L2 traffic, incl. fills from DRAM)
l1_bytes                   ``l1tex__t_bytes.sum`` (bytes requested from L1/TEX)
flop_fp32                  fadd + fmul + 2 x ffma thread instructions
flop_fp16                  2 x hadd + 2 x hmul + 4 x hfma (FP16 and BF16 together; half->float
                           conversions compile to ``HADD2.F32`` and count here too)
flop_tensor_bf16,
flop_tensor_fp16,
flop_tensor_tf32           tensor-core FLOP (``sm__ops_path_tensor_src_*.sum``; 2*M*N*K per GEMM)
flop                       sum of the five kinds above. A kind (and so ``flop``) is NaN when
                           any of its counters is missing: ``--set full`` lacks the
                           ``sm__sass_thread_inst_executed_op_*`` counts, and a partial sum
                           would read as "no FLOP"
dram_bw_bytes_per_s        dram_bytes / duration_s
l2_bw_bytes_per_s          l2_bytes / duration_s
l1_bw_bytes_per_s          l1_bytes / duration_s
flop_per_s                 flop / duration_s
pct_<ceiling>_peak         % of the counter ceiling (:func:`profiling.nsight.presets.counter_ceilings`)
                           for ``dram``, ``l2``, ``l1`` (bandwidth) and ``fp32``, ``fp16``,
                           ``tensor_bf16``, ``tensor_fp16``, ``tensor_tf32`` (that kind's FLOP/s);
                           ceilings use the report's mean clocks, so all rows share them
ncu_sol_sm_pct             ncu's own ``sm__throughput`` % of peak (SpeedOfLight section)
ncu_sol_memory_pct         ncu's ``gpu__compute_memory_throughput`` % of peak
ncu_sol_dram_pct           ncu's ``gpu__dram_throughput`` % of peak
achieved_occupancy_pct     ``sm__warps_active.avg.pct_of_peak_sustained_active`` (Occupancy)
theoretical_occupancy_pct  ``sm__maximum_warps_per_active_cycle_pct`` (Occupancy)
issue_active_pct           ``smsp__issue_active.avg.pct_of_peak_sustained_active``: cycles a
                           scheduler issued (``source`` preset; NaN in the others)
flagged, flag_cause         figures past 100% of a counter ceiling (or 95% of a measured one, after
                           :func:`profiling.analysis.roofline.analyze`), with the likely cause:
                           :mod:`profiling.nsight.plausibility` (``""`` when none)
=========================  ==============================================================

``advice``: one row per (launch, ncu rule result)
-------------------------------------------------
Columns ``launch, op, backend, dtype, config, kernel, rule_id, rule_name, section,
severity, title, message, speedup_pct, speedup_type``. ``severity`` is ncu's message
type (``"optimization"``, ``"warning"``, ``"error"``, ``"ok"``); ``speedup_pct`` its
estimated speedup (NaN when none). ncu's markup in messages is rewritten to plain text
(``@section:Id:Name@`` -> ``Name``, ``@url:Text:URL@`` -> ``Text (URL)``). Rule results
with neither title nor message are dropped. Empty for presets without sections.

``device``: a dict
------------------
``gpu`` (display name), ``gpu_slug``, ``compute_capability``, ``sm_count``,
``l2_cache_bytes``, ``memory_bytes``, ``max_sm_clock_hz``, ``max_memory_clock_hz``,
``clocks_hz`` (per domain ``sm``/``dram``/``l2``/``l1``: total cycles / total time over the
launches, i.e. the duration-weighted mean of their clocks),
``peaks_per_cycle`` (every ``*.peak_sustained`` metric recorded, raw, whole GPU for
``.sum``), ``launches`` and ``report`` (the path read).
"""

from __future__ import annotations

import glob
import importlib
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from ..provenance import gpu_slug
from . import packing, plausibility
from . import presets as M
from .naming import DOMAIN, RangeName, parse_range_name

NCU_PYTHON_GLOBS = (
    "/opt/nvidia/nsight-compute/*/extras/python",
    "/usr/local/cuda*/nsight-compute*/extras/python",
)

BASE_COLUMNS: tuple[str, ...] = ("launch", "op", "backend", "dtype", "config")
"""Leading columns of ``launches``; the config fields follow them."""

METRIC_COLUMNS: tuple[str, ...] = (
    "nvtx_range", "kernel", "kernel_demangled", "grid_size", "block_size", "registers_per_thread",
    "duration_s", "sm_clock_hz", "dram_clock_hz", "l2_clock_hz", "l1_clock_hz",
    "dram_read_bytes", "dram_write_bytes", "dram_bytes", "l2_bytes", "l1_bytes",
    *(f"flop_{kind}" for kind in M.FLOP_COUNTERS), "flop",
    "dram_bw_bytes_per_s", "l2_bw_bytes_per_s", "l1_bw_bytes_per_s", "flop_per_s",
    "pct_dram_peak", "pct_l2_peak", "pct_l1_peak",
    *(f"pct_{kind}_peak" for kind in M.FLOP_COUNTERS),
    "ncu_sol_sm_pct", "ncu_sol_memory_pct", "ncu_sol_dram_pct",
    "achieved_occupancy_pct", "theoretical_occupancy_pct", "issue_active_pct",
)  # fmt: skip
"""Columns of ``launches`` after the config fields, in order (then :data:`profiling.nsight.plausibility.COLUMNS`)."""

ADVICE_COLUMNS: tuple[str, ...] = (
    "launch", "op", "backend", "dtype", "config", "kernel", "rule_id", "rule_name", "section",
    "severity", "title", "message", "speedup_pct", "speedup_type",
)  # fmt: skip

_NCU_PCT = {
    "ncu_sol_sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "ncu_sol_memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "ncu_sol_dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "issue_active_pct": M.ISSUE_ACTIVE,
}
_UNIT_SCALE = {
    "ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
    "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "khz": 1e3, "Khz": 1e3, "mhz": 1e6, "Mhz": 1e6, "ghz": 1e9, "Ghz": 1e9,
}  # fmt: skip
"""Non-base units ncu may attach -> factor to the base unit (s, byte, Hz). Others are kept as is."""
_DEVICE_ATTRIBUTES = (
    "device__attribute_display_name",
    "device__attribute_multiprocessor_count",
    "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
    "device__attribute_l2_cache_size",
    "device__attribute_total_memory",
    "device__attribute_max_gpu_frequency_khz",
    "device__attribute_max_mem_frequency_khz",
)
_SEVERITY = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP_TYPE = {0: "unknown", 1: "local", 2: "global"}


@dataclass
class ReportTables:
    """What :func:`read_report` returns; see the module docstring for every column."""

    launches: pd.DataFrame
    advice: pd.DataFrame
    device: dict[str, Any] = field(default_factory=dict)


def import_ncu_report() -> ModuleType:
    """Import NVIDIA's ``ncu_report`` (pip package, else Nsight Compute's ``extras/python``).

    Raises
    ------
    ImportError
        With the ways to install it, when neither is available.
    """
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    candidates = sorted({p for pattern in NCU_PYTHON_GLOBS for p in glob.glob(pattern)}, reverse=True)
    for folder in candidates:
        if (Path(folder) / "ncu_report.py").exists() or (Path(folder) / "ncu_report").is_dir():
            sys.path.insert(0, folder)
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(folder)
    raise ImportError(
        "cannot read .ncu-rep files: the ncu_report module is missing. Install NVIDIA's reader with "
        "`pip install ncu-report` (or `pip install -e .[profiling]`), or install Nsight Compute, whose "
        f"extras/python folder is searched in {', '.join(NCU_PYTHON_GLOBS)}. No GPU is needed to read reports."
    )


def read_report(path: str | Path) -> ReportTables:
    """Load ``path`` into :class:`ReportTables` (launches, advice, device).

    Parameters
    ----------
    path : str or Path
        An ``.ncu-rep`` file written by ncu (any preset of :mod:`profiling.nsight.presets`).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    DamagedReportError
        When the file is not whole (:func:`container_problem`): NVIDIA's reader would read the
        blocks before a cut and say nothing.
    ImportError
        When no ``ncu_report`` module can be found (see :func:`import_ncu_report`).
    """
    path = packing.readable(path)
    return tables_from_actions(load_actions(path), source=str(path))


class Actions(list):
    """A report's actions, holding the loaded report too: NVIDIA's reader frees the actions with their report."""

    def __init__(self, report: Any, actions: list[Any]) -> None:
        super().__init__(actions)
        self.report = report


def load_actions(path: str | Path) -> Actions:
    """Every profiled launch of the report at ``path`` (plain or packed), as ncu_report actions in report order.

    Raises what :func:`read_report` raises.
    """
    path = packing.readable(path)
    if not path.is_file():
        raise FileNotFoundError(f"no Nsight Compute report at {path}")
    problem = container_problem(path)
    if problem is not None:
        raise DamagedReportError(path, problem)
    ncu_report = import_ncu_report()
    report = ncu_report.load_report(str(path))
    actions = []
    for i in range(report.num_ranges()):
        rng = report.range_by_idx(i)
        actions += [rng.action_by_idx(j) for j in range(len(rng))]
    return Actions(report, actions)


class DamagedReportError(ValueError):
    """An ``.ncu-rep`` file is not whole: no report header, or cut short; ``problem`` says which."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path.name}: {problem}")
        self.problem = problem


REPORT_MAGIC = b"NVR\0"
_PAYLOAD_SIZE_FIELD = 5
"""``BlockHeader.PayloadSize`` (Nsight Compute's ``extras/FileFormat/ProfilerReport.proto``)."""


def container_problem(path: Path) -> str | None:
    """What is wrong with the container of the report at ``path``, or None when it is whole.

    An ``.ncu-rep`` is ``NVR\\0``, a length-prefixed file header, then blocks, each a length-prefixed
    ``BlockHeader`` message whose ``PayloadSize`` bytes follow it; the last block ends at the file's end.
    Only the headers are read (the payloads are skipped), a few reads per block.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(4) != REPORT_MAGIC:
            return "it is not an Nsight Compute report (no NVR header)"
        position, first = 4, True
        while position < size:
            length = int.from_bytes(handle.read(4), "little")
            end = position + 4 + length
            if end <= size:
                payload = 0 if first else _varint_field(handle.read(length), _PAYLOAD_SIZE_FIELD)
                if payload is None:
                    return f"its block at byte {position} has a header that is not a BlockHeader"
                end += payload
            if end > size:
                return f"it is cut short: its block at byte {position} runs past the file's end ({size} bytes)"
            position, first = end, False
            handle.seek(position)
    return None


def _varint_field(message: bytes, number: int) -> int | None:
    """The value of varint field ``number`` of a protobuf ``message`` (0 when absent; None when malformed)."""
    index, value = 0, 0
    try:
        while index < len(message):
            key, index = _varint(message, index)
            wire = key & 7
            if wire == 0:
                found, index = _varint(message, index)
                if key >> 3 == number:
                    value = found
            elif wire == 2:
                length, index = _varint(message, index)
                index += length
            elif wire in (1, 5):
                index += 8 if wire == 1 else 4
            else:
                return None
    except IndexError:
        return None
    return value if index == len(message) else None


def _varint(data: bytes, index: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[index]
        value |= (byte & 0x7F) << shift
        index, shift = index + 1, shift + 7
        if byte < 0x80:
            return value, index


def tables_from_actions(actions: list[Any], source: str = "") -> ReportTables:
    """Build :class:`ReportTables` from ncu_report actions (or objects with their interface).

    Parameters
    ----------
    actions : list
        Profiled launches in report order: each needs ``name``, ``metric_names``,
        ``metric_by_name``, ``nvtx_state`` and optionally ``rule_results_as_dicts``.
    source : str
        Where they came from, recorded as ``device["report"]``.
    """
    records = [launch_record(action, k) for k, action in enumerate(actions)]
    launches = _launch_frame(records)
    device = _device_info(actions, launches, source)
    launches = add_rates(launches, M.counter_ceilings(device))
    return ReportTables(launches=launches, advice=_advice_frame(actions, records), device=device)


def metric_value(action: Any, name: str) -> float:
    """``name``'s value on ``action`` in base units (s, byte, Hz), NaN when absent or not numeric."""
    metric = action.metric_by_name(name)
    if metric is None:
        return math.nan
    try:
        value = float(metric.value())
    except (TypeError, ValueError):
        return math.nan
    return value * _UNIT_SCALE.get(metric.unit(), 1.0)


def _range_of(action: Any) -> tuple[str | None, RangeName | None]:
    """The innermost parseable ``oasr`` range; else the innermost range seen (unparsed)."""
    state = action.nvtx_state()
    if state is None:
        return None, None
    fallback: str | None = None
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        names = list(domain.push_pop_ranges())
        if domain.name() == DOMAIN:
            for name in reversed(names):
                try:
                    return name, parse_range_name(name)
                except ValueError:
                    continue
            fallback = names[-1] if names else fallback
        elif names and fallback is None:
            fallback = names[-1]
    return fallback, None


def _kernel_names(action: Any) -> tuple[str, str]:
    try:
        demangled = action.name(type(action).NameBase_DEMANGLED)
    except (AttributeError, TypeError):
        demangled = action.name()
    return action.name(), demangled


def _sum_all(values: list[float]) -> float:
    """Sum, NaN if any term is missing: a partial count (``--set full`` lacks some) would mislead."""
    return math.nan if any(math.isnan(v) for v in values) else float(sum(values))


def launch_record(action: Any, launch: int) -> dict[str, Any]:
    """The raw (pre-rate) fields of one launch as a dict; ``config_fields`` holds its config.

    Accepts any object with ncu_report's action interface (``name``, ``metric_by_name``,
    ``nvtx_state``), which is how tests exercise missing metrics.
    """
    range_name, parsed = _range_of(action)
    kernel, demangled = _kernel_names(action)
    rec: dict[str, Any] = {
        "launch": launch,
        "op": parsed.op if parsed else None,
        "backend": parsed.backend if parsed else None,
        "dtype": parsed.dtype if parsed else None,
        "config": ",".join(f"{k}={v}" for k, v in parsed.config.items()) if parsed else None,
        "config_fields": dict(parsed.config) if parsed else {},
        "nvtx_range": range_name,
        "kernel": kernel,
        "kernel_demangled": demangled,
        "grid_size": metric_value(action, "launch__grid_size"),
        "block_size": metric_value(action, "launch__block_size"),
        "registers_per_thread": metric_value(action, "launch__registers_per_thread"),
        "duration_s": metric_value(action, M.DURATION),
    }
    for domain, name in M.CLOCKS.items():
        rec[f"{domain}_clock_hz"] = metric_value(action, name)
    for level, names in M.BYTE_COUNTERS.items():
        rec[f"{level}_bytes"] = _sum_all([metric_value(action, n) for n in names])
    rec["dram_bytes"] = rec["dram_read_bytes"] + rec["dram_write_bytes"]
    for kind, counters in M.FLOP_COUNTERS.items():
        rec[f"flop_{kind}"] = _sum_all([metric_value(action, n) * per for n, per in counters])
    rec["flop"] = _sum_all([rec[f"flop_{kind}"] for kind in M.FLOP_COUNTERS])
    for column, name in _NCU_PCT.items():
        rec[column] = metric_value(action, name)
    return rec


def _raw(action: Any, name: str) -> Any:
    metric = action.metric_by_name(name)
    return None if metric is None else metric.value()


def _launch_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    fields = list(dict.fromkeys(k for rec in records for k in rec["config_fields"]))
    rows = [
        {
            **{c: rec[c] for c in BASE_COLUMNS},
            **{f: rec["config_fields"].get(f) for f in fields},
            **{c: rec.get(c, math.nan) for c in METRIC_COLUMNS},
        }
        for rec in records
    ]
    df = pd.DataFrame(rows, columns=[*BASE_COLUMNS, *fields, *METRIC_COLUMNS])
    for column in ("launch", *fields):
        df[column] = df[column].astype("Int64")
    for column in ("op", "backend", "dtype", "config", "nvtx_range", "kernel", "kernel_demangled"):
        df[column] = df[column].astype("string")
    numeric = [c for c in METRIC_COLUMNS if c not in ("nvtx_range", "kernel", "kernel_demangled")]
    df[numeric] = df[numeric].astype(float)
    return df


def _mean_clock(clock_hz: pd.Series, duration_s: pd.Series) -> float:
    """Total cycles / total time over the launches: long launches, whose clocks are measured
    best, weigh most (a 2 us launch can read 2.1 GHz on a 1.98 GHz part)."""
    ok = clock_hz.notna() & duration_s.notna() & (duration_s > 0)
    if not ok.any():
        return math.nan
    return float((clock_hz[ok] * duration_s[ok]).sum() / duration_s[ok].sum())


def _device_info(actions: list[Any], launches: pd.DataFrame, source: str) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    peaks: dict[str, float] = {}
    for action in actions:
        for name in _DEVICE_ATTRIBUTES:
            if raw.get(name) is None:
                raw[name] = _raw(action, name)
        for name in action.metric_names():
            if name.endswith(".peak_sustained") and name not in peaks:
                peaks[name] = metric_value(action, name)

    def number(name: str, scale: float = 1.0) -> float:
        value = raw.get(name)
        return float(value) * scale if isinstance(value, (int, float)) else math.nan

    gpu = str(raw.get("device__attribute_display_name") or "unknown")
    major, minor = (
        raw.get("device__attribute_compute_capability_major"),
        raw.get("device__attribute_compute_capability_minor"),
    )
    sm_count = raw.get("device__attribute_multiprocessor_count")
    return {
        "gpu": gpu,
        "gpu_slug": gpu_slug(gpu) if gpu != "unknown" else "unknown-gpu",
        "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else "",
        "sm_count": int(sm_count) if isinstance(sm_count, (int, float)) else None,
        "l2_cache_bytes": number("device__attribute_l2_cache_size"),
        "memory_bytes": number("device__attribute_total_memory"),
        "max_sm_clock_hz": number("device__attribute_max_gpu_frequency_khz", 1e3),
        "max_memory_clock_hz": number("device__attribute_max_mem_frequency_khz", 1e3),
        "clocks_hz": {d: _mean_clock(launches[f"{d}_clock_hz"], launches["duration_s"]) for d in M.CLOCKS},
        "peaks_per_cycle": peaks,
        "launches": len(launches),
        "report": source,
    }


def add_rates(launches: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    """Fill the rate and ``pct_*_peak`` columns of ``launches`` from its counters and ``ceilings``.

    Parameters
    ----------
    launches : DataFrame
        The ``launches`` table (rates are recomputed, other columns kept).
    ceilings : DataFrame
        :func:`profiling.nsight.presets.counter_ceilings` output (``name`` -> ``value``); the
        ``flagged`` figures of :func:`profiling.nsight.plausibility.flag` are drawn against it.
    """
    df = launches.copy()
    duration = df["duration_s"].where(df["duration_s"] > 0)
    for level in ("dram", "l2", "l1"):
        df[f"{level}_bw_bytes_per_s"] = df[f"{level}_bytes"] / duration
    df["flop_per_s"] = df["flop"] / duration
    peak = dict(zip(ceilings["name"], ceilings["value"], strict=True)) if len(ceilings) else {}
    for level in ("dram", "l2", "l1"):
        df[f"pct_{level}_peak"] = 100.0 * df[f"{level}_bw_bytes_per_s"] / peak.get(level, np.nan)
    for kind in M.FLOP_COUNTERS:
        df[f"pct_{kind}_peak"] = 100.0 * df[f"flop_{kind}"] / duration / peak.get(kind, np.nan)
    return plausibility.flag(df, ceilings)


_MARKUP = (
    (re.compile(r"@url:([^:@]*):([^@]+)@"), r"\1 (\2)"),
    (re.compile(r"@\w+:[^:@]*:([^@]+)@"), r"\1"),
)


def clean_message(text: str) -> str:
    """ncu's rule-message markup as plain text (``@section:Id:Name@`` -> ``Name``)."""
    for pattern, replacement in _MARKUP:
        text = pattern.sub(replacement, text)
    return text


def _advice_frame(actions: list[Any], records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for action, rec in zip(actions, records, strict=True):
        try:
            results = action.rule_results_as_dicts()
        except AttributeError:
            results = []
        for result in results:
            message = result.get("rule_message") or {}
            title, text = message.get("title", ""), message.get("message", "")
            if not title and not text:
                continue
            speedup = result.get("speedup_estimation") or {}
            rows.append(
                {
                    **{c: rec[c] for c in ("launch", "op", "backend", "dtype", "config", "kernel")},
                    "rule_id": result.get("rule_identifier"),
                    "rule_name": result.get("name"),
                    "section": result.get("section_identifier"),
                    "severity": _SEVERITY.get(message.get("type"), str(message.get("type"))),
                    "title": title,
                    "message": clean_message(text),
                    "speedup_pct": float(speedup.get("speedup", math.nan)),
                    "speedup_type": _SPEEDUP_TYPE.get(speedup.get("type")) if speedup else None,
                }
            )
    df = pd.DataFrame(rows, columns=list(ADVICE_COLUMNS))
    df["launch"] = df["launch"].astype("Int64")
    df["speedup_pct"] = df["speedup_pct"].astype(float)
    return df
