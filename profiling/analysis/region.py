"""A region's profile as one tidy table, its plots, and two regions side by side.

:func:`region_table` turns a :class:`profiling.nsight.region.RegionProfile` (or any profile whose launches are one
region) into one row per launch, in launch order:

=======================  ===================================================================================
column                   meaning
=======================  ===================================================================================
launch                   the launch's place in the report
op                       the innermost op that launched it (``oasr.gemm``, ``aten::addmm``); ``(no op)`` where
                         no op range held it
kernel                   the kernel's function name, demangled and without its template arguments
duration_s               ``gpu__time_duration.sum``, seconds
share                    duration_s over the region's kernel time (the shares sum to 1)
dram_bytes               DRAM read + write bytes
flop                     every FLOP the counters saw (FP32, FP16/BF16 and tensor)
flop_tensor              of which on the tensor pipe (BF16, FP16, TF32)
peak_unit, pct_peak      the busiest unit (DRAM, L2, L1/shared, FMA, tensor-pipe, issue) and its % of its
                         peak: the "relevant" peak (:func:`profiling.analysis.limiter.utilisation`)
limiter, sentence        :func:`profiling.analysis.limiter.limit`'s verdict and sentence
ai_dram_flop_per_byte,   the roofline position (:func:`profiling.analysis.roofline.classify` against DRAM):
flop_per_s, bound,       intensity, achieved rate, memory or compute side of the knee, and the roof's
pct_of_roof              minimum time over the measured one, in %
=======================  ===================================================================================

Units are in the column names (base units: s, byte, FLOP); ``share`` and the ``pct_`` columns are fractions and
percentages. ``table.attrs`` holds ``region`` (its name), ``kernel_time_s`` (the sum of ``duration_s``) and
``region_wall_s`` (the worker's eager wall time; NaN when not recorded), ``replayed``, ``banner``, ``flop_kinds``
(the FLOP kinds the region executed, whose ceilings its roofline draws) and ``device`` (the report's, for its
ceilings).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..nsight.presets import FLOP_COUNTERS
from ..units import format_rate
from . import limiter, roofline
from .plots import _compute_ceilings, _draw_roofs, _memory_ceilings, _style_axes, _title

NO_OP = "(no op)"
REGION_COLUMNS: tuple[str, ...] = (
    "launch", "op", "kernel", "duration_s", "share", "dram_bytes", "flop", "flop_tensor", "peak_unit", "pct_peak",
    "limiter", "sentence", "ai_dram_flop_per_byte", "flop_per_s", "bound", "pct_of_roof",
)  # fmt: skip
SUMMARY_COLUMNS: tuple[str, ...] = ("kernels", "kernel_time_s", "region_wall_s", "kernel_share_of_wall", "top_kernels")
TOP = 10
"""Kernels each plot and summary names; the rest are summed as ``other``."""


def region_table(result: Any) -> pd.DataFrame:
    """The tidy per-launch table of a region profile (the module docstring has its columns).

    Parameters
    ----------
    result : RegionProfile or ProfileResult
        Its ``launches`` (with ``region_op``; without it, the launches' sweep range names their op) and ``device``.

    Raises
    ------
    ValueError
        When ``result`` holds no launch, or none with a duration.
    """
    launches = result.launches
    if launches.empty or not launches["duration_s"].gt(0).any():
        raise ValueError(f"`result` of {getattr(result, 'op', '?')!r} holds no launch with a duration")
    classified = roofline.classify(launches, roofline.ceilings(result.device))
    if "region_op" in launches:
        ops = launches["region_op"].astype(object)
    else:  # a sweep's launches: their range's op and backend
        ops = launches["op"].astype(object) + ":" + launches["backend"].astype(object)
    verdicts = [limiter.limit(row) for _, row in launches.iterrows()]
    busiest = [max(limiter.utilisation(row).items(), key=lambda kv: kv[1], default=(None, math.nan))
               for _, row in launches.iterrows()]  # fmt: skip
    tensor = [f"flop_{kind}" for kind in FLOP_COUNTERS if kind.startswith("tensor")]
    total = float(launches["duration_s"].sum())
    table = pd.DataFrame(
        {
            "launch": launches["launch"],
            "op": ops.where(ops.notna(), NO_OP).astype("string"),
            "kernel": launches["kernel"].astype("string"),
            "duration_s": launches["duration_s"],
            "share": launches["duration_s"] / total,
            "dram_bytes": launches["dram_bytes"],
            "flop": launches["flop"],
            "flop_tensor": launches[tensor].sum(axis=1, min_count=len(tensor)),
            "peak_unit": pd.Series([b[0] for b in busiest], index=launches.index, dtype="string"),
            "pct_peak": [float(b[1]) for b in busiest],
            "limiter": [v.kind for v in verdicts],
            "sentence": [v.sentence for v in verdicts],
            "ai_dram_flop_per_byte": classified["ai_dram_flop_per_byte"],
            "flop_per_s": launches["flop_per_s"],
            "bound": classified["bound"],
            "pct_of_roof": classified["pct_of_roof"],
        },
        columns=list(REGION_COLUMNS),
    ).reset_index(drop=True)
    table.attrs.update(
        region=str(getattr(result, "op", "")),
        kernel_time_s=total,
        region_wall_s=float(getattr(result, "region_wall_s", math.nan)),
        replayed=bool(getattr(result, "replayed", False)),
        banner=str(getattr(result, "banner", "")),
        flop_kinds=[kind for kind in FLOP_COUNTERS if launches[f"flop_{kind}"].fillna(0).gt(0).any()],
        device=dict(result.device),
    )
    return table


def by(table: pd.DataFrame, column: str, top: int = TOP) -> pd.Series:
    """Seconds per ``column`` value (``"op"`` or ``"kernel"``), largest first; past ``top`` summed as ``other``."""
    seconds = table.groupby(column, sort=False)["duration_s"].sum().sort_values(ascending=False)
    if len(seconds) > top:
        seconds = pd.concat([seconds.iloc[:top], pd.Series({"other": float(seconds.iloc[top:].sum())})])
    return seconds


def region_summary(tables: Mapping[str, pd.DataFrame], top: int = 3) -> pd.DataFrame:
    """Regions side by side: kernel count, kernel time, wall time, their ratio and the ``top`` kernels by time.

    Parameters
    ----------
    tables : mapping of str to DataFrame
        Label (``"oasr"``, ``"torch"``) -> :func:`region_table`.
    """
    rows = {}
    for label, table in tables.items():
        kernels = by(table, "kernel", top=len(table))
        total, wall = float(table["duration_s"].sum()), float(table.attrs.get("region_wall_s", math.nan))
        shown = [f"{name} {100 * seconds / total:.0f}%" for name, seconds in kernels.iloc[:top].items()]
        rows[label] = {
            "kernels": len(table),
            "kernel_time_s": total,
            "region_wall_s": wall,
            "kernel_share_of_wall": total / wall if wall > 0 else math.nan,
            "top_kernels": "; ".join(shown),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


def summary_html(summary: pd.DataFrame) -> str:
    """:func:`region_summary` as an HTML table, every cell escaped (kernel names are data)."""
    return summary.to_html(escape=True, float_format=lambda v: f"{v:.4g}")


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def _heading(table: pd.DataFrame, text: str) -> str:
    """``text``, saying so when the numbers are replayed from recordings (the table's ``attrs``)."""
    return text + (" (replayed from recordings)" if table.attrs.get("replayed") else "")


def time_plot(table: pd.DataFrame, top: int = TOP, title: str | None = None) -> Figure:
    """Where the region's time goes: a stacked bar per op and per kernel, next to the region's wall time.

    Each bar's segments are its ``top`` largest parts (the rest as ``other``), labelled with their share when it
    fits; the wall bar is the worker's eager call (absent when not recorded). Segment gids:
    ``segment:<bar>:<name>``; the wall bar's ``wall``.
    """
    fig = Figure(figsize=(11.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    total, wall = float(table["duration_s"].sum()), float(table.attrs.get("region_wall_s", math.nan))
    bars = {"per op": by(table, "op", top), "per kernel": by(table, "kernel", top)}
    colours = {}
    palette = [f"C{i}" for i in range(10)]
    for y, (bar, parts) in enumerate(bars.items()):
        left = 0.0
        for name, seconds in parts.items():
            colour = "0.75" if name == "other" else colours.setdefault(f"{bar}:{name}", palette[len(colours) % 10])
            ax.barh(y, seconds, left=left, color=colour, edgecolor="w", gid=f"segment:{bar}:{name}",
                    label=f"{str(name)[:36]} ({_us(seconds)})")  # fmt: skip
            if seconds / total > 0.06:
                ax.text(left + seconds / 2, y, f"{100 * seconds / total:.0f}%", ha="center", va="center", fontsize=7)
            left += seconds
    labels = [f"{bar}\n(kernels {_us(total)})" for bar in bars]
    if math.isfinite(wall):
        ax.barh(len(bars), wall, color="0.3", gid="wall", label=f"eager call under ncu ({_us(wall)})")
        labels.append(f"region wall\n({_us(wall)})")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time per call")
    ax.xaxis.set_major_formatter(lambda v, _: _us(v))
    ax.legend(fontsize=6, ncols=2, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    name = table.attrs.get("region", "")
    ax.set_title(_title(title or _heading(table, f"{name}: where the time goes ({len(table)} launches)")), fontsize=10)
    return fig


def roofline_points(table: pd.DataFrame, ceilings: pd.DataFrame | None = None, title: str | None = None) -> Figure:
    """Every kernel of the region on the DRAM roofline, its area proportional to its share of the region's time.

    ``ceilings`` default to :func:`profiling.analysis.roofline.ceilings` of the report's device (``table.attrs``).

    Kernels without FLOP or DRAM bytes cannot sit on a log-log plot: the title says how many were left out. The
    ``TOP`` largest are numbered, with a key (gid ``key:kernels``); points are gid ``points:region``.
    """
    if ceilings is None:
        ceilings = roofline.ceilings(table.attrs.get("device", {}))
    fig = Figure(figsize=(12.0, 5.5), layout="constrained")
    ax = fig.add_subplot()
    ok = (table["ai_dram_flop_per_byte"] > 0) & (table["flop_per_s"] > 0)
    pts = table[ok.fillna(False)]
    memory = _memory_ceilings(ceilings, ["dram"])
    executed = pd.DataFrame({f"flop_{kind}": [1.0] for kind in table.attrs.get("flop_kinds", [])})
    compute = _compute_ceilings(ceilings, executed, None)  # fp32 and every kind the region ran
    knees = [float(c) / float(m) for c in compute["value"] for m in memory["value"]] or [1.0]
    xs = [*pts["ai_dram_flop_per_byte"], *knees]
    x_range = (min(xs) / 10.0, max(xs) * 10.0)
    _draw_roofs(ax, memory, compute, x_range, knee_memory="dram")
    ax.scatter(pts["ai_dram_flop_per_byte"], pts["flop_per_s"], s=20 + 1500 * pts["share"], alpha=0.6,
               edgecolors="k", linewidths=0.5, color="C0", zorder=5, gid="points:region",
               label="a kernel (area: its share of the time)")  # fmt: skip
    largest = pts.sort_values("share", ascending=False).iloc[:TOP]
    for number, (_, row) in enumerate(largest.iterrows(), start=1):
        ax.annotate(str(number), (row["ai_dram_flop_per_byte"], row["flop_per_s"]), fontsize=7,
                    textcoords="offset points", xytext=(4, 4), gid=f"label:{number}")  # fmt: skip
    key = [f"{n:>2} {row['kernel'][:40]} ({row['op']}, {100 * row['share']:.0f}%, "
           f"{format_rate(float(row['flop_per_s']), 'FLOP/s')})"
           for n, (_, row) in enumerate(largest.iterrows(), start=1)]  # fmt: skip
    ax.text(1.01, 0.0, "largest kernels:\n" + "\n".join(key), transform=ax.transAxes, fontsize=6, va="bottom",
            ha="left", family="monospace", gid="key:kernels")  # fmt: skip
    ax.set_xlim(*x_range)
    _style_axes(ax, "arithmetic intensity (FLOP per DRAM byte)")
    left_out = len(table) - len(pts)
    name = table.attrs.get("region", "")
    default = f"{name}: {len(pts)} kernels on the roofline"
    default += f" ({left_out} without FLOP left out)" if left_out else ""
    ax.set_title(_title(title or _heading(table, default)), fontsize=10)
    return fig


def comparison_plot(tables: Mapping[str, pd.DataFrame], top: int = 8) -> Figure:
    """Regions side by side (e.g. oasr's layer and torch's): kernel time against wall time and kernel count per
    region, then each region's ``top`` kernels by time (gids ``total:<label>``, ``wall:<label>``, ``top:<label>``)."""
    labels = list(tables)
    fig = Figure(figsize=(12.0, 4.5), layout="constrained")
    grid = fig.add_gridspec(1, 1 + len(labels), width_ratios=[1.0] + [1.6] * len(labels))
    ax = fig.add_subplot(grid[0, 0])
    for i, label in enumerate(labels):
        table = tables[label]
        total, wall = float(table["duration_s"].sum()), float(table.attrs.get("region_wall_s", math.nan))
        ax.bar(i - 0.2, total, 0.4, color="C0", gid=f"total:{label}", label="kernel time" if i == 0 else None)
        if math.isfinite(wall):
            ax.bar(i + 0.2, wall, 0.4, color="0.3", gid=f"wall:{label}", label="wall (eager)" if i == 0 else None)
        ax.text(i, max(total, wall if math.isfinite(wall) else 0.0), f"{len(table)} kernels", ha="center",
                va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.yaxis.set_major_formatter(lambda v, _: _us(v))
    ax.legend(fontsize=7)
    ax.set_title("time per call", fontsize=9)
    widest = max(float(by(t, "kernel", top).max()) for t in tables.values())
    for j, label in enumerate(labels, start=1):
        kernels = by(tables[label], "kernel", top)
        axk = fig.add_subplot(grid[0, j])
        axk.barh(range(len(kernels)), kernels.to_numpy(), color="C1" if j > 1 else "C0", gid=f"top:{label}")
        axk.set_yticks(range(len(kernels)), [str(k)[:38] for k in kernels.index], fontsize=6)
        axk.set_ylim(top - 0.5, -0.5)  # the same bar thickness in every panel, largest on top
        axk.set_xlim(0, widest * 1.1)
        axk.xaxis.set_major_locator(MaxNLocator(3))
        axk.xaxis.set_major_formatter(lambda v, _: _us(v))
        axk.set_title(f"{label}: top kernels", fontsize=9)
    if any(table.attrs.get("replayed") for table in tables.values()):
        fig.suptitle("Replayed from recordings", fontsize=9, color="#b06000")
    return fig


def summary_caption(tables: Mapping[str, pd.DataFrame]) -> str:
    """One escaped HTML line per region: its banner (replayed or live, from where)."""
    return "<br>".join(
        f"<b>{html.escape(label)}</b>: {html.escape(str(table.attrs.get('banner', '')))}"
        for label, table in tables.items()
    )
