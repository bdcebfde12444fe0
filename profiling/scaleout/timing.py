"""The timing sweep over several GPUs: :func:`profiling.harness.measure.measure`, one config x dtype per task.

Every case (config, dtype) is a chunk: a worker on one GPU times all chosen backends
of it (interleaved, as in one process) and, with ``check=True``, compares each with
the float64 reference. Workers (:mod:`profiling.scaleout.pool`) outlive the sweep, so each
starts CUDA and measures its GPU's copy bandwidth once per session; each sweep loads the
kernels afresh, so a kernel edited since the last sweep is rebuilt (once, by the driver,
while the workers start). Rows come back in the sweep's order, each with the GPU
(``gpu_device``) and ``host`` it was measured on. A worker that dies loses only its
current case, which is measured again on another GPU.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from oasr.jit.families import forget_loaded_modules

from ..harness import timing
from ..harness.measure import columns_for, measure
from ..harness.ops import Config, OpSpec, dtype_name, get_op, parse_dtype
from .chunks import Attempt, ChunkRun, host_name
from .engine import check_engine, run_chunks
from .gpus import GpuSpec, discover

PLACEMENT_COLUMNS = ("gpu_device", "host")
"""Added after the result columns: where each row was measured."""


class SweepFailedError(RuntimeError):
    """Some cases of a spread sweep failed; ``run`` says what ran where, ``rows`` holds what finished."""

    def __init__(self, message: str, run: ChunkRun, rows: pd.DataFrame) -> None:
        super().__init__(message)
        self.run = run
        self.rows = rows


@dataclass(frozen=True)
class TimingCase:
    """One chunk of a timing sweep: one config in one dtype, every chosen backend; ``sweep`` names its sweep."""

    op: str
    config: Config
    dtype: str
    backends: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)
    sweep: str = ""


_CURRENT_SWEEP = {"id": ""}
"""The sweep this process measured last: a new one loads the kernels afresh."""


def measure_case(case: TimingCase) -> list[dict[str, Any]]:
    """Runs in a worker: ``measure`` of one case on this worker's GPU, as row dicts."""
    if case.sweep != _CURRENT_SWEEP["id"]:
        forget_loaded_modules()  # this worker may have loaded them a sweep ago, before an edit
        _CURRENT_SWEEP["id"] = case.sweep
    frame = measure(get_op(case.op), [case.config], [case.dtype], list(case.backends), **case.options)
    return frame.to_dict("records")


def plan(
    op: OpSpec,
    configs: Iterable[Config],
    dtypes: Sequence[str | torch.dtype],
    backends: Sequence[str] | None = None,
    **options: Any,
) -> list[TimingCase]:
    """The cases of a sweep of ``op`` (config-major, then dtype), its arguments checked; see :func:`measure_sweep`."""
    backends = tuple(backends or op.backends)
    unknown = [b for b in backends if b not in op.backends]
    if unknown:
        raise ValueError(
            f"backends: op {op.name!r} has no backend {', '.join(unknown)}; it has {', '.join(op.backends)}"
        )
    names = [dtype_name(parse_dtype(d)) for d in dtypes]
    sweep = uuid.uuid4().hex
    return [TimingCase(op.name, dict(c), d, backends, dict(options), sweep) for c in configs for d in names]


def prebuild(ops: Iterable[str]) -> None:
    """Build (or find in the JIT cache) the module of each op's family, so that the workers only load it.

    Families built per configuration (gemm) build what a case needs, in the worker.
    """
    for family in dict.fromkeys(get_op(name).family for name in ops):
        if family.default_variant is None:
            family.jit_spec().build()


def run_cases(
    cases: Sequence[TimingCase],
    *,
    gpus: GpuSpec = None,
    engine: str = "local",
    address: str | None = None,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> tuple[list[dict[str, Any]], ChunkRun | None]:
    """Measure ``cases`` (of any ops) here or spread over ``gpus``: the rows of those that finished, in
    the cases' order, each with ``gpu_device`` and ``host``, and the run (None in this process)."""
    check_engine(engine)
    if gpus is None:
        timing.require_cuda("measure_sweep")
        here = {"gpu_device": (discover() or ["0"])[torch.cuda.current_device()], "host": host_name()}
        rows: list[dict[str, Any]] = []
        for case in cases:
            batch = [{**row, **here} for row in measure_case(case)]
            rows += batch
            if on_rows is not None:
                on_rows(batch)
        return rows, None

    def arrived(index: int, batch: list[dict[str, Any]], attempt: Attempt) -> None:
        if on_rows is not None:
            on_rows([{**row, "gpu_device": attempt.gpu, "host": attempt.host} for row in batch])

    building = None
    if engine == "local":  # the driver builds changed kernels while the workers start
        building = threading.Thread(target=_prebuild_quietly, args=([c.op for c in cases],), name="oasr-prebuild")
        building.start()
    try:
        run = run_chunks(measure_case, cases, gpus=gpus, engine=engine, address=address, on_result=arrived)
    finally:
        if building is not None:
            building.join()
    rows = [
        {**row, "gpu_device": run.placement(i).gpu, "host": run.placement(i).host}
        for i, batch in enumerate(run.results)
        if batch is not None
        for row in batch
    ]
    return rows, run


def _prebuild_quietly(ops: list[str]) -> None:
    """:func:`prebuild`; a failing build is left to the workers, which report it case by case."""
    with contextlib.suppress(Exception):
        prebuild(ops)


def measure_sweep(
    op: OpSpec,
    configs: Iterable[Config],
    dtypes: Sequence[str | torch.dtype],
    backends: Sequence[str] | None = None,
    *,
    gpus: GpuSpec = None,
    engine: str = "local",
    address: str | None = None,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Time ``op`` like :func:`~profiling.harness.measure.measure`, on one GPU here or spread over ``gpus``.

    Parameters
    ----------
    op, configs, dtypes, backends
        As for :func:`~profiling.harness.measure.measure`.
    gpus : "all", int or sequence of device ids, optional
        None (default): in this process, on its current GPU. Else one worker per GPU
        (:func:`profiling.scaleout.gpus.resolve`), one case per task.
    engine : {"local", "ray"}
        The :mod:`profiling.scaleout` engine; ``address`` joins a Ray cluster.
    on_rows : callable, optional
        Called with each case's rows as soon as they arrive (in the order cases finish).
    **options
        ``rounds``, ``warmup``, ``iters``, ``method``, ``check``: as for ``measure``.

    Returns
    -------
    pandas.DataFrame
        :func:`~profiling.harness.measure.columns_for` ``(op)`` and :data:`PLACEMENT_COLUMNS`, in the
        sweep's order; ``attrs["placement"]`` says what ran where.

    Raises
    ------
    SweepFailedError
        A case failed (after the rows that finished were passed to ``on_rows``).
    """
    check_engine(engine)
    cases = plan(op, configs, dtypes, backends, **options)
    rows, run = run_cases(cases, gpus=gpus, engine=engine, address=address, on_rows=on_rows)
    frame = pd.DataFrame(rows, columns=[*columns_for(op), *PLACEMENT_COLUMNS])
    if run is None:
        return frame
    frame.attrs["placement"] = run.summary()
    if run.errors:
        raise SweepFailedError(
            f"{len(run.errors)} of {len(cases)} cases of {op.name} failed; the {len(frame)} rows that finished "
            f"were kept.\n{run.summary()}",
            run,
            frame,
        )
    return frame
