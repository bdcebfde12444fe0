"""Nsight Compute metric presets, and the counters and peaks the roofline is built from.

Four presets, chosen by name:

``timing``
    Kernel duration and launch configuration only: one replay pass, smallest report.
``roofline``
    An explicit metric list (not ``--set roofline``, which collects ~6,600 metrics):
    DRAM/L2/L1 bytes, FLOP counters by kind, the peak-per-cycle metrics and unit
    clocks the ceilings are computed from, plus the ``SpeedOfLight``, ``LaunchStats``
    and ``Occupancy`` sections so that ncu's rule advice is in the report.
``source``
    The ``roofline`` metrics plus the kernel's warp instructions and issue activity, the
    ``SourceCounters`` and ``WarpStateStats`` sections (per-PC instructions, stall-reason
    samples, excess L2 sectors and shared wavefronts), SASS and the CUDA sources imported
    (``--import-source yes``; kernels are JIT-built with ``-lineinfo``). Read per source
    line by :mod:`profiling.nsight.source`.
``full``
    ``--set full`` (~7,800 metrics, every section, SASS imported): for one launch
    at a time in the ncu GUI, not for sweeps.

``timing`` and ``roofline`` pass ``--import-sass no``, which shrinks a report from
~4 MB to ~100 KB. Metric names and peaks were checked on an H200 (sm_90); see
``shared/notes/ncu-hopper.md``.

How counters become work (also documented on :mod:`profiling.nsight.reader`):

- FP32 FLOP = fadd + fmul + 2 x ffma thread instructions.
- FP16/BF16 non-tensor FLOP = 2 x hadd + 2 x hmul + 4 x hfma (a paired HFMA2 counts
  once); FP16 and BF16 cannot be told apart, and half->float conversions compiled to
  ``HADD2.F32`` are counted as hadd.
- Tensor FLOP: ``sm__ops_path_tensor_src_*`` count FLOP directly (2*M*N*K for a GEMM).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import units

DURATION = "gpu__time_duration.sum"
LAUNCH_METRICS: tuple[str, ...] = (
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
)

BYTE_COUNTERS: dict[str, tuple[str, ...]] = {
    "dram_read": ("dram__bytes_read.sum",),
    "dram_write": ("dram__bytes_write.sum",),
    "l2": ("lts__t_bytes.sum",),
    "l1": ("l1tex__t_bytes.sum",),
}
"""Byte counters per memory level (DRAM = read + write)."""

_INST = "sm__sass_thread_inst_executed_op_{}_pred_on"


def _inst_sums(*ops: tuple[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple((_INST.format(op) + ".sum", per_inst) for op, per_inst in ops)


FLOP_COUNTERS: dict[str, tuple[tuple[str, float], ...]] = {
    "fp32": _inst_sums(("fadd", 1.0), ("fmul", 1.0), ("ffma", 2.0)),
    "fp16": _inst_sums(("hadd", 2.0), ("hmul", 2.0), ("hfma", 4.0)),
    "tensor_bf16": (("sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1.0),),
    "tensor_fp16": (("sm__ops_path_tensor_src_fp16.sum", 1.0),),
    "tensor_tf32": (("sm__ops_path_tensor_src_tf32_dst_fp32.sum", 1.0),),
}
"""FLOP kind -> ((counter, FLOP per counted unit), ...)."""

CLOCKS: dict[str, str] = {
    "sm": "sm__cycles_elapsed.avg.per_second",
    "dram": "dram__cycles_elapsed.avg.per_second",
    "l2": "lts__cycles_elapsed.avg.per_second",
    "l1": "l1tex__cycles_elapsed.avg.per_second",
}
"""Clock domain -> the metric recording its frequency (Hz) during the launch."""


@dataclass(frozen=True)
class CeilingSpec:
    """How one counter ceiling is computed: ``peak_metric x clock x per_unit``.

    Attributes
    ----------
    name : str
        Ceiling name, e.g. ``"dram"`` or ``"tensor_bf16"``.
    kind : {"memory", "compute"}
        Bandwidth (bytes/s) or arithmetic rate (FLOP/s).
    peak_metric : str
        Whole-GPU peak per cycle (a ``.sum.peak_sustained`` metric).
    clock : str
        Key of :data:`CLOCKS` giving the cycles per second.
    per_unit : float
        Bytes or FLOP per counted unit (2 per FFMA, 4 per HFMA2, 1 for bytes and tensor ops).
    applies_to : str
        Memory level (``dram``/``l2``/``l1``) or FLOP kind (a key of :data:`FLOP_COUNTERS`).
    description : str
        Human-readable name for plots and tables.
    """

    name: str
    kind: str
    peak_metric: str
    clock: str
    per_unit: float
    applies_to: str
    description: str


_PEAK = ".sum.peak_sustained"
_TENSOR_PEAK = "sm__ops_path_tensor_op_{}_sparsity_off" + _PEAK
CEILING_SPECS: tuple[CeilingSpec, ...] = (
    CeilingSpec("dram", "memory", "dram__bytes" + _PEAK, "dram", 1.0, "dram", "DRAM (HBM)"),
    CeilingSpec("l2", "memory", "lts__t_bytes" + _PEAK, "l2", 1.0, "l2", "L2"),
    CeilingSpec("l1", "memory", "l1tex__t_bytes" + _PEAK, "l1", 1.0, "l1", "L1/TEX"),
    CeilingSpec("fp32", "compute", _INST.format("ffma") + _PEAK, "sm", 2.0, "fp32", "FP32 (FFMA)"),
    CeilingSpec("fp16", "compute", _INST.format("hfma") + _PEAK, "sm", 4.0, "fp16", "FP16/BF16 (HFMA2)"),
    # Tensor peaks: the _sparsity_off per-instruction peaks are the dense rates. Their
    # .sum.peak_sustained is already whole-GPU (H200: 4,096 bf16 ops/cycle/SM x 132 SMs
    # = 540,672), and ops are FLOP, so per_unit is 1. The aggregate
    # sm__ops_path_tensor_src_*.peak_sustained is the *sparse* rate: not used.
    CeilingSpec(
        "tensor_bf16", "compute", _TENSOR_PEAK.format("hgmma_src_bf16_dst_fp32"), "sm", 1.0, "tensor_bf16",
        "BF16 tensor, dense (wgmma)",
    ),
    CeilingSpec(
        "tensor_fp16", "compute", _TENSOR_PEAK.format("hgmma_src_fp16"), "sm", 1.0, "tensor_fp16",
        "FP16 tensor, dense (wgmma)",
    ),
    CeilingSpec(
        "tensor_tf32", "compute", _TENSOR_PEAK.format("hgmma_src_tf32_dst_fp32"), "sm", 1.0, "tensor_tf32",
        "TF32 tensor, dense (wgmma)",
    ),
    CeilingSpec(
        "tensor_bf16_mma", "compute", _TENSOR_PEAK.format("hmma_src_bf16_dst_fp32"), "sm", 1.0, "tensor_bf16",
        "BF16 tensor, dense (mma.sync)",
    ),
)  # fmt: skip

ROOFLINE_SECTIONS: tuple[str, ...] = ("SpeedOfLight", "LaunchStats", "Occupancy")
SOURCE_SECTIONS: tuple[str, ...] = (*ROOFLINE_SECTIONS, "SourceCounters", "WarpStateStats")
KERNEL_INST = "smsp__inst_executed.sum"
"""Warp instructions the kernel executed: what the per-line counts of a source report sum to."""
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
"""% of active cycles in which a scheduler issued an instruction (issue-bound when near 100)."""


def _unique(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


TIMING_METRICS: tuple[str, ...] = (DURATION, *LAUNCH_METRICS)
ROOFLINE_METRICS: tuple[str, ...] = _unique(
    [
        *TIMING_METRICS,
        *(m for metrics in BYTE_COUNTERS.values() for m in metrics),
        *(m for counters in FLOP_COUNTERS.values() for m, _ in counters),
        *(spec.peak_metric for spec in CEILING_SPECS),
        *CLOCKS.values(),
    ]
)


@dataclass(frozen=True)
class Preset:
    """One metric preset: explicit metrics and sections, or a whole ncu section set."""

    name: str
    metrics: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    section_set: str | None = None
    import_sass: bool = False
    import_source: bool = False


PRESETS: dict[str, Preset] = {
    "timing": Preset("timing", metrics=TIMING_METRICS),
    "roofline": Preset("roofline", metrics=ROOFLINE_METRICS, sections=ROOFLINE_SECTIONS),
    "source": Preset(
        "source",
        metrics=(*ROOFLINE_METRICS, KERNEL_INST, ISSUE_ACTIVE),
        sections=SOURCE_SECTIONS,
        import_sass=True,
        import_source=True,
    ),
    "full": Preset("full", section_set="full", import_sass=True),
}


def get_preset(name: str) -> Preset:
    """The :class:`Preset` called ``name``; ValueError naming the valid presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown metric preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]


def ncu_args(preset: str) -> list[str]:
    """The ncu command-line arguments that collect ``preset``.

    Parameters
    ----------
    preset : {"timing", "roofline", "source", "full"}

    Returns
    -------
    list[str]
        E.g. ``["--metrics", "gpu__time_duration.sum,...", "--import-sass", "no"]`` for
        ``timing``; ``["--set", "full"]`` for ``full`` (SASS kept).

    Raises
    ------
    ValueError
        For an unknown preset.
    """
    spec = get_preset(preset)
    args: list[str] = []
    if spec.section_set:
        args += ["--set", spec.section_set]
    for section in spec.sections:
        args += ["--section", section]
    if spec.metrics:
        args += ["--metrics", ",".join(spec.metrics)]
    if not spec.import_sass:
        args += ["--import-sass", "no"]
    if spec.import_source:
        args += ["--import-source", "yes"]
    return args


CEILING_COLUMNS: tuple[str, ...] = ("name", "kind", "value", "unit", "source", "applies_to", "description", "formula")
UNITS = {"memory": "byte/s", "compute": "FLOP/s"}


def counter_ceilings(device: Mapping[str, Any]) -> pd.DataFrame:
    """Ceilings from a report's peaks x clocks (``ReportTables.device``).

    Returns
    -------
    DataFrame
        One row per :data:`profiling.nsight.presets.CEILING_SPECS` entry, columns
        :data:`CEILING_COLUMNS`; ``value`` is NaN when the report lacks the peak or clock.
    """
    peaks = device.get("peaks_per_cycle", {})
    clocks = device.get("clocks_hz", {})
    rows = []
    for spec in CEILING_SPECS:
        peak = float(peaks.get(spec.peak_metric, math.nan))
        clock = float(clocks.get(spec.clock, math.nan))
        per = "" if spec.per_unit == 1 else f" x {spec.per_unit:g} FLOP/inst"
        hz = units.decimal(clock, "Hz", ".3g")
        rows.append(
            {
                "name": spec.name,
                "kind": spec.kind,
                "value": peak * clock * spec.per_unit,
                "unit": UNITS[spec.kind],
                "source": "counters",
                "applies_to": spec.applies_to,
                "description": spec.description,
                "formula": f"{spec.peak_metric} ({peak:g}/cycle){per} x {CLOCKS[spec.clock]} ({hz})",
            }
        )
    return pd.DataFrame(rows, columns=list(CEILING_COLUMNS))
