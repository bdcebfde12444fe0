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
``series:<backend>:<dtype>``       Line2D of one backend's rate in :func:`rate_vs_size`
                                   (``series:<op>:<backend>:<dtype>`` when the table holds several ops)
``label:<config>``                 Annotation numbering a config's point on a roofline
``knee-label:<memory>:<compute>``  Annotation of a knee's arithmetic intensity
``key:configs``                    Text beside a roofline: point number -> config
``ratio:<verdict>``                ErrorbarContainer's line of :func:`compare_ratios` (one per verdict)
``band:<config>``                  Rectangle of a config's 1 +- threshold band in :func:`compare_ratios`
``kernels:<stream>``               BrokenBarHCollection of one stream's kernels in :func:`timeline_plot`
``gaps``                           BrokenBarHCollection of the idle gaps (no kernel on any stream)
=================================  ======================================================

In :func:`rate_vs_size` with several ops, each op has its own axes and the ceiling
lines of all but the first are ``ceiling:<name>:<op>``.

Legibility: backend is colour (oasr blue, torch orange) everywhere, oasr's drawn on top; in rate plots
dtype is line style and marker (float32 solid circles, float16 dashed squares, bfloat16
dotted triangles); legends sit outside the data. Rates in labels go through
:func:`format_rate`, one rounding for every plot (``4.24 TB/s``). Roofline points are
one per backend and config (the config's kernels summed), numbered by config (smallest first) with a key
beside the plot; a number that would overlap another label or a knee's is left out rather than drawn into a
smear. ``tests/test_plots.py`` renders each figure and checks that no two texts overlap.

Data coordinates are in base units (FLOP/byte, FLOP/s, bytes, bytes/s); axis tick
labels use engineering prefixes.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import EngFormatter

from .. import units
from ..readable import significant
from ..units import format_rate

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
DTYPE_STYLE: dict[str, dict[str, Any]] = {
    "float32": {"linestyle": "-", "marker": "o"},
    "float16": {"linestyle": "--", "marker": "s"},
    "bfloat16": {"linestyle": ":", "marker": "^"},
}
"""Bandwidth plots: dtype is line style and marker; backend is colour."""
OTHER_DTYPE_STYLE: dict[str, Any] = {"linestyle": "-.", "marker": "D"}
LABEL_OFFSETS = ((5, 3), (5, -9), (-11, 3), (-11, -9), (0, 9), (0, -15), (9, -3), (-15, -3))
"""Where a roofline point's number may go (points from the point), tried in turn."""


def _axes(ax: Axes | None, size: tuple[float, float] = (8.0, 5.5)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _binary_bytes(value: float) -> str:
    """``8192`` -> ``"8 KiB"``; sizes in sweeps are powers of two."""
    return units.binary(value, lambda v: f"{v:.3g}", lambda v: f"{v:.4g}")


def _intensity(value: float) -> str:
    """An arithmetic intensity to three significant digits, never scientific: ``262530`` -> ``"263,000"``."""
    return significant(float(f"{value:.3g}"))


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
    return f"{row['description']}{tag}: {format_rate(float(row['value']), unit)}"


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
        ax.annotate(f"knee {_intensity(peak / bw)} FLOP/B", (peak / bw, peak), textcoords="offset points",
                    xytext=(4, -12), fontsize=7, gid=f"knee-label:{knee_memory}:{row['name']}")  # fmt: skip


def per_config(launches: pd.DataFrame, level: str, flop: str) -> pd.DataFrame:
    """One row per (backend, config, dtype): the FLOP, ``level`` bytes and durations of its kernels summed (torch
    runs a gemm with its bias as two or three kernels; the op's rate is what they do together), ``kernels`` the
    count. A launch without a config keeps its kernel name as its label."""
    if launches.empty:
        return launches.assign(kernels=pd.Series(dtype=int))
    df = launches.copy()
    df["backend"] = df["backend"].astype(object).where(df["backend"].notna(), "other")
    df["config"] = df["config"].astype(object).where(df["config"].notna(), df["kernel"].astype(str))
    df["dtype"] = df["dtype"].astype(object).where(df["dtype"].notna(), "?") if "dtype" in df else "?"
    summed = [c for c in dict.fromkeys([flop, f"{level}_bytes", "dram_bytes", "duration_s"]) if c in df]
    kept = [c for c in ("op", "kernel", "expected_bytes") if c in df]
    grouped = df.groupby(["backend", "config", "dtype"], sort=False)
    table = grouped[summed].sum(min_count=1).join(grouped[kept].first()).join(grouped.size().rename("kernels"))
    return table.reset_index()


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
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _title(text: str, width: int = 95) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _config_order(pts: pd.DataFrame) -> list[str]:
    """The points' config labels, smallest work first (then by label)."""
    labels = [str(c) if pd.notna(c) else str(k) for c, k in zip(pts["config"], pts["kernel"], strict=True)]
    size = pts["dram_bytes"].astype(float) if "dram_bytes" in pts else pd.Series(0.0, index=pts.index)
    if "expected_bytes" in pts and pts["expected_bytes"].notna().any():
        size = pts["expected_bytes"].astype(float)
    first: dict[str, float] = {}
    for label, value in zip(labels, size.fillna(0.0), strict=True):
        first.setdefault(label, float(value))
    return sorted(first, key=lambda label: (first[label], label))


def _number_points(ax: Axes, pts: pd.DataFrame, order: list[str]) -> None:
    """Number the points by config (its place in ``order``, from 1), leaving out numbers that would overlap.

    First one point per config (oasr's where there is one, gid ``label:<config>``), then every
    other point where its number fits (gid ``label:<config>:<n>``).
    """
    number = {label: i + 1 for i, label in enumerate(order)}
    labels = [str(c) if pd.notna(c) else str(k) for c, k in zip(pts["config"], pts["kernel"], strict=True)]
    fig = ax.figure
    fig.draw_without_rendering()  # final limits and layout, so text extents are where they will be drawn
    renderer = fig._get_renderer()
    placed = [ax.transData.transform((x, y)) for x, y in zip(pts["_x"], pts["_y"], strict=True)]
    taken = [(px - 4, py - 4, px + 4, py + 4) for px, py in placed]  # the markers themselves
    for text in ax.texts:  # the knees' labels
        if str(text.get_gid()).startswith("knee-label:"):
            box = text.get_window_extent(renderer)
            taken.append((box.x0 - 1, box.y0 - 1, box.x1 + 1, box.y1 + 1))
    frame = ax.get_window_extent(renderer)
    backends = pts["backend"].fillna("other").astype(str).tolist()
    rows = sorted(range(len(pts)), key=lambda i: (backends[i] != "oasr", number[labels[i]]))
    firsts = {labels[i]: i for i in reversed(rows)}
    for i in [*firsts.values(), *(i for i in rows if firsts[labels[i]] != i)]:
        first = firsts[labels[i]] == i
        hub = placed[firsts[labels[i]]]
        if not first and math.dist(placed[i], hub) < 14:  # sits on its config's numbered point: one number will do
            continue
        point = (pts["_x"].iloc[i], pts["_y"].iloc[i])
        for dx, dy in LABEL_OFFSETS:
            text = ax.annotate(str(number[labels[i]]), point, textcoords="offset points",
                               xytext=(dx, dy), fontsize=7, color="k" if first else "0.35",
                               gid=f"label:{labels[i]}" if first else f"label:{labels[i]}:{i}")  # fmt: skip
            text.set_in_layout(False)
            box = text.get_window_extent(renderer)
            edges = (box.x0 - 1, box.y0 - 1, box.x1 + 1, box.y1 + 1)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(_overlap(edges, other) for other in taken):
                taken.append(edges)
                break
            text.remove()


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


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
        Number each config's point (smallest config 1, up to 40 configs), with the key
        beside the plot; a number that would overlap another is left out (the key keeps it).

    Launches without FLOP or bytes cannot sit on a log-log plot and are left out.
    oasr launches are blue circles, torch orange squares, others grey triangles.
    """
    fig, ax = _axes(ax, size=(10.0, 5.5))
    pts = _points(per_config(launches, level, flop), level, flop)
    mem = _memory_ceilings(ceilings, memory)
    comp = _compute_ceilings(ceilings, launches, compute)
    knees = [float(c) / float(m) for c in comp["value"] for m in mem["value"]] or [1.0]
    xs = [*pts["_x"], *knees]
    x_range = (min(xs) / 10.0, max(xs) * 10.0)
    _draw_roofs(ax, mem, comp, x_range, knee_memory=level)
    backends = pts["backend"].astype(str)
    for backend in dict.fromkeys(sorted(backends, key=lambda b: b != "oasr")):  # oasr's first in the legend
        group = pts[backends == backend]
        style = BACKEND_STYLE.get(backend, OTHER_STYLE)
        most = int(group["kernels"].max())
        what = f"{len(group)} configs" + (f"; up to {most} kernels each, summed" if most > 1 else "")
        ax.scatter(group["_x"], group["_y"], s=42, zorder=6 if backend == "oasr" else 5, edgecolors="k",  # oasr on top
                   linewidths=0.5, gid=f"points:{backend}", label=f"{backend} ({what})", **style)  # fmt: skip
    ax.set_xlim(*x_range)
    _style_axes(ax, f"arithmetic intensity (FLOP per {LEVEL_LABEL.get(level, level)} byte)")
    ax.set_title(_title(title or f"Roofline ({LEVEL_LABEL.get(level, level)} bytes, {flop})"), fontsize=10)
    order = _config_order(pts) if annotate and len(pts) else []
    if 0 < len(order) <= 40:
        key = [f"{i + 1:>2}  {label}" for i, label in enumerate(order)]
        ax.text(1.01, 0.0, "configs (point numbers):\n" + "\n".join(key), transform=ax.transAxes, fontsize=7,
                va="bottom", ha="left", family="monospace", gid="key:configs")  # fmt: skip
        _number_points(ax, pts, order)
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
    fig, ax = _axes(ax, size=(10.0, 5.5))
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
                label=f"{LEVEL_LABEL[level]} point: {_intensity(x)} FLOP per byte", **LEVEL_STYLE[level])  # fmt: skip
    ax.set_xlim(*x_range)
    _style_axes(ax, "arithmetic intensity (FLOP per byte at each level)")
    name = ":".join(str(launch_row.get(k)) for k in ("op", "backend") if pd.notna(launch_row.get(k)))
    cfg = " ".join(str(launch_row.get(k)) for k in ("config", "dtype") if pd.notna(launch_row.get(k)))
    ax.set_title(_title(f"Hierarchical roofline: {launch_row.get('kernel', '')}  {name} {cfg}".strip()), fontsize=10)
    return fig


X_CANDIDATES = ("expected_bytes", "bytes", "dram_bytes")
Y_CANDIDATES = ("effective_bw_bytes_per_s", "bandwidth_bytes_per_s", "dram_bw_bytes_per_s")
Y_LABELS = {
    "effective_bw_bytes_per_s": "bandwidth: bytes the op must move / time",
    "bandwidth_bytes_per_s": "bandwidth: bytes the op must move / time",
    "dram_bw_bytes_per_s": "DRAM bandwidth (counters)",
    "flop_per_s": "FLOP rate: the op's FLOP / time",
}
X_LABELS = {
    "expected_bytes": "bytes the op must move (one position per config, smallest first)",
    "bytes": "bytes the op must move (one position per config, smallest first)",
    "dram_bytes": "DRAM bytes (one position per config, smallest first)",
    "flop": "FLOP the op does (one position per config, fewest first)",
}


def _first_column(df: pd.DataFrame, candidates: Sequence[str]) -> str:
    for column in candidates:
        if column in df and df[column].notna().any():
            return column
    raise ValueError(f"none of the columns {', '.join(candidates)} has values; have {', '.join(map(str, df.columns))}")


def _positions(rows: pd.DataFrame, x: str) -> tuple[pd.Series, list[str]]:
    """Each row's x position, one per config in order of size (configs of equal size side by side, not on one
    x with a vertical zigzag between them), and the tick labels: the size, and the config where sizes repeat."""
    sizes = rows[x].astype(float)
    configs = rows["config"].astype(str) if "config" in rows else sizes.astype(str)
    # a config in two dtypes moves two sizes: one position each, so every line runs in order of size
    keys = pd.Series(list(zip(configs, sizes, strict=True)), index=rows.index)
    order = sorted(set(keys), key=lambda key: (key[1], key[0]))
    position = {key: i for i, key in enumerate(order)}
    shown = [_binary_bytes(size) if x != "flop" else units.decimal(size, "FLOP", ".3g") for _, size in order]
    repeated = pd.Series(shown).duplicated(keep=False).tolist()
    ticks = [
        text + (f"\n{label}" if twice else "") for (label, _), text, twice in zip(order, shown, repeated, strict=True)
    ]
    return keys.map(position), ticks


def rate_vs_size(
    df: pd.DataFrame,
    copy_ceiling: float | None = None,
    *,
    dram_ceiling: float | None = None,
    flop_ceilings: Mapping[str, float] | None = None,
    x: str = "auto",
    y: str = "auto",
    ax: Axes | None = None,
    title: str = "Bandwidth vs size",
) -> Figure:
    """What each op achieves against its problem size, one line per (backend, dtype): bandwidth against the copy
    ceiling, or, for the ops in ``flop_ceilings``, the FLOP rate against the ceiling given (measured cuBLAS): the
    metric that bounds the op.

    Backend is colour, dtype is line style and marker (:data:`DTYPE_STYLE`); the legend,
    grouped (backends, dtypes, ceilings), sits outside the data. Configs sit at one x position
    each, in order of size. A table of several ops gets one axes per op (a shared y when they
    share the metric), unless ``ax`` is given.

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
    flop_ceilings : mapping, optional
        Op -> the FLOP/s ceiling of an op plotted as its FLOP rate (``flop_per_s``), drawn dashed
        (gid ``ceiling:cublas``).
    title : str
        The figure's title (each op's axes is titled with the op).

    Raises
    ------
    ValueError
        When none of the candidate columns is present.
    """
    flop_ceilings = dict(flop_ceilings or {})
    x = _first_column(df, X_CANDIDATES) if x == "auto" else x
    y = _first_column(df, Y_CANDIDATES) if y == "auto" else y
    data = df[np.isfinite(df[x].astype(float))]
    op = data["op"].fillna("?").astype(str) if "op" in data else pd.Series("?", index=data.index)
    ops = list(dict.fromkeys(op))
    metric = {o: "flop_per_s" if o in flop_ceilings else y for o in ops}
    several_ops = len(ops) > 1
    if ax is not None or not several_ops:
        fig, ax = _axes(ax, size=(9.0, 5.0))
        axes = {o: ax for o in ops} or {"?": ax}
    else:
        cols = 2
        rows = math.ceil(len(ops) / cols)
        fig = Figure(figsize=(11.0, 3.6 * rows + 0.8), layout="constrained")
        shared = len(set(metric.values())) == 1
        grid = fig.subplots(rows, cols, sharex=False, sharey=shared, squeeze=False).ravel()
        for extra in grid[len(ops) :]:
            extra.remove()
        axes = dict(zip(ops, grid, strict=False))
    backends: list[str] = []
    dtypes: list[str] = []
    tops: dict[Any, float] = {}
    for o, a in axes.items():
        column = metric.get(o, y)
        rows_of_op = data[(op == o) & np.isfinite(data[column].astype(float))]
        along = "flop" if column == "flop_per_s" and "flop" in rows_of_op else x  # a FLOP rate against the FLOP
        positions, ticks = _positions(rows_of_op, along)
        backend = rows_of_op["backend"].fillna("other").astype(str)
        dtype = rows_of_op["dtype"].fillna("?").astype(str)
        top = tops.get(a, 0.0)
        for (b, d), group in rows_of_op.groupby([backend, dtype], sort=False):
            order = positions[group.index].sort_values().index
            backends += [b] if b not in backends else []
            dtypes += [d] if d not in dtypes else []
            name = f"{o}:{b}:{d}" if several_ops else f"{b}:{d}"
            style = DTYPE_STYLE.get(d, OTHER_DTYPE_STYLE)
            a.plot(positions[order].astype(float), group.loc[order, column].astype(float), color=_backend_color(b),
                   ms=5, lw=1.4, zorder=3 if b == "oasr" else 2, gid=f"series:{name}", label=name.replace(":", " "),
                   **style)  # fmt: skip
            top = max(top, float(group[column].astype(float).max()))
        first = a is next(iter(axes.values()))
        lines = [("cublas", flop_ceilings.get(o), "--", "k")] if column == "flop_per_s" else [
            ("copy", copy_ceiling, "--", "k"), ("dram", dram_ceiling, "-", "C3")]  # fmt: skip
        for name, value, style, colour in lines:
            if value is not None and math.isfinite(value):
                gid = f"ceiling:{name}" if first else f"ceiling:{name}:{o}"
                a.axhline(value, linestyle=style, color=colour, lw=1.2, gid=gid)
                top = max(top, value)
        tops[a] = top
        a.set_xticks(range(len(ticks)), ticks)
        a.set_xlim(-0.5, len(ticks) - 0.5)
        upright = len(ticks) > 5 or "\n" in "".join(ticks)  # upright labels take a line's width, no more
        a.tick_params(axis="x", labelsize=7, labelrotation=90 if upright else 0)
        a.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s" if column == "flop_per_s" else "B/s"))
        a.set_xlabel(X_LABELS.get(along, along), fontsize=8)
        a.set_ylabel(Y_LABELS.get(column, column), fontsize=8)
        a.grid(True, alpha=0.3)
        if several_ops:
            a.set_title(o, fontsize=9)
    for a, top in tops.items():
        a.set_ylim(0, top * 1.08 if top > 0 else None)
    cublas = next((v for v in flop_ceilings.values() if v is not None and math.isfinite(v)), None)
    flop_only = all(metric[o] == "flop_per_s" for o in ops)
    handles = _rate_legend(backends, dtypes, None if flop_only else copy_ceiling, None if flop_only else dram_ceiling,
                           cublas)  # fmt: skip
    if several_ops and len(set(axes.values())) > 1:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
        fig.suptitle(title)
    else:
        ax = next(iter(axes.values()))
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  frameon=False)  # fmt: skip
        ax.set_title(title)
    return fig


def _backend_color(backend: str) -> Any:
    return BACKEND_STYLE.get(backend, OTHER_STYLE)["color"]


def _rate_legend(
    backends: Sequence[str],
    dtypes: Sequence[str],
    copy_ceiling: float | None,
    dram_ceiling: float | None,
    cublas_ceiling: float | None = None,
) -> list[Any]:
    """Grouped legend: a heading and entries for backends (colour), dtypes (style), ceilings."""

    def heading(text: str) -> Patch:
        return Patch(color="none", label=text)

    handles: list[Any] = [heading("backend (colour)")]
    handles += [Line2D([], [], color=_backend_color(b), lw=2.5, label=b) for b in backends]
    handles.append(heading("dtype (line, marker)"))
    handles += [
        Line2D([], [], color="0.3", lw=1.4, ms=5, label=d, **DTYPE_STYLE.get(d, OTHER_DTYPE_STYLE)) for d in dtypes
    ]
    ceilings = [
        Line2D([], [], color=colour, linestyle=style, lw=1.2, label=f"{text}: {format_rate(value, unit)}")
        for value, style, colour, text, unit in (
            (copy_ceiling, "--", "k", "measured copy", "B/s"),
            (dram_ceiling, "-", "C3", "DRAM peak (counters)", "B/s"),
            (cublas_ceiling, "--", "k", "measured cuBLAS BF16", "FLOP/s"),
        )
        if value is not None and math.isfinite(value)
    ]
    if ceilings:
        handles += [heading("ceilings"), *ceilings]
    return handles


VERDICT_COLOR: dict[str, str] = {"faster": "C2", "slower": "C3", "same": "C0", "insufficient data": "0.5"}
"""Compare plots: one colour per verdict of :data:`profiling.compare.VERDICTS` (a test keeps the two alike)."""


def compare_ratios(table: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Figure:
    """The ratio head / base per config of a compare table, with its bootstrap interval and noise band.

    Each config is a point at its ``ratio`` with error bars from ``ci_low`` to ``ci_high``, coloured by its
    verdict, over a grey band from 1 / (1 + threshold) to 1 + threshold (its own threshold: a noisier config
    has a wider band), as nvbench #90 asks: a point whose bar lies inside its band is "same".

    Parameters
    ----------
    table : DataFrame
        :func:`profiling.compare.compare_tables` output (``config``, ``dtype``, ``ratio``, ``ci_low``,
        ``ci_high``, ``threshold``, ``verdict``), one row per config and dtype, in axis order.
    title : str
        The axes title.
    ax : Axes, optional
        Draw into this axes instead of a new figure.

    Raises
    ------
    ValueError
        When ``table`` is empty or lacks one of those columns.
    """
    needed = ["config", "dtype", "ratio", "ci_low", "ci_high", "threshold", "verdict"]
    missing = [c for c in needed if c not in table]
    if missing or table.empty:
        lacking = f"it lacks {', '.join(missing)}" if missing else "it has no rows"
        raise ValueError(f"table: a compare table with rows and the columns {', '.join(needed)} is needed; {lacking}")
    fig, ax = _axes(ax, (max(5.0, 1.1 * len(table) + 3.0), 3.6))
    one_dtype = table["dtype"].nunique() == 1  # then the title's, not each label's
    labels = [c if one_dtype else f"{c} {d}" for c, d in zip(table["config"], table["dtype"], strict=True)]
    x = np.arange(len(table))
    for i, (label, threshold) in enumerate(zip(labels, table["threshold"].astype(float), strict=True)):
        low = 1 / (1 + threshold)
        ax.add_patch(Rectangle((i - 0.35, low), 0.7, 1 + threshold - low, color="0.88", zorder=0, gid=f"band:{label}"))
    ax.axhline(1.0, color="0.4", linewidth=0.8)
    for verdict, rows in table.reset_index(drop=True).groupby("verdict", sort=False):
        ratio = rows["ratio"].astype(float)
        bars = ax.errorbar(
            x[rows.index], ratio, yerr=[ratio - rows["ci_low"].astype(float), rows["ci_high"].astype(float) - ratio],
            fmt="o", capsize=4, color=VERDICT_COLOR.get(str(verdict), "k"), label=str(verdict),
        )  # fmt: skip
        bars.lines[0].set_gid(f"ratio:{verdict}")
    ax.set_xticks(x, [textwrap.fill(label, 18) for label in labels], fontsize=7)
    ax.set_xlim(-0.6, len(table) - 0.4)
    ax.set_ylabel("head / base time")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="verdict",
              title_fontsize=7)  # fmt: skip
    if title:
        ax.set_title(_title(title, 70), fontsize=9)
    return fig


def timeline_plot(timeline: Any, *, title: str = "", ax: Axes | None = None) -> Figure:
    """A traced region's kernels, one row per stream, and beneath them its idle gaps, along time (µs).

    Parameters
    ----------
    timeline : profiling.analysis.timeline.Timeline
        From :func:`profiling.analysis.timeline.summarize`.
    title : str
        Put before the figures of the axes title (kernels, gap share).
    ax : Axes, optional
        Draw into this axes instead of a new figure.
    """
    kernels = timeline.kernels
    streams = list(dict.fromkeys(kernels.sort_values("stream", kind="stable")["stream"]))
    fig, ax = _axes(ax, (8.0, 1.2 + 0.35 * (len(streams) + 1)))
    for row, stream in enumerate(streams):
        mine = kernels[kernels["stream"] == stream]
        spans = list(zip(mine["start_s"] * 1e6, mine["duration_s"] * 1e6, strict=True))
        ax.broken_barh(spans, (row + 0.6, 0.8), color=f"C{row % 10}", gid=f"kernels:{stream}")
    gaps = list(zip(timeline.gaps["start_s"] * 1e6, timeline.gaps["duration_s"] * 1e6, strict=True))
    ax.broken_barh(gaps, (-0.4, 0.8), color="C3", gid="gaps")
    ax.set_yticks(range(len(streams) + 1), ["gaps", *(f"stream {s}" for s in streams)], fontsize=7)
    ax.set_xlabel("time from the first kernel (µs)")
    ax.set_xlim(0, timeline.span_s * 1e6 * 1.01)
    ax.grid(True, axis="x", alpha=0.3)
    figures = (
        f"{len(kernels)} kernels, busy {timeline.busy_s * 1e6:.1f} µs; gaps {timeline.gap_s * 1e6:.1f} µs = "
        f"{100 * timeline.gap_share:.0f}% of the region's {timeline.region_s * 1e6:.1f} µs"
    )
    ax.set_title(_title(f"{title}: {figures}" if title else figures, 90), fontsize=9)
    return fig
