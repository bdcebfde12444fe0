"""What the benchmark CLI prints and writes: ``[PERF]`` lines, the CSV (written as rows arrive), a plot.

A CSV row is one row of :func:`profiling.harness.measure.measure` (the harness's one
result schema, base units) plus the provenance of the process that measured it;
``benchmarks/README.md`` documents every column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from profiling.harness.measure import RESULT_COLUMNS
from profiling.harness.timing import NOISY_IQR_REL
from profiling.provenance import collect

PROVENANCE_COLUMNS: tuple[str, ...] = (
    "date", "git_commit", "oasr_version", "torch_version", "cuda_runtime", "nvcc", "gpu", "gpu_slug",
    "compute_capability", "driver",
)  # fmt: skip
SHAPE_COLUMN = "shape"
"""The op's size fields as ``[16,1500,1024]``, next to ``config`` (which names them)."""
CSV_COLUMNS: tuple[str, ...] = (*RESULT_COLUMNS, SHAPE_COLUMN, *PROVENANCE_COLUMNS)
TEXT_COLUMNS: tuple[str, ...] = ("op", "family", "backend", "config", "dtype", "method", "refcheck", SHAPE_COLUMN)


def perf_line(row: Mapping[str, Any], verbose: int = 0) -> str:
    """``[PERF] family/op backend dtype shape time rate speedup % of copy ref`` for people."""
    parts = [f"[PERF] {row['family']}/{row['op']:<10} {row['backend']:<6} {row['dtype']:<9} {row['config']:<22}"]
    parts.append(f"{1e6 * row['seconds']:10.2f} us")
    parts.append(f"IQR {100 * row['iqr_rel']:4.1f}%")
    parts.append(f"{row['bandwidth_bytes_per_s'] / 1e12:7.3f} TB/s")
    if row["flop"] and row["flop"] / max(row["bytes"], 1) > 4:  # compute-heavy: the rate people look at
        parts.append(f"{row['flop_per_s'] / 1e12:8.2f} TFLOP/s")
    if not math.isnan(row["speedup_vs_torch"]):
        parts.append(f"{row['speedup_vs_torch']:5.2f}x torch")
    parts.append(f"{row['pct_of_copy']:5.1f}% of copy")
    if row["refcheck"]:
        parts.append(f"ref {row['refcheck']}")
    if verbose >= 1:
        parts.append(
            f"p10 {1e6 * row['p10_seconds']:.2f} p90 {1e6 * row['p90_seconds']:.2f} "
            f"std {1e6 * row['std_seconds']:.2f} us"
        )
    if verbose >= 2:
        how = f"{row['method']} x{row['launches_per_sample']}, {row['input_sets']} sets"
        parts.append(f"{row['samples']} samples, {how}")
    if row["noisy"]:
        parts.append("NOISY")
    return "  ".join(parts)


class OutputWriter:
    """Prints a ``[PERF]`` line per result and appends it to the CSV at once (a stopped run keeps its rows)."""

    def __init__(self, output_path: str | Path | None = None, verbose: int = 0) -> None:
        self.output_path = Path(output_path) if output_path else None
        self.verbose = verbose
        self.rows: list[dict[str, Any]] = []
        self.errors = 0
        self._stream: IO[str] | None = None
        self._writer: csv.DictWriter | None = None
        self._provenance: dict[str, Any] = {}

    def write_header(self, title: str) -> None:
        print(f"\n=== {title} ===")

    def info(self, message: str) -> None:
        print(f"[INFO] {message}")

    def error(self, message: str) -> None:
        """Report a failure (e.g. a reference mismatch); the CLI then exits non-zero."""
        self.errors += 1
        print(f"[ERROR] {message}")

    def write_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            row = dict(row)
            self.rows.append(row)
            print(perf_line(row, self.verbose), flush=True)
            self._append_csv(row)

    def _append_csv(self, row: dict[str, Any]) -> None:
        if self.output_path is None:
            return
        if self._writer is None:
            self.output_path.parent.mkdir(parents=True, exist_ok=True)
            self._stream = self.output_path.open("w", newline="")
            self._writer = csv.DictWriter(self._stream, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            self._writer.writeheader()
            self._provenance = {key: collect().get(key, "") for key in PROVENANCE_COLUMNS}
        shape = "[" + ",".join(part.split("=", 1)[1] for part in row["config"].split(",")) + "]"
        cells = {k: "" if _missing(v) else v for k, v in row.items()}
        self._writer.writerow({**cells, SHAPE_COLUMN: shape, **self._provenance})
        assert self._stream is not None
        self._stream.flush()

    def finalize(self) -> pd.DataFrame:
        """Close the CSV, warn about noisy results, and return every row as a DataFrame."""
        noisy = sum(bool(r["noisy"]) for r in self.rows)
        if noisy:
            print(
                f"[WARNING] {noisy} result(s) have an IQR above {NOISY_IQR_REL:.0%} of the median; "
                "use more --num_iters or an idle GPU"
            )
        if self._stream is not None:
            self._stream.close()
            print(f"[INFO] wrote {len(self.rows)} rows to {self.output_path}")
        return pd.DataFrame(self.rows)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a benchmark CSV back: one row per result; empty cells are NaN (numbers) or "" (text).

    Raises
    ------
    ValueError
        The file lacks columns of :data:`CSV_COLUMNS` (the op's size-field columns vary and are not required).
    """
    frame = pd.read_csv(path, dtype=dict.fromkeys((*TEXT_COLUMNS, *PROVENANCE_COLUMNS), str))
    missing = [c for c in CSV_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} is not a benchmark CSV: missing columns {', '.join(missing)}")
    text = [c for c in (*TEXT_COLUMNS, *PROVENANCE_COLUMNS) if c in frame]
    frame[text] = frame[text].fillna("")
    frame["noisy"] = frame["noisy"].map({True: True, False: False, "True": True, "False": False})
    return frame


def plot_results(frame: pd.DataFrame, path: str | Path) -> None:
    """Save a PNG of bandwidth against bytes moved: one panel per (op, dtype), one line per backend.

    The copy bandwidth measured in the same run is drawn as a dashed line.
    """
    from matplotlib.figure import Figure  # the CLI imports matplotlib only when asked for a plot

    groups: Sequence = list(frame.groupby(["family", "op", "dtype"], sort=False))
    if not groups:
        raise ValueError("no results to plot")
    figure = Figure(figsize=(7, 4.5 * len(groups)), layout="constrained")
    panels = figure.subplots(len(groups), 1, squeeze=False)[:, 0]
    for axes, ((family, op, dtype), group) in zip(panels, groups, strict=True):
        for backend, rows in group.groupby("backend", sort=False):
            rows = rows.sort_values("bytes")
            axes.plot(rows["bytes"], rows["bandwidth_bytes_per_s"] / 1e12, marker="o", label=backend)
        copy = group["copy_bytes_per_s"].dropna()
        if not copy.empty:
            axes.axhline(copy.iloc[0] / 1e12, linestyle="--", color="gray", label="copy bandwidth (measured)")
        axes.set(xscale="log", xlabel="bytes moved", ylabel="TB/s", title=f"{family}/{op} {dtype}")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    figure.savefig(path, dpi=110)
