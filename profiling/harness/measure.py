"""Timing an op against its baselines: one result schema for benchmarks, notebooks and the panel.

:func:`measure` times every backend of an op on each config and dtype (CUDA-graph
replay over rotated input sets, backends timed in turn: :mod:`profiling.harness.timing`),
optionally checks each against the float64 reference after the timing, and returns
one row per (config, dtype, backend) with the columns of :data:`RESULT_COLUMNS`.
All quantities are in base units (seconds, bytes, bytes/s, FLOP); a column's name
carries its unit. Rows of ops with other config fields differ only in those columns,
which follow ``config``.

====================  =========================================================
column                meaning
====================  =========================================================
op, family            the op and its library family
backend               ``oasr`` or a baseline (``torch``)
config                the op's size fields as text, ``b=16,t=1500,c=1024``
<fields>              each size field as its own integer column
dtype                 ``float32``, ``float16`` or ``bfloat16``
bytes, flop           the op's work model: minimum DRAM bytes moved, FLOP
seconds               median time per launch (device time: CUDA-graph replay, no launch gaps)
eager_seconds         host wall time per eager call, back to back, one synchronize at the end
                      (Python, checks and launch included: :func:`~profiling.harness.timing.eager_seconds`)
p10_seconds,
p90_seconds,
std_seconds           10th/90th percentile and standard deviation of the samples
iqr_rel               interquartile range / median
noisy                 ``iqr_rel`` above :data:`~profiling.harness.timing.NOISY_IQR_REL`
samples, method,
launches_per_sample,
input_sets            how it was timed (see :class:`~profiling.harness.timing.TimingResult`)
bandwidth_bytes_per_s bytes / seconds
flop_per_s            flop / seconds
speedup_vs_torch      torch's seconds / this backend's (NaN without a torch row)
copy_bytes_per_s      device-to-device copy bandwidth measured in the same process
pct_of_copy           100 x bandwidth / copy bandwidth
refcheck              ``pass``/``fail`` against the float64 reference, ``""`` when not checked
max_abs_err           largest finite |result - reference| (NaN when not checked)
====================  =========================================================
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd
import torch

from . import timing
from .correctness import refcheck
from .ops import Config, OpSpec, dtype_name, parse_dtype

RESULT_COLUMNS: tuple[str, ...] = (
    "op", "family", "backend", "config", "dtype", "bytes", "flop", "seconds", "eager_seconds", "p10_seconds",
    "p90_seconds", "std_seconds", "iqr_rel", "noisy", "samples", "method", "launches_per_sample", "input_sets",
    "bandwidth_bytes_per_s", "flop_per_s", "speedup_vs_torch", "copy_bytes_per_s", "pct_of_copy", "refcheck",
    "max_abs_err",
)  # fmt: skip
"""Columns of a result table; the op's size fields come right after ``config``."""


def columns_for(op: OpSpec) -> list[str]:
    """:data:`RESULT_COLUMNS` with ``op``'s size fields after ``config``."""
    at = RESULT_COLUMNS.index("config") + 1
    return [*RESULT_COLUMNS[:at], *op.config_fields, *RESULT_COLUMNS[at:]]


def measure(
    op: OpSpec,
    configs: Iterable[Config],
    dtypes: Sequence[str | torch.dtype],
    backends: Sequence[str] | None = None,
    *,
    rounds: int = 3,
    warmup: int = 5,
    iters: int = 30,
    method: timing.Method = "graph",
    check: bool = False,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> pd.DataFrame:
    """Time ``backends`` (default: all of the op's) on every config x dtype; one row each.

    Parameters
    ----------
    op : OpSpec
        The op (:mod:`profiling.harness.ops`).
    configs, dtypes
        Every config runs in every dtype.
    backends : sequence of str, optional
        Backend names of ``op.backends``; ``torch`` gives the speedup column.
    rounds, warmup, iters, method
        As :func:`profiling.harness.timing.time_interleaved` (``iters`` samples per backend in all).
    check : bool
        Compare each backend with the float64 reference after the timing (right after
        the float64 check of a 1 GiB case, the next timed launches ran 7-12% slow on the
        H200, so timing comes first).
    on_rows : callable, optional
        Called with each config x dtype's rows as soon as they are measured.

    Returns
    -------
    pandas.DataFrame
        Columns :func:`columns_for` ``(op)``.
    """
    backends = list(backends or op.backends)
    unknown = [b for b in backends if b not in op.backends]
    if unknown:
        raise ValueError(f"op {op.name!r} has no backend {', '.join(unknown)}; it has {', '.join(op.backends)}")
    copy_bytes_per_s = timing.measure_copy_bandwidth() * 1e12
    rows: list[dict[str, Any]] = []
    for config in configs:
        for dtype in map(parse_dtype, dtypes):
            sets = timing.op_input_sets(op, config, dtype)
            fns = {b: [functools.partial(op.backends[b], inputs) for inputs in sets] for b in backends}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", timing.NoisyTimingWarning)  # the `noisy` column says it
                results = timing.time_interleaved(fns, rounds=rounds, warmup=warmup, iters=iters, method=method)
            eager = {b: timing.eager_seconds(fns[b]) for b in backends}
            checks = refcheck(op, sets[0], backends, dtype) if check else {}
            batch = [
                _row(op, config, dtype, backend, result, results, copy_bytes_per_s, checks.get(backend))
                | {"eager_seconds": eager[backend]}
                for backend, result in results.items()
            ]
            del sets, fns
            torch.cuda.empty_cache()
            rows += batch
            if on_rows is not None:
                on_rows(batch)
    return pd.DataFrame(rows, columns=columns_for(op))


def _row(
    op: OpSpec,
    config: Config,
    dtype: torch.dtype,
    backend: str,
    result: timing.TimingResult,
    results: dict[str, timing.TimingResult],
    copy_bytes_per_s: float,
    check: dict[str, Any] | None,
) -> dict[str, Any]:
    work = op.work(config, dtype)
    seconds = result.median_ms * 1e-3
    bandwidth = work.bytes / seconds
    return {
        "op": op.name,
        "family": op.family.name,
        "backend": backend,
        "config": op.config_label(config),
        **{k: int(config[k]) for k in op.config_fields},
        "dtype": dtype_name(dtype),
        "bytes": work.bytes,
        "flop": work.total_flops,
        "seconds": seconds,
        "p10_seconds": result.p10_ms * 1e-3,
        "p90_seconds": result.p90_ms * 1e-3,
        "std_seconds": result.std_ms * 1e-3,
        "iqr_rel": result.iqr_rel,
        "noisy": result.noisy,
        "samples": len(result.samples_ms),
        "method": result.method,
        "launches_per_sample": result.launches_per_sample,
        "input_sets": result.input_sets,
        "bandwidth_bytes_per_s": bandwidth,
        "flop_per_s": work.total_flops / seconds,
        "speedup_vs_torch": results["torch"].median_ms / result.median_ms if "torch" in results else math.nan,
        "copy_bytes_per_s": copy_bytes_per_s,
        "pct_of_copy": 100 * bandwidth / copy_bytes_per_s,
        "refcheck": "" if check is None else ("pass" if check["passed"] else "fail"),
        "max_abs_err": math.nan if check is None else check["max_abs_err"],
    }
