"""The profiling worker: the process that ``ncu`` launches to run one sweep.

``python -m profiling.nsight.worker <spec.json>`` builds the op's JIT module (a cache
hit after the first build), then for every config x dtype of the spec

1. makes the inputs (same seed for every backend),
2. warms up each backend ``warmup`` times, outside every NVTX range,
3. inside the range ``sweep`` (domain ``oasr``) runs each backend once, each
   inside its own :class:`~profiling.nsight.naming.RangeName` range,
4. synchronizes, frees the inputs and prints a progress event.

``ncu --nvtx --nvtx-include "oasr@sweep/"`` therefore profiles exactly one
launch per backend, config and dtype, and none of the warm-ups.

Progress events are single stdout lines, flushed at once, of the form
``@@oasr-worker {"event": ..., ...}`` (see :data:`EVENT_PREFIX`); the runner in
:mod:`profiling.nsight.runner` parses them to show progress and to know which configs
finished. Events: ``start`` (``pid``, ``total``; printed first, so the runner
can interrupt the worker alone), ``ready`` (``device``), ``built`` (``seconds``,
``cache_hit``), ``done`` (``index``, ``total``, ``config``, ``dtype``), ``end``,
and ``error`` (``kind``: ``no_nvtx``, ``no_gpu`` or ``exception``; ``message``).
The exit status is 0 after ``end`` and non-zero after ``error``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..harness.ops import get_op, parse_dtype
from .naming import SWEEP_RANGE, RangeName, nvtx_range

EVENT_PREFIX = "@@oasr-worker "
EXIT_NO_NVTX = 3
EXIT_NO_GPU = 4
EXIT_EXCEPTION = 1


@dataclass
class SweepSpec:
    """What one worker run profiles: the product ``configs x dtypes``, every backend each.

    ``device`` is ``"cuda"`` for profiling (``"cpu"`` runs the loop for tests,
    torch backend only).
    """

    op: str
    configs: list[dict[str, int]]
    dtypes: list[str] = field(default_factory=lambda: ["float16"])
    backends: list[str] = field(default_factory=lambda: ["oasr", "torch"])
    seed: int = 0
    warmup: int = 3
    device: str = "cuda"

    @property
    def cases(self) -> list[tuple[dict[str, int], str]]:
        """(config, dtype) pairs in the order the worker runs them."""
        return [(config, dtype) for config in self.configs for dtype in self.dtypes]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> SweepSpec:
        data = json.loads(text)
        data["configs"] = [{k: int(v) for k, v in c.items()} for c in data["configs"]]
        return cls(**data)


def emit(event: str, **fields: Any) -> None:
    """Print one progress event line on stdout, flushed."""
    print(EVENT_PREFIX + json.dumps({"event": event, **fields}), flush=True)


def parse_event(line: str) -> dict[str, Any] | None:
    """The event dict of a worker event line, or None for any other line."""
    start = line.find(EVENT_PREFIX)
    if start < 0:
        return None
    try:
        event = json.loads(line[start + len(EVENT_PREFIX) :])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def _fail(kind: str, message: str, status: int) -> int:
    print(f"profiling worker: {message}", file=sys.stderr, flush=True)
    emit("error", kind=kind, message=message)
    return status


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(spec: SweepSpec) -> int:
    """Run the sweep; returns the process exit status."""
    try:
        import nvtx  # noqa: F401  (nvtx_range silently does nothing without it)
    except ImportError:
        return _fail(
            "no_nvtx",
            "the `nvtx` Python package is missing, so no launch would carry an NVTX range and ncu "
            "would profile nothing. Install it (pip install 'nvtx>=0.2.10') in the Python that runs the worker.",
            EXIT_NO_NVTX,
        )
    op = get_op(spec.op)
    unknown = sorted(set(spec.backends) - set(op.backends))
    if unknown:
        raise ValueError(f"op {op.name!r} has no backend {unknown}; it has {sorted(op.backends)}")
    device = torch.device(spec.device)
    on_gpu = device.type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        return _fail(
            "no_gpu",
            "no CUDA GPU: torch.cuda.is_available() is False in the profiling worker.",
            EXIT_NO_GPU,
        )
    cases = spec.cases
    emit("ready", op=op.name, backends=spec.backends, device=torch.cuda.get_device_name(device) if on_gpu else "cpu")
    if "oasr" in spec.backends:
        jit_spec = op.family.jit_spec()
        info = jit_spec.build()
        emit("built", module=jit_spec.name, seconds=round(info.seconds, 3), cache_hit=info.cache_hit)

    for index, (config, dtype_name) in enumerate(cases):
        dtype = parse_dtype(dtype_name)
        inputs = op.make_inputs(config, dtype, device, spec.seed)
        for backend in spec.backends:
            for _ in range(spec.warmup):
                op.backends[backend](inputs)
        _synchronize(device)
        with nvtx_range(SWEEP_RANGE):
            for backend in spec.backends:
                with nvtx_range(str(RangeName(op.name, backend, dict(config), dtype_name))):
                    op.backends[backend](inputs)
        _synchronize(device)
        del inputs
        if on_gpu:
            torch.cuda.empty_cache()
        emit("done", index=index + 1, total=len(cases), config=config, dtype=dtype_name)
    emit("end", total=len(cases))
    return 0


def serve(
    argv: Sequence[str] | None,
    module: str,
    load: Callable[[str], Any],
    run: Callable[[Any], int],
    started: Callable[[Any], tuple[str, int]],
) -> int:
    """A worker's command line: read the spec ``load`` parses from the one file argument, emit ``start`` with the
    ``(op, total)`` that ``started`` names, then ``run`` it; an exception is an ``error`` event and exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {module} <spec.json>", file=sys.stderr)
        return 2
    spec = load(Path(args[0]).read_text())
    op, total = started(spec)
    emit("start", pid=os.getpid(), op=op, total=total)
    try:
        return run(spec)
    except Exception as exc:
        traceback.print_exc()
        sys.stderr.flush()
        return _fail("exception", f"{type(exc).__name__}: {exc}", EXIT_EXCEPTION)


def main(argv: Sequence[str] | None = None) -> int:
    return serve(argv, "profiling.nsight.worker", SweepSpec.from_json, run, lambda spec: (spec.op, len(spec.cases)))


if __name__ == "__main__":
    sys.exit(main())
