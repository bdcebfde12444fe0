"""Helpers every benchmark routine uses: timing, checks, rates, result rows, CSV and plots.

Timing is :func:`profiling.timing.time_fn` (the implementation the notebooks and
the profiler use too); :func:`bench_fn` only maps the CLI's flags onto it, and
:func:`bench_backends` times the backends of one config in turn
(:func:`profiling.timing.time_interleaved`). The
CSV schema (:data:`CSV_COLUMNS`) is documented in ``benchmarks/README.md``.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from profiling.nvtx_ranges import RangeName, nvtx_range
from profiling.ops import dtype_name, parse_dtype
from profiling.ops.base import DEFAULT_TOLERANCES
from profiling.provenance import collect
from profiling.timing import (
    NOISY_IQR_REL,
    NoGPUError,
    NoisyTimingWarning,
    TimingResult,
    measure_copy_bandwidth,
    measure_cublas_tflops,
    time_interleaved,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CSV_COLUMNS",
    "PROVENANCE_COLUMNS",
    "BenchResult",
    "Ceiling",
    "OutputWriter",
    "bench_backends",
    "bench_fn",
    "check_close",
    "compute_bandwidth_tb_s",
    "compute_gemm_tflops",
    "dtype_size",
    "gemm_ceiling",
    "memory_ceiling",
    "parse_dtype",
    "plot_results",
    "profile_kernel",
    "read_results",
    "results_frame",
    "run_main",
    "write_csv",
]


def dtype_size(dtype: str | torch.dtype) -> int:
    """Bytes per element: ``dtype_size("float16") == 2``."""
    return parse_dtype(dtype).itemsize


def compute_bandwidth_tb_s(bytes_accessed: int, time_ms: float) -> float:
    """Achieved bandwidth in TB/s (10^12 bytes per second)."""
    return bytes_accessed / (time_ms * 1e-3) / 1e12


def compute_gemm_tflops(m: int, n: int, k: int, time_ms: float) -> float:
    """TFLOP/s of an ``m`` x ``n`` x ``k`` GEMM (2 m n k FLOP)."""
    return 2 * m * n * k / (time_ms * 1e-3) / 1e12


def check_close(
    actual: torch.Tensor, expected: torch.Tensor, *, rtol: float | None = None, atol: float | None = None
) -> tuple[bool, float]:
    """Compare in float64; tolerances default to ``profiling.ops.base.DEFAULT_TOLERANCES`` of ``actual``'s dtype.

    Returns
    -------
    tuple[bool, float]
        ``(passed, max_abs_diff)``; NaN matches NaN, and the difference ignores non-finite entries.
    """
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(dtype_name(actual.dtype), (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a, e = actual.double(), expected.double().to(actual.device)
    passed = bool(torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True).all())
    diff = (a - e).abs()
    diff = diff[diff.isfinite()]
    return passed, float(diff.max()) if diff.numel() else 0.0


def bench_fn(
    fns: Callable[[], object] | Sequence[Callable[[], object]],
    *,
    dry_run_iters: int = 5,
    num_iters: int = 30,
    use_cuda_events: bool = False,
) -> TimingResult:
    """Time ``fns`` with :func:`profiling.timing.time_fn`: CUDA graphs, or per-launch events.

    The result unpacks as ``median_ms, std_ms``. Noise is reported in the result
    line (``NOISY``) rather than as a Python warning. One backend, one round of
    :func:`bench_backends`.
    """
    timings = bench_backends(
        {"fns": fns}, rounds=1, dry_run_iters=dry_run_iters, num_iters=num_iters, use_cuda_events=use_cuda_events
    )
    return timings["fns"]


def bench_backends(
    fns: dict[str, Callable[[], object] | Sequence[Callable[[], object]]],
    *,
    rounds: int = 3,
    dry_run_iters: int = 5,
    num_iters: int = 30,
    use_cuda_events: bool = False,
) -> dict[str, TimingResult]:
    """Time each backend's ``fns`` in turn, ``rounds`` times (``num_iters`` samples each in all).

    Interleaving keeps the GPU's drift within a run (clocks, the reference check just
    before) out of the comparison; see :func:`profiling.timing.time_interleaved`.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyTimingWarning)
        return time_interleaved(
            fns,
            rounds=rounds,
            warmup=dry_run_iters,
            iters=num_iters,
            method="events" if use_cuda_events else "graph",
        )


@dataclass(frozen=True)
class Ceiling:
    """A rate measured on this GPU in this run, that results are expressed as a percentage of."""

    name: str  # "copy_bandwidth" (TB/s) or "cublas_<dtype>" (TFLOP/s)
    value: float

    def __str__(self) -> str:
        unit = "TB/s" if self.name == "copy_bandwidth" else "TFLOP/s"
        return f"{self.name} {self.value:.3f} {unit}"


def memory_ceiling() -> Ceiling:
    """Device-to-device copy bandwidth: the ceiling of memory-bound routines."""
    return Ceiling("copy_bandwidth", measure_copy_bandwidth())


def gemm_ceiling(dtype: str | torch.dtype = torch.bfloat16) -> Ceiling:
    """cuBLAS 8192^3 GEMM rate: the ceiling of GEMM-like routines."""
    dtype = parse_dtype(dtype)
    return Ceiling(f"cublas_{str(dtype).removeprefix('torch.')}", measure_cublas_tflops(dtype=dtype))


@dataclass
class BenchResult:
    """One CSV row: one backend at one configuration. Units are in the field names."""

    routine: str
    subroutine: str
    backend: str
    shape: str
    dtype: str
    median_ms: float
    std_ms: float
    bandwidth_tb_s: float | None = None
    tflops: float | None = None
    config: str = ""
    bytes_moved: int | None = None
    flops: int | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    iqr_rel: float | None = None
    samples: int | None = None
    noisy: bool | None = None
    method: str = ""
    launches_per_sample: int | None = None
    input_sets: int | None = None
    speedup_vs_torch: float | None = None
    ceiling: str = ""
    ceiling_value: float | None = None
    pct_of_ceiling: float | None = None
    refcheck: str = ""
    max_diff: float | None = None

    @classmethod
    def from_timing(cls, timing: TimingResult, **fields: Any) -> BenchResult:
        """A row whose timing columns come from ``timing``; ``fields`` give the rest."""
        return cls(
            median_ms=timing.median_ms,
            std_ms=timing.std_ms,
            p10_ms=timing.p10_ms,
            p90_ms=timing.p90_ms,
            iqr_rel=timing.iqr_rel,
            samples=len(timing.samples_ms),
            noisy=timing.noisy,
            method=timing.method,
            launches_per_sample=timing.launches_per_sample,
            input_sets=timing.input_sets,
            **fields,
        )

    def line(self, verbose: int = 0) -> str:
        """The terminal line: ``[PERF] routine/subroutine backend dtype shape time rate ...``."""
        parts = [f"[PERF] {self.routine}/{self.subroutine:<10} {self.backend:<6} {self.dtype:<9} {self.shape:<14}"]
        parts.append(f"{1e3 * self.median_ms:10.2f} us")
        if self.iqr_rel is not None:
            parts.append(f"IQR {100 * self.iqr_rel:4.1f}%")
        if self.bandwidth_tb_s is not None:
            parts.append(f"{self.bandwidth_tb_s:7.3f} TB/s")
        if self.tflops is not None:
            parts.append(f"{self.tflops:8.2f} TFLOP/s")
        if self.speedup_vs_torch is not None:
            parts.append(f"{self.speedup_vs_torch:5.2f}x torch")
        if self.pct_of_ceiling is not None:
            parts.append(f"{self.pct_of_ceiling:5.1f}% of {self.ceiling}")
        if self.refcheck:
            parts.append(f"ref {self.refcheck}")
        if verbose >= 1 and self.p10_ms is not None:
            parts.append(f"p10 {1e3 * self.p10_ms:.2f} p90 {1e3 * self.p90_ms:.2f} std {1e3 * self.std_ms:.2f} us")
        if verbose >= 2:
            parts.append(f"{self.samples} samples, {self.method} x{self.launches_per_sample}, {self.input_sets} sets")
        if self.noisy:
            parts.append("NOISY")
        return "  ".join(parts)


PROVENANCE_COLUMNS: tuple[str, ...] = (
    "date",
    "git_commit",
    "oasr_version",
    "torch_version",
    "cuda_runtime",
    "nvcc",
    "gpu",
    "gpu_slug",
    "compute_capability",
    "driver",
)
CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BenchResult)) + PROVENANCE_COLUMNS
TEXT_COLUMNS: tuple[str, ...] = (
    tuple(f.name for f in dataclasses.fields(BenchResult) if f.type == "str") + PROVENANCE_COLUMNS
)


class OutputWriter:
    """Prints one ``[PERF]`` line per result, keeps the results, and writes them as CSV on :meth:`finalize`."""

    def __init__(self, output_path: str | Path | None = None, verbose: int = 0) -> None:
        self.output_path = Path(output_path) if output_path else None
        self.verbose = verbose
        self.results: list[BenchResult] = []
        self.errors = 0

    def write_header(self, title: str) -> None:
        print(f"\n=== {title} ===")

    def info(self, message: str) -> None:
        print(f"[INFO] {message}")

    def error(self, message: str) -> None:
        """Report a failure (e.g. a reference mismatch); the CLI then exits non-zero."""
        self.errors += 1
        print(f"[ERROR] {message}")

    def write_result(self, result: BenchResult) -> None:
        self.results.append(result)
        print(result.line(self.verbose), flush=True)

    def finalize(self) -> list[BenchResult]:
        """Write the CSV (if a path was given), warn about noisy results, and return the results."""
        noisy = sum(bool(r.noisy) for r in self.results)
        if noisy:
            print(
                f"[WARNING] {noisy} result(s) have an IQR above {NOISY_IQR_REL:.0%} of the median; "
                "use more --num_iters or an idle GPU"
            )
        if self.output_path is not None:
            write_csv(self.results, self.output_path)
            print(f"[INFO] wrote {len(self.results)} rows to {self.output_path}")
        return self.results


def write_csv(results: Sequence[BenchResult], path: str | Path) -> None:
    """Write ``results`` with this process's provenance in every row (columns :data:`CSV_COLUMNS`)."""
    provenance = {key: collect().get(key, "") for key in PROVENANCE_COLUMNS}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for result in results:
            row = {k: "" if v is None else v for k, v in dataclasses.asdict(result).items()}
            writer.writerow(row | provenance)


def results_frame(results: Sequence[BenchResult]) -> pd.DataFrame:
    """The result columns of ``results`` as a DataFrame (no provenance)."""
    import pandas as pd

    return pd.DataFrame(
        [dataclasses.asdict(r) for r in results], columns=[f.name for f in dataclasses.fields(BenchResult)]
    )


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a benchmark CSV back: one row per result; empty cells are NaN (numbers) or "" (text).

    Raises
    ------
    ValueError
        The file lacks columns of :data:`CSV_COLUMNS`.
    """
    import pandas as pd

    frame = pd.read_csv(path, dtype=dict.fromkeys(TEXT_COLUMNS, str))
    missing = [c for c in CSV_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} is not a benchmark CSV: missing columns {', '.join(missing)}")
    frame[list(TEXT_COLUMNS)] = frame[list(TEXT_COLUMNS)].fillna("")
    frame["noisy"] = frame["noisy"].map({True: True, False: False, "True": True, "False": False})
    return frame


def plot_results(frame: pd.DataFrame, path: str | Path) -> None:
    """Save a PNG of bandwidth (or TFLOP/s) against bytes moved, one line per backend.

    One panel per (routine, subroutine, dtype); the measured ceiling, when the
    rows carry one, is drawn as a dashed line.
    """
    from matplotlib.figure import Figure

    groups = list(frame.groupby(["routine", "subroutine", "dtype"], sort=False))
    if not groups:
        raise ValueError("no results to plot")
    figure = Figure(figsize=(7, 4.5 * len(groups)), layout="constrained")
    panels = figure.subplots(len(groups), 1, squeeze=False)[:, 0]
    for axes, ((routine, subroutine, dtype), group) in zip(panels, groups, strict=True):
        rate, unit = ("bandwidth_tb_s", "TB/s") if group["bandwidth_tb_s"].notna().any() else ("tflops", "TFLOP/s")
        for backend, rows in group.groupby("backend", sort=False):
            rows = rows.sort_values("bytes_moved")
            axes.plot(rows["bytes_moved"], rows[rate], marker="o", label=backend)
        ceilings = group.dropna(subset=["ceiling_value"])
        if not ceilings.empty:
            axes.axhline(
                ceilings["ceiling_value"].iloc[0],
                linestyle="--",
                color="gray",
                label=f"{ceilings['ceiling'].iloc[0]} (measured)",
            )
        axes.set(xscale="log", xlabel="bytes moved", ylabel=unit, title=f"{routine}/{subroutine} {dtype}")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    figure.savefig(path, dpi=110)


def profile_kernel(name: RangeName, fn: Callable[[], object], *, warmup: int = 3, launches: int = 1) -> None:
    """Run ``fn`` for Nsight Compute: warm-up outside any range, then ``launches`` calls in NVTX range ``name``.

    Select the launches with ``ncu --nvtx --nvtx-include "<name.nvtx_filter()>"``.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with nvtx_range(str(name)):
        for _ in range(launches):
            fn()
        torch.cuda.synchronize()


def run_main(routine: str, subroutine: str, argv: Sequence[str] | None = None) -> int:
    """Standalone entry of a ``bench_*.py`` wrapper: the unified CLI with the routine fixed.

    ``argv`` (default ``sys.argv[1:]``) takes every flag of ``oasr_benchmark.py``
    except ``--routine``/``--subroutine``, e.g. ``--profile --target oasr``.
    Returns the exit code.
    """
    from benchmarks.oasr_benchmark import main

    rest = sys.argv[1:] if argv is None else list(argv)
    return main(["--routine", routine, "--subroutine", subroutine, *rest])


def run_gpu_script(main: Callable[[], int], script: str) -> NoReturn:
    """Exit with ``main()``'s code; without a GPU, with the one-line :class:`NoGPUError` message, not a traceback."""
    try:
        code = main()
    except NoGPUError as error:
        sys.exit(f"{Path(script).name}: {error}")
    sys.exit(code)
