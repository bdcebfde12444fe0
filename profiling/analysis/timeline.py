"""A region's kernel timeline from a torch.profiler (CUPTI) trace: its kernels, and the idle gaps between them.

Nsight Systems cannot make a report on the lent H200, but torch.profiler's CUPTI tracing works
there. :func:`record` runs one eager call of a region (after warm-up calls) under
``torch.profiler`` inside a ``record_function`` range and saves the Chrome trace
(``export_chrome_trace``); :func:`summarize` reads the kernel events (``"cat": "kernel"``)
back from that JSON, so a saved trace is analysed again on a machine without a GPU.

The idle gaps: the kernels' intervals are merged (kernels overlapping on several streams count
once, never as a negative gap), and the time inside the span from the first kernel's start to
the last one's end that no kernel covers is the gap time. Against the region's time (the
range's wall time, which ends after a synchronize, so it holds the GPU's whole work; the span
when the trace has no range) it is the launch-bound share that a CUDA graph of the region
removes. Only kernels count as busy: a copy or memset inside the region (``gpu_memcpy``,
``gpu_memset`` events) counts as gap, as the host time around it does.
"""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..files import atomic_write_text
from ..harness.timing import require_cuda

KERNEL_COLUMNS = ("name", "device", "stream", "start_s", "duration_s", "end_s")
"""Columns of :attr:`Timeline.kernels` (times relative to the first kernel's start)."""
REGION = "oasr.region"
"""The ``record_function`` range :func:`record` puts the region's call in."""


class NoKernelsError(ValueError):
    """A trace holds no kernel events (a CPU-only trace: torch.profiler records kernels only on a CUDA GPU)."""


@dataclass(frozen=True)
class Timeline:
    """The kernels of one traced call and their idle gaps (seconds).

    Attributes
    ----------
    kernels : DataFrame
        One row per kernel, :data:`KERNEL_COLUMNS`, in start order.
    gaps : DataFrame
        The idle gaps between them (:func:`idle_gaps`).
    span_s : float
        First kernel's start to the last one's end.
    region_s : float
        The region's time: the wall time of its ``record_function`` range, else ``span_s``.
    source : str
        Where the trace came from (its file, or ``"a trace dict"``).
    """

    kernels: pd.DataFrame
    gaps: pd.DataFrame
    span_s: float
    region_s: float
    source: str

    @property
    def gap_s(self) -> float:
        """Idle time between the kernels (inside the span, no kernel running on any stream)."""
        return float(self.gaps["duration_s"].sum())

    @property
    def busy_s(self) -> float:
        """Time covered by at least one kernel (the union of their intervals)."""
        return self.span_s - self.gap_s

    @property
    def gap_share(self) -> float:
        """:attr:`gap_s` over :attr:`region_s`: the share a CUDA graph of the region could remove."""
        return self.gap_s / self.region_s if self.region_s > 0 else math.nan

    def summary(self) -> pd.DataFrame:
        """One row: kernel count, streams, the sum of kernel times, busy, gap and region times, the gap share (%)."""
        return pd.DataFrame(
            [
                {
                    "kernels": len(self.kernels),
                    "streams": self.kernels["stream"].nunique(),
                    "kernel_sum_seconds": float(self.kernels["duration_s"].sum()),
                    "busy_seconds": self.busy_s,
                    "gap_seconds": self.gap_s,
                    "region_seconds": self.region_s,
                    "gap_pct": 100 * self.gap_share,
                }
            ]
        )


def record(fn: Callable[[], object], path: str | Path, *, name: str = REGION, warmup: int = 2) -> Path:
    """Trace one eager call of ``fn`` (after ``warmup`` untraced calls) and save the Chrome trace at ``path``.

    Parameters
    ----------
    fn : callable
        The region: a zero-argument callable launching its kernels on the GPU.
    path : str or Path
        Where the trace goes (``.json``, or ``.json.gz`` compressed).
    name : str
        The ``record_function`` range around the traced call.
    warmup : int
        Calls before the traced one (JIT builds, cuBLAS handles, the caching allocator).

    Raises
    ------
    profiling.harness.timing.NoGPUError
        Without CUDA: torch.profiler on a CPU records no kernels, so there is no timeline to take.
    TypeError
        When ``fn`` is not callable.
    ValueError
        When ``warmup`` is negative.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable, not {type(fn).__name__}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, not {warmup}")
    require_cuda("a kernel timeline (torch.profiler on a CPU records no kernels)")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler, torch.profiler.record_function(name):
        fn()
        torch.cuda.synchronize()  # inside the range: its wall time holds the GPU's whole work
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="oasr-trace-") as folder:  # torch writes the file itself
        exported = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(exported))
        text = exported.read_text()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        atomic_write_text(path, text)
    return path


def load(trace: str | Path | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """A Chrome trace (a dict, or a ``.json``/``.json.gz`` file) and a name for it in messages.

    Raises
    ------
    TypeError
        When ``trace`` is neither a mapping nor a path.
    ValueError
        When the file is not JSON or holds no ``traceEvents`` list.
    """
    if isinstance(trace, Mapping):
        data, source = trace, "a trace dict"
    elif isinstance(trace, (str, Path)):
        path = Path(trace)
        raw = path.read_bytes()
        try:
            data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{path} is not a Chrome trace ({type(exc).__name__}: {str(exc)[:120]})") from None
        source = str(path)
    else:
        raise TypeError(f"trace must be a trace dict or a path, not {type(trace).__name__}")
    if not isinstance(data, Mapping) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{source} is not a Chrome trace: it has no 'traceEvents' list")
    return data, source


def _kernels(data: Mapping[str, Any], source: str) -> pd.DataFrame:
    """The trace's kernel events (``"cat": "kernel"``), :data:`KERNEL_COLUMNS`, in start order; NoKernelsError
    (naming ``source``) when it holds none, as a CPU-only trace never does."""
    rows = [
        {
            "name": str(event.get("name", "?")),
            "device": event.get("args", {}).get("device", event.get("pid")),
            "stream": event.get("args", {}).get("stream", event.get("tid")),
            "start_us": float(event["ts"]),
            "duration_us": float(event.get("dur", 0.0)),
        }
        for event in data["traceEvents"]
        if isinstance(event, Mapping) and event.get("cat") == "kernel" and "ts" in event
    ]
    if not rows:
        raise NoKernelsError(
            f"{source} holds no kernel events: torch.profiler records kernels only with CUDA activity on a GPU "
            "(a trace taken on a CPU has none). Trace the region on a GPU machine, or load a trace saved there."
        )
    df = pd.DataFrame(rows).sort_values("start_us", kind="stable", ignore_index=True)
    origin = df["start_us"].iloc[0]
    df["start_s"] = (df["start_us"] - origin) * 1e-6  # Chrome traces are in microseconds
    df["duration_s"] = df["duration_us"] * 1e-6
    df["end_s"] = df["start_s"] + df["duration_s"]
    return df[list(KERNEL_COLUMNS)]


def idle_gaps(kernels: pd.DataFrame) -> pd.DataFrame:
    """The intervals inside the kernels' span when no kernel runs on any stream (``start_s``, ``duration_s``).

    The kernels' intervals are merged first (``kernels`` in start order): a kernel overlapping another on a
    second stream leaves no gap, and never a negative one.
    """
    reach = np.maximum.accumulate(kernels["end_s"].to_numpy())  # the merged intervals' end so far
    starts = kernels["start_s"].to_numpy()[1:]
    idle = starts > reach[:-1]
    return pd.DataFrame({"start_s": reach[:-1][idle], "duration_s": (starts - reach[:-1])[idle]})


def _range_seconds(data: Mapping[str, Any], name: str) -> float:
    """The wall time of the CPU range ``name`` (the first such ``user_annotation``), NaN when absent."""
    for event in data["traceEvents"]:
        if isinstance(event, Mapping) and event.get("cat") == "user_annotation" and event.get("name") == name:
            return float(event.get("dur", np.nan)) * 1e-6
    return math.nan


def summarize(trace: str | Path | Mapping[str, Any], *, name: str = REGION) -> Timeline:
    """The :class:`Timeline` of a saved trace (a file, or its dict): kernels, busy and gap times, the region's.

    Raises
    ------
    NoKernelsError
        When the trace holds no kernel events.
    """
    data, source = load(trace)
    kernels = _kernels(data, source)
    span = float(kernels["end_s"].max())
    region = _range_seconds(data, name)
    if not (math.isfinite(region) and region >= span):  # a range ending before its kernels (no synchronize in it)
        region = span  # does not hold the region's time; the kernels' span does
    gaps = idle_gaps(kernels)
    return Timeline(kernels=kernels, gaps=gaps, span_s=span, region_s=region, source=source)
