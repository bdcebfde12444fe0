"""The timing sweep over several GPUs: :func:`profiling.harness.measure.measure`, one config x dtype per task.

Every case (config, dtype) is a chunk: a worker on one GPU times all chosen backends
of it (interleaved, as in one process) and, with ``check=True``, compares each with
the float64 reference. Workers live for the whole sweep, so each measures its GPU's
copy bandwidth once and loads the kernels once; rows come back in the sweep's order,
each with the GPU (``gpu_device``) and ``host`` it was measured on. A worker that dies
loses only its current case, which is measured again on another GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

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
    """One chunk of a timing sweep: one config in one dtype, every chosen backend."""

    op: str
    config: Config
    dtype: str
    backends: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def measure_case(case: TimingCase) -> list[dict[str, Any]]:
    """Runs in a worker: ``measure`` of one case on this worker's GPU, as row dicts."""
    frame = measure(get_op(case.op), [case.config], [case.dtype], list(case.backends), **case.options)
    return frame.to_dict("records")


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
    backends = tuple(backends or op.backends)
    unknown = [b for b in backends if b not in op.backends]
    if unknown:
        raise ValueError(
            f"backends: op {op.name!r} has no backend {', '.join(unknown)}; it has {', '.join(op.backends)}"
        )
    names = [dtype_name(parse_dtype(d)) for d in dtypes]
    cases = [TimingCase(op.name, dict(c), d, backends, dict(options)) for c in configs for d in names]
    columns = [*columns_for(op), *PLACEMENT_COLUMNS]
    if gpus is None:
        timing.require_cuda("measure_sweep")
        here = {"gpu_device": (discover() or ["0"])[torch.cuda.current_device()], "host": host_name()}
        rows: list[dict[str, Any]] = []
        for case in cases:
            batch = [{**row, **here} for row in measure_case(case)]
            rows += batch
            if on_rows is not None:
                on_rows(batch)
        return pd.DataFrame(rows, columns=columns)

    def arrived(index: int, batch: list[dict[str, Any]], attempt: Attempt) -> None:
        if on_rows is not None:
            on_rows([{**row, "gpu_device": attempt.gpu, "host": attempt.host} for row in batch])

    run = run_chunks(measure_case, cases, gpus=gpus, engine=engine, address=address, on_result=arrived)
    rows = [
        {**row, "gpu_device": run.placement(i).gpu, "host": run.placement(i).host}
        for i, batch in enumerate(run.results)
        if batch is not None
        for row in batch
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["placement"] = run.summary()
    if run.errors:
        raise SweepFailedError(
            f"{len(run.errors)} of {len(cases)} cases of {op.name} failed; the {len(frame)} rows that finished "
            f"were kept.\n{run.summary()}",
            run,
            frame,
        )
    return frame
