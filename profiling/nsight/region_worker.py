"""The process ncu launches to profile a region: ``python -m profiling.nsight.region_worker <spec.json>``.

It speaks the sweep worker's events (:mod:`profiling.nsight.worker`: ``start``, ``ready``, one ``done``, ``end``,
``error``), so :func:`profiling.nsight.runner.run_sweep` watches it and classifies its failures as it does a sweep's.
The region's call is unpickled from the spec (it pickles by reference: :func:`profiling.nsight.region.portable_call`),
warmed up ``warmup`` times outside every range, then run once inside the range ``region:<name>`` of domain ``oasr``
under ``torch.autograd.profiler.emit_nvtx``, which names each torch op's range (``aten::addmm``); the runner sets
``OASR_NVTX=1``, which names each oasr op's (``oasr.gemm``). Then the call is timed ``repeats`` times outside the range
(CUDA events around each call, their median written to ``timing_path``): ncu still intercepts those launches without
profiling them, so this wall time is an upper bound of an eager call's.
"""

from __future__ import annotations

import base64
import json
import pickle
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from .naming import nvtx_range
from .region import RegionSpec, region_range
from .worker import EXIT_NO_GPU, EXIT_NO_NVTX, _fail, emit, serve


def _timed(call: object, repeats: int) -> float:
    """Median seconds of one call over ``repeats`` calls, each between two CUDA events."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()  # type: ignore[operator]
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def run(spec: RegionSpec) -> int:
    """Profile the region once; returns the process exit status."""
    try:
        import nvtx  # noqa: F401  (nvtx_range silently does nothing without it)
    except ImportError:
        return _fail(
            "no_nvtx",
            "the `nvtx` Python package is missing, so the region would carry no NVTX range and ncu would profile "
            "nothing. Install it (pip install 'nvtx>=0.2.10') in the Python that runs the worker.",
            EXIT_NO_NVTX,
        )
    if not torch.cuda.is_available():
        return _fail("no_gpu", "no CUDA GPU: torch.cuda.is_available() is False in the region worker.", EXIT_NO_GPU)
    call = pickle.loads(base64.b64decode(spec.call))
    emit("ready", region=spec.name, call=spec.label, device=torch.cuda.get_device_name())
    for _ in range(spec.warmup):
        call()
    torch.cuda.synchronize()
    with torch.autograd.profiler.emit_nvtx(), nvtx_range(region_range(spec.name)):
        call()
        torch.cuda.synchronize()
    wall_s = _timed(call, spec.repeats)
    Path(spec.timing_path).write_text(json.dumps({"region_wall_s": wall_s, "repeats": spec.repeats}))
    emit("done", index=1, total=1, config=spec.config, dtype=spec.dtype)
    emit("end", total=1)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return serve(argv, "profiling.nsight.region_worker", RegionSpec.from_json, run, lambda spec: (spec.name, 1))


if __name__ == "__main__":
    sys.exit(main())
