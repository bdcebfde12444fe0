"""Roofline and bandwidth plots (matplotlib). Every function returns a Figure; none calls ``show``.

Figures are built with :class:`matplotlib.figure.Figure` (not pyplot), so nothing
accumulates in pyplot's registry; notebooks display the returned figure. Pass ``ax``
to draw into an existing axes instead.

What was drawn can be found again through each artist's ``gid``:

=================================  ======================================================
gid                                artist
=================================  ======================================================
``ceiling:<name>``                 Line2D of a ceiling (``dram``, ``l2``, ``fp32``, ``copy`` ...)
``knee:<memory>:<compute>``        Line2D marker where a memory roof meets a compute roof
``points:<backend>``               PathCollection of launches (``oasr``, ``torch``, ``other``)
``point:<level>``                  one level's point in :func:`hierarchical_roofline`
``series:<backend>:<dtype>``       Line2D of one backend's bandwidth in :func:`bandwidth_vs_size`
                                   (``series:<op>:<backend>:<dtype>`` when the table holds several ops)
=================================  ======================================================

Data coordinates are in base units (FLOP/byte, FLOP/s, bytes, bytes/s); axis tick
labels use engineering prefixes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, NullFormatter

BACKEND_STYLE: dict[str, dict[str, Any]] = {
    "oasr": {"marker": "o", "color": "C0"},
    "torch": {"marker": "s", "color": "C1"},
}
OTHER_STYLE: dict[str, Any] = {"marker": "^", "color": "0.45"}
LEVEL_STYLE: dict[str, dict[str, Any]] = {
    "dram": {"marker": "o", "color": "C3", "ms": 10},
    "l2": {"marker": "s", "color": "C2", "ms": 9},
    "l1": {"marker": "D", "color": "C4", "ms": 6},
}
CEILING_COLOR: dict[str, str] = {
    "dram": "C3", "l2": "C2", "l1": "C4", "copy": "k",
    "fp32": "C7", "fp16": "C8", "tensor_bf16": "C9", "tensor_fp16": "C6", "tensor_tf32": "C5",
    "tensor_bf16_mma": "C9", "cublas_bf16": "k",
}  # fmt: skip
"""Ceiling colours; blue (C0) and orange (C1) are kept for the oasr and torch points."""
LEVEL_LABEL = {"dram": "DRAM", "l2": "L2", "l1": "L1"}


def _axes(ax: Axes | None, size: tuple[float, float] = (8.0, 5.5)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _eng(value: float, unit: str) -> str:
    return EngFormatter(unit=unit, places=2)(value) if math.isfinite(value) else f"? {unit}"


def _binary_bytes(value: float) -> str:
    """``8192`` -> ``"8 KiB"``; sizes in sweeps are powers of two."""
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= factor:
            return f"{value / factor:.4g} {unit}"
    return f"{value:.4g} B"


def _finite(ceilings: pd.DataFrame) -> pd.DataFrame:
    return ceilings[np.isfinite(ceilings["value"].astype(float)) & (ceilings["value"].astype(float) > 0)]


def _compute_ceilings(ceilings: pd.DataFrame, rows: pd.DataFrame, names: Sequence[str] | None) -> pd.DataFrame:
    """The named compute ceilings, or by default fp32 plus every kind the launches executed."""
    compute = _finite(ceilings[ceilings["kind"] == "compute"])
    if names is not None:
        return compute[compute["name"].isin(names)]
    used = {"fp32"} | {
        kind for kind in compute["applies_to"] if f"flop_{kind}" in rows and (rows[f"flop_{kind}"].fillna(0) > 0).any()
    }
    return compute[compute["applies_to"].isin(used)]


def _memory_ceilings(ceilings: pd.DataFrame, names: Sequence[str] | None) -> pd.DataFrame:
    memory = _finite(ceilings[ceilings["kind"] == "memory"])
    return memory if names is None else memory[memory["name"].isin(names)]


def _ceiling_label(row: pd.Series) -> str:
    unit = "B/s" if row["kind"] == "memory" else "FLOP/s"
    tag = " (measured)" if row["source"] == "measured" and "measured" not in row["description"] else ""
    return f"{row['description']}{tag}: {_eng(float(row['value']), unit)}"


def _draw_roofs(
    ax: Axes, memory: pd.DataFrame, compute: pd.DataFrame, x_range: tuple[float, float], knee_memory: str | None
) -> None:
    """Diagonal memory roofs up to the top compute roof, flat compute roofs, and knees."""
    x_lo, x_hi = x_range
    top = float(compute["value"].max()) if len(compute) else math.inf
    fastest = float(memory["value"].max()) if len(memory) else math.nan
    for _, row in memory.iterrows():
        bw = float(row["value"])
        x_end = min(x_hi, top / bw) if math.isfinite(top) else x_hi
        style = "-" if row["source"] == "counters" else "--"
        ax.plot([x_lo, x_end], [x_lo * bw, x_end * bw], style, color=CEILING_COLOR.get(row["name"], "0.3"), lw=1.6,
                gid=f"ceiling:{row['name']}", label=_ceiling_label(row))  # fmt: skip
    for _, row in compute.iterrows():
        peak = float(row["value"])
        x_start = max(x_lo, peak / fastest) if math.isfinite(fastest) else x_lo
        style = "-" if row["source"] == "counters" else "--"
        ax.plot([x_start, x_hi], [peak, peak], style, color=CEILING_COLOR.get(row["name"], "0.3"), lw=1.6,
                gid=f"ceiling:{row['name']}", label=_ceiling_label(row))  # fmt: skip
    knee_rows = memory[memory["name"] == knee_memory]
    if knee_rows.empty:
        return
    bw = float(knee_rows.iloc[0]["value"])
    for _, row in compute.iterrows():
        peak = float(row["value"])
        ax.plot([peak / bw], [peak], "k|", ms=14, mew=1.5, gid=f"knee:{knee_memory}:{row['name']}")
        ax.annotate(f"knee {peak / bw:.3g} FLOP/B", (peak / bw, peak), textcoords="offset points",
                    xytext=(4, -12), fontsize=7)  # fmt: skip


def _points(launches: pd.DataFrame, level: str, flop: str) -> pd.DataFrame:
    bytes_ = launches[f"{level}_bytes"].astype(float)
    x = launches[flop].astype(float) / bytes_
    y = launches[flop].astype(float) / launches["duration_s"].astype(float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    out = launches.loc[ok].copy()
    out["_x"], out["_y"] = x[ok], y[ok]
    return out


def _style_axes(ax: Axes, xlabel: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("performance (FLOP/s)")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def roofline_plot(
    launches: pd.DataFrame,
    ceilings: pd.DataFrame,
    *,
    level: str = "dram",
    flop: str = "flop",
    memory: Sequence[str] | None = None,
    compute: Sequence[str] | None = None,
    annotate: bool = True,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Log-log roofline: ceilings with labels and knees, one point per launch.

    Parameters
    ----------
    launches : DataFrame
        ``ReportTables.launches`` (or :func:`profiling.analysis.roofline.analyze` output).
    ceilings : DataFrame
        :func:`profiling.analysis.roofline.ceilings` output.
    level : {"dram", "l2", "l1"}
        Which bytes give the points' arithmetic intensity (``flop / <level>_bytes``); the
        knees are drawn on this level's counter ceiling.
    flop : str
        FLOP column for the points (e.g. ``"flop_fp32"`` to leave out half conversions).
    memory, compute : sequence of str, optional
        Ceiling names to draw. Default: every memory ceiling; fp32 plus the compute
        ceilings of every FLOP kind the launches executed.
    annotate : bool
        Label each config once, next to its first point (up to 40 points).

    Launches without FLOP or bytes cannot sit on a log-log plot and are left out.
    oasr launches are blue circles, torch orange squares, others grey triangles.
    """
    fig, ax = _axes(ax)
    pts = _points(launches, level, flop)
    mem = _memory_ceilings(ceilings, memory)
    comp = _compute_ceilings(ceilings, launches, compute)
    knees = [float(c) / float(m) for c in comp["value"] for m in mem["value"]] or [1.0]
    xs = [*pts["_x"], *knees]
    x_range = (min(xs) / 10.0, max(xs) * 10.0)
    _draw_roofs(ax, mem, comp, x_range, knee_memory=level)
    backends = pts["backend"].fillna("other").astype(str)
    for backend in dict.fromkeys(backends):
        group = pts[backends == backend]
        style = BACKEND_STYLE.get(backend, OTHER_STYLE)
        ax.scatter(group["_x"], group["_y"], s=42, zorder=5, edgecolors="k", linewidths=0.5,
                   gid=f"points:{backend}", label=f"{backend} ({len(group)} launches)", **style)  # fmt: skip
    if annotate and len(pts) <= 40:
        labels = [str(c) if pd.notna(c) else str(k) for c, k in zip(pts["config"], pts["kernel"], strict=True)]
        seen: set[str] = set()
        for label, px, py in zip(labels, pts["_x"], pts["_y"], strict=True):
            if label not in seen:  # one label per config: backends of one config sit close together
                seen.add(label)
                ax.annotate(label, (px, py), textcoords="offset points", xytext=(6, 4), fontsize=6)
    ax.set_xlim(*x_range)
    _style_axes(ax, f"arithmetic intensity (FLOP per {LEVEL_LABEL.get(level, level)} byte)")
    ax.set_title(title or f"Roofline ({LEVEL_LABEL.get(level, level)} bytes, {flop})")
    return fig


def hierarchical_roofline(
    launch_row: pd.Series,
    ceilings: pd.DataFrame,
    *,
    flop: str = "flop",
    compute: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """One kernel's DRAM, L2 and L1 points (same FLOP/s, AI per level) on the counter roofs.

    Parameters
    ----------
    launch_row : Series
        One row of ``ReportTables.launches``.
    ceilings : DataFrame
        :func:`profiling.analysis.roofline.ceilings` output; the DRAM/L2/L1 counter roofs are drawn.
    """
    fig, ax = _axes(ax)
    frame = launch_row.to_frame().T
    mem = _memory_ceilings(ceilings, None)
    mem = mem[(mem["source"] == "counters") & mem["name"].isin(list(LEVEL_STYLE))]
    comp = _compute_ceilings(ceilings, frame, compute)
    fl, duration = float(launch_row[flop]), float(launch_row["duration_s"])
    points = {}
    for level in LEVEL_STYLE:
        nbytes = float(launch_row.get(f"{level}_bytes", math.nan))
        if fl > 0 and nbytes > 0 and duration > 0:
            points[level] = (fl / nbytes, fl / duration)
    knees = [float(c) / float(m) for c in comp["value"] for m in mem["value"]] or [1.0]
    xs = [p[0] for p in points.values()] + knees
    x_range = (min(xs) / 10.0, max(xs) * 10.0)
    _draw_roofs(ax, mem, comp, x_range, knee_memory="dram")
    for level, (x, y) in points.items():
        ax.plot([x], [y], linestyle="none", mec="k", gid=f"point:{level}",
                label=f"{LEVEL_LABEL[level]} point: AI {x:.3g} FLOP/B", **LEVEL_STYLE[level])  # fmt: skip
    ax.set_xlim(*x_range)
    _style_axes(ax, "arithmetic intensity (FLOP per byte at each level)")
    name = ":".join(str(launch_row.get(k)) for k in ("op", "backend") if pd.notna(launch_row.get(k)))
    cfg = " ".join(str(launch_row.get(k)) for k in ("config", "dtype") if pd.notna(launch_row.get(k)))
    ax.set_title(f"Hierarchical roofline: {launch_row.get('kernel', '')}  {name} {cfg}".strip())
    return fig


X_CANDIDATES = ("expected_bytes", "bytes", "dram_bytes")
Y_CANDIDATES = ("effective_bw_bytes_per_s", "bandwidth_bytes_per_s", "dram_bw_bytes_per_s")


def _first_column(df: pd.DataFrame, candidates: Sequence[str]) -> str:
    for column in candidates:
        if column in df and df[column].notna().any():
            return column
    raise ValueError(f"none of the columns {', '.join(candidates)} has values; have {', '.join(map(str, df.columns))}")


def bandwidth_vs_size(
    df: pd.DataFrame,
    copy_ceiling: float | None = None,
    *,
    dram_ceiling: float | None = None,
    x: str = "auto",
    y: str = "auto",
    ax: Axes | None = None,
) -> Figure:
    """Achieved bandwidth against problem size, one line per (backend, dtype).

    Parameters
    ----------
    df : DataFrame
        A profile's launches or a timing table. ``x="auto"`` takes the first column present
        (with values) of ``expected_bytes`` (from :func:`profiling.analysis.roofline.expected_work`),
        ``bytes`` (timing tables), ``dram_bytes``; ``y="auto"`` likewise of
        ``effective_bw_bytes_per_s`` (bytes the op must move / duration),
        ``bandwidth_bytes_per_s``, ``dram_bw_bytes_per_s`` (counters).
    copy_ceiling : float, optional
        Measured device copy bandwidth (bytes/s), drawn dashed (gid ``ceiling:copy``).
    dram_ceiling : float, optional
        The counter DRAM ceiling (bytes/s), drawn solid (gid ``ceiling:dram``).

    Raises
    ------
    ValueError
        When none of the candidate columns is present.
    """
    fig, ax = _axes(ax)
    x = _first_column(df, X_CANDIDATES) if x == "auto" else x
    y = _first_column(df, Y_CANDIDATES) if y == "auto" else y
    data = df[np.isfinite(df[x].astype(float)) & np.isfinite(df[y].astype(float))]
    backend = data["backend"].fillna("other").astype(str)
    dtype = data["dtype"].fillna("?").astype(str)
    op = data["op"].fillna("?").astype(str) if "op" in data else pd.Series("?", index=data.index)
    several_ops = op.nunique() > 1
    for (o, b, d), group in data.groupby([op, backend, dtype], sort=False):
        group = group.sort_values(x)
        style = BACKEND_STYLE.get(b, OTHER_STYLE)
        linestyle = "-" if d in ("float16", "?") else ("--" if d == "bfloat16" else ":")
        name = f"{o}:{b}:{d}" if several_ops else f"{b}:{d}"
        ax.plot(group[x].astype(float), group[y].astype(float), linestyle=linestyle, gid=f"series:{name}",
                label=name.replace(":", " "), **style)  # fmt: skip
    for name, value, style, text in (
        ("copy", copy_ceiling, "--", "measured copy"),
        ("dram", dram_ceiling, "-", "DRAM peak (counters)"),
    ):
        if value is not None and math.isfinite(value):
            ax.axhline(value, linestyle=style, color="k" if name == "copy" else "C3", lw=1.2, gid=f"ceiling:{name}",
                       label=f"{text}: {_eng(value, 'B/s')}")  # fmt: skip
    ax.set_xscale("log", base=2)
    sizes = np.unique(data[x].astype(float))
    if 0 < len(sizes) <= 12:
        ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _binary_bytes(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(EngFormatter(unit="B/s"))
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"size ({x})")
    ax.set_ylabel(f"bandwidth ({y})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Bandwidth vs size")
    return fig
