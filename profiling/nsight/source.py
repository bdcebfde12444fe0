"""Per-source-line hotspots of a ``source``-preset report: where a kernel spends its instructions and stalls.

ncu's ``SourceCounters`` section records instanced metrics whose correlation ids are
program counters (PCs): per SASS instruction, the warp instructions executed, the
warp-state samples by stall reason, excess L2 sectors and excess shared-memory
wavefronts (bank conflicts). :func:`pc_table` reads them per PC with ``ncu_report``
(``action.source_info(pc)`` gives file and line when the kernel was built with
``-lineinfo``; ``action.sass_by_pc(pc)`` the instruction), and :func:`line_table`
sums them per source line. Some instanced metrics of the section are keyed by
opcode or table index, not by PC; only the metrics in :data:`PC_METRICS` and
the stall-reason samples are read, so nothing is attributed to a wrong address.

``line_table`` columns (one row per (launch, file, line); PCs without line
information are one row with ``file=""``, ``line=0``, so the counts still sum to
the kernel's):

======================  ==============================================================
launch, kernel          the launch's position in the report and its function name
file, line, source      source file, 1-based line, that line's text (imported with
                        ``--import-source yes``; empty when not imported)
pcs                     SASS instructions attributed to the line
inst_executed           warp instructions executed (``inst_executed``)
samples                 warp-state samples (``smsp__pcsamp_sample_count``)
stall_<reason>          samples of warps stalled on ``<reason>`` (``long_scoreboard``,
                        ``wait``, ``barrier``, ``math_pipe_throttle``, ``gmma`` ...)
l2_excess_sectors       L2 sectors beyond the ideal for the accesses (uncoalesced)
shared_excess_wavefronts shared-memory wavefronts beyond one per request (bank conflicts)
sass                    the line's SASS, one instruction per line (``with_sass=True``)
======================  ==============================================================

A parsed table is written beside its report as ``<report stem>.lines.csv`` (first
line: the report's SHA-256) so a machine without ``ncu_report`` replays it; a table
whose hash no longer matches its report is parsed again.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..files import atomic_write_text, cached_digest, file_digest, shown_path
from . import packing
from .reader import import_ncu_report
from .recordings import LINES_SUFFIX

PC_METRICS: dict[str, tuple[str, ...]] = {
    "inst_executed": ("inst_executed",),
    "samples": ("smsp__pcsamp_sample_count",),
    "l2_excess_sectors": (
        "derived__memory_l2_theoretical_sectors_global_excessive",
        "memory_l2_theoretical_sectors_global_excessive",
    ),
    "shared_excess_wavefronts": (
        "derived__memory_l1_wavefronts_shared_excessive",
        "memory_l1_wavefronts_shared_excessive",
    ),
}
"""Column -> the per-PC metric names that fill it (the first present wins)."""
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
"""Per-PC samples by warp state; the ``_not_issued`` variants (no instruction issued that cycle) are left out."""
ISSUED = "selected"
"""The sampled warp was issuing, not stalled: kept as a column, left out of "top stall reasons"."""
KERNEL_INST = ("smsp__inst_executed.sum", "sm__inst_executed.sum")
"""The kernel's total warp instructions: what the per-line counts must sum to."""
KEYS = ("launch", "kernel", "file", "line")
NO_LINE = "(no line information: build with -lineinfo)"
CONTEXT = 3
"""Source lines kept around each counted line, for the annotated view."""


def _per_pc(metric: Any) -> dict[int, float]:
    if metric is None or not metric.has_correlation_ids():
        return {}
    pcs = metric.correlation_ids()
    return {int(pcs.as_uint64(i)): float(metric.as_double(i)) for i in range(metric.num_instances())}


def pc_metrics(action: Any) -> dict[str, dict[int, float]]:
    """Column -> {pc: value} for every per-PC metric of ``action`` this module reads."""
    names = set(action.metric_names())
    found: dict[str, dict[int, float]] = {}
    for column, candidates in PC_METRICS.items():
        name = next((n for n in candidates if n in names), None)
        if name is not None:
            found[column] = _per_pc(action.metric_by_name(name))
    for name in sorted(names):
        if name.startswith(STALL_PREFIX) and not name.endswith("_not_issued"):
            found["stall_" + name[len(STALL_PREFIX) :]] = _per_pc(action.metric_by_name(name))
    return found


def source_texts(action: Any) -> dict[str, str]:
    """The sources imported into ``action``'s report, file name -> text. ``ncu_report`` returns a SWIG map
    (items and indexing, no ``get``), copied here into a dict."""
    files = action.source_files()
    return {str(name): str(text) for name, text in files.items()} if files is not None else {}


def pc_table(action: Any, launch: int = 0) -> pd.DataFrame:
    """One row per SASS instruction (PC) of ``action``: its source line, SASS text and counters."""
    values = pc_metrics(action)
    pcs = sorted({pc for column in values.values() for pc in column})
    files = {name: text.splitlines() for name, text in source_texts(action).items()}
    rows = []
    for pc in pcs:
        info = action.source_info(pc)
        file, line = (info.file_name(), int(info.line())) if info is not None else ("", 0)
        text = files.get(file, [])
        rows.append(
            {
                "launch": launch,
                "kernel": action.name(),
                "file": file,
                "line": line,
                "source": text[line - 1] if 0 < line <= len(text) else (NO_LINE if not file else ""),
                "pc": pc,
                "sass": action.sass_by_pc(pc),
                **{column: by_pc.get(pc, 0.0) for column, by_pc in values.items()},
            }
        )
    return pd.DataFrame(rows, columns=[*KEYS, "source", "pc", "sass", *values])


def lines_from_pcs(pcs: pd.DataFrame, with_sass: bool = False) -> pd.DataFrame:
    """Sum a :func:`pc_table` per (launch, kernel, file, line); ``pcs`` counts the instructions."""
    counters = [c for c in pcs.columns if c not in (*KEYS, "source", "pc", "sass")]
    grouped = pcs.groupby(list(KEYS), sort=False)
    table = grouped[counters].sum()
    table.insert(0, "pcs", grouped.size())
    table.insert(0, "source", grouped["source"].first())
    if with_sass:
        table["sass"] = grouped["sass"].agg("\n".join)
    return table.reset_index().sort_values(["launch", "file", "line"], ignore_index=True)


def kernel_instructions(action: Any) -> float:
    """The kernel's total warp instructions executed (NaN when the report lacks the count)."""
    for name in KERNEL_INST:
        metric = action.metric_by_name(name)
        if metric is not None:
            return float(metric.as_double())
    return math.nan


def actions_of(report: str | Path) -> list[Any]:
    """Every profiled launch of ``report``, in the order of :func:`profiling.nsight.reader.read_report`."""
    loaded = import_ncu_report().load_report(str(packing.readable(report)))
    ranges = [loaded.range_by_idx(i) for i in range(loaded.num_ranges())]
    return [rng.action_by_idx(j) for rng in ranges for j in range(len(rng))]


def with_context(lines: pd.DataFrame, files: dict[str, str], context: int = CONTEXT) -> pd.DataFrame:
    """``lines`` plus the source lines within ``context`` of each counted one (zero counters), so a
    replayed annotation shows the code around a hotspot without the source file at hand."""
    extra = []
    for (launch, kernel, file), group in lines.groupby(["launch", "kernel", "file"], sort=False):
        text = files.get(file, "").splitlines()
        have = set(group["line"])
        near = {n for line in have for n in range(line - context, line + context + 1) if 0 < n <= len(text)}
        extra += [
            {"launch": launch, "kernel": kernel, "file": file, "line": n, "source": text[n - 1], "pcs": 0}
            for n in sorted(near - have)
        ]
    if not extra:
        return lines
    padded = pd.concat([lines, pd.DataFrame(extra)], ignore_index=True)
    counters = [c for c in lines.columns if c not in (*KEYS, "source", "sass")]
    padded[counters] = padded[counters].fillna(0)
    if "sass" in padded:
        padded["sass"] = padded["sass"].fillna("")
    return padded.sort_values(["launch", "file", "line"], ignore_index=True)


def parse_lines(report: str | Path) -> pd.DataFrame:
    """The per-line table (with SASS and context lines) of every launch in ``report``, parsed with ``ncu_report``."""
    parts = []
    for k, action in enumerate(actions_of(report)):
        pcs = pc_table(action, k)
        if not pcs.empty:
            parts.append(with_context(lines_from_pcs(pcs, with_sass=True), source_texts(action)))
    if not parts:
        return pd.DataFrame(columns=[*KEYS, "source", "pcs", "inst_executed", "samples", "sass"])
    return pd.concat(parts, ignore_index=True)


def lines_path(report: str | Path) -> Path:
    """Where the parsed table of ``report`` is kept: ``<stem>.lines.csv`` beside it."""
    report = Path(report)
    return report.with_name(report.stem + LINES_SUFFIX)


def write_lines(report: str | Path) -> Path:
    """Parse ``report`` and write its table beside it, headed by the report's SHA-256."""
    table = parse_lines(report)
    path = lines_path(report)
    atomic_write_text(path, f"# report_sha256={file_digest(packing.readable(report))[1]}\n" + table.to_csv(index=False))
    return path


def _stored(report: Path) -> str | None:
    """The body of ``report``'s ``.lines.csv`` when it was parsed from this very report, else None."""
    path = lines_path(report)
    if not path.is_file():
        return None
    head, _, body = path.read_text().partition("\n")
    return body if head == f"# report_sha256={cached_digest(packing.readable(report))[1]}" else None


def ensure_lines(report: str | Path) -> Path:
    """Write ``report``'s ``.lines.csv`` unless an up-to-date one is there (live profiling calls this)."""
    return lines_path(report) if _stored(Path(report)) is not None else write_lines(report)


def read_lines(report: str | Path) -> pd.DataFrame:
    """The per-line table of ``report``: from its ``.lines.csv`` when that matches the report, else parsed.

    Raises
    ------
    ImportError
        When the table must be parsed and no ``ncu_report`` module is available.
    """
    body = _stored(Path(report))
    if body is None:
        return parse_lines(report)
    table = pd.read_csv(io.StringIO(body), keep_default_na=False, na_values=[], dtype=str)
    return _typed(table, lines_path(report))


TEXT_COLUMNS = ("kernel", "file", "source", "sass")
"""The line table's text columns; every other column is a count."""
INTEGER_COLUMNS = ("launch", "line", "pcs")


def _typed(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``table`` (read as text) with its counts as numbers; a value that is not one is a damaged table (ValueError
    naming the file, column and value), never text passed on to the HTML views."""
    for column in table.columns:
        if column in TEXT_COLUMNS:
            continue
        values = pd.to_numeric(table[column], errors="coerce")
        wrong = values.isna() | ((values != values.round()) if column in INTEGER_COLUMNS else False)
        if wrong.any():
            bad = table.loc[wrong, column].iloc[0]
            raise ValueError(
                f"{shown_path(path)} is damaged: its column {column!r} holds {bad[:40]!r}, not "
                f"{'an integer' if column in INTEGER_COLUMNS else 'a number'}; delete it to parse the report again"
            )
        table[column] = values.astype("int64") if column in INTEGER_COLUMNS else values.astype(float)
    return table


def stall_columns(table: pd.DataFrame) -> list[str]:
    """The ``stall_<reason>`` columns of a line table, the issuing state left out."""
    return [c for c in table.columns if c.startswith("stall_") and c != f"stall_{ISSUED}"]


def top_reasons(row: pd.Series, columns: Iterable[str], count: int = 3) -> str:
    """``"long_scoreboard 61%, wait 12%"``: the line's largest stall reasons as shares of its samples."""
    total = float(row.get("samples", 0.0)) or sum(float(row[c]) for c in columns)
    ranked = sorted(((float(row[c]), c[len("stall_") :]) for c in columns), reverse=True)
    shown = [f"{name} {100 * value / total:.0f}%" for value, name in ranked[:count] if value > 0 and total > 0]
    return ", ".join(shown)


def top_lines(table: pd.DataFrame, by: str = "samples", count: int = 10) -> pd.DataFrame:
    """The ``count`` lines with most ``by`` (stall samples by default), each with its share and top stall reasons."""
    if by not in table:
        raise ValueError(f"by={by!r} is not a column of the line table; it has {', '.join(table.columns)}")
    total = float(table[by].sum())
    ranked = table.sort_values(by, ascending=False).head(count).copy()
    ranked[f"pct_{by}"] = 100.0 * ranked[by] / total if total > 0 else math.nan
    ranked["top_stalls"] = [top_reasons(row, stall_columns(table)) for _, row in ranked.iterrows()]
    columns = ["file", "line", "source", f"pct_{by}", "inst_executed", "samples", "top_stalls"]
    extra = [c for c in ("l2_excess_sectors", "shared_excess_wavefronts") if c in ranked]
    return ranked[[c for c in (*columns, *extra) if c in ranked]].reset_index(drop=True)


def hottest_file(table: pd.DataFrame, by: str = "samples") -> str:
    """The source file with most ``by`` (the kernel's own header, usually)."""
    known = table[table["file"] != ""]
    if known.empty:
        raise ValueError("no line of this launch has line information: build the kernel with -lineinfo")
    return str(known.groupby("file")[by].sum().idxmax())


HEAT_COLOR = "#d9480f"
LIBRARIES = ("cutlass", "cuda")
"""Header libraries named by the folder their ``include/`` sits in on the recording machine."""


def shown_file(path: str) -> str:
    """A recorded source path without the recording machine's folders: relative to its library's root, e.g.
    ``.../cutlass_library/source/include/cute/arch/copy_sm90.hpp`` -> ``cutlass/include/cute/arch/copy_sm90.hpp``,
    ``/work/main/include/oasr/norm.cuh`` -> ``include/oasr/norm.cuh`` (this repository's), ``/usr/local/cuda/...
    /include/cuda_fp16.hpp`` -> ``cuda/include/cuda_fp16.hpp``; a path with no ``include/`` keeps its name only."""
    head, sep, tail = str(path).replace("\\", "/").rpartition("/include/")
    if not sep:
        return str(path).rsplit("/", 1)[-1]
    if tail.startswith("oasr/"):
        return f"include/{tail}"
    library = next((name for name in LIBRARIES if name in head.lower()), head.rstrip("/").rsplit("/", 1)[-1])
    return f"{library}/include/{tail}"


def annotated_source_html(table: pd.DataFrame, file: str | None = None, by: str = "samples") -> str:
    """``file``'s lines in the table (counted lines and their context) with a heat bar per line.

    Every text that comes from the report (file name, source) is HTML-escaped, and every count is formatted as
    the number it must be (a line number that is not one raises ValueError).
    """
    file = file or hottest_file(table, by)
    rows = table[table["file"] == file].sort_values("line")
    if rows.empty:
        raise ValueError(f"no line of {file!r} in this table; files: {', '.join(sorted(set(table['file'])))}")
    peak = float(rows[by].max()) or 1.0
    body = []
    previous = None
    for number, value, pcs, text in rows[["line", by, "pcs", "source"]].itertuples(index=False, name=None):
        number, value = int(number), float(value)  # counts are numbers (read_lines refuses others), never markup
        if previous is not None and number > previous + 1:
            body.append("<tr><td colspan=4 style='color:#888'>&#8942;</td></tr>")
        previous = number
        bar = f"<div style='background:{HEAT_COLOR};height:.8em;width:{100.0 * value / peak:.1f}%'></div>"
        shown = f"{value:,.0f}" if float(pcs) else ""
        body.append(
            f"<tr><td style='text-align:right;color:#888'>{number}</td><td style='width:8em'>{bar}</td>"
            f"<td style='text-align:right'>{shown}</td>"
            f"<td style='text-align:left;white-space:pre;font-family:monospace'>{html.escape(str(text))}</td></tr>"
        )
    caption = html.escape(f"{shown_file(file)}: {by} per line (bar: share of the hottest line)")
    head = f"<tr><th>line</th><th>heat</th><th>{html.escape(by)}</th><th>source</th></tr>"
    table_style = "border-collapse:collapse;font-size:90%"
    return f"<table style='{table_style}'><caption>{caption}</caption>{head}{''.join(body)}</table>"


def result_lines(launches: pd.DataFrame, report_paths: Iterable[Path]) -> pd.DataFrame:
    """The line tables of a sweep's launches (a :class:`~profiling.nsight.sweep.ProfileResult`'s
    ``launches`` and ``report_paths``), each row tagged with its ``profile``, launch numbers as in ``launches``."""
    by_name = {Path(p).stem: Path(p) for p in report_paths}
    parts = []
    for profile, group in launches.groupby("profile", sort=False):
        table = read_lines(by_name[profile])
        parts.append(table[table["launch"].isin(group["launch"])].assign(profile=profile))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*KEYS, "profile"])
