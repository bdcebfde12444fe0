"""The dependency-free engine: a worker process per GPU, each with its own ``CUDA_VISIBLE_DEVICES``.

Workers come warm from the session's :class:`~profiling.scaleout.pool.WorkerPool` (forked
from a server that has imported torch and the harness; kept across sweeps), one leased
per GPU at the run's start, and go back to it at the end. The driver hands each idle
worker one chunk at a time through its own pipe, so it always knows which chunk a
worker holds. A worker that dies (killed, out of memory, a GPU fault) loses only that
chunk: it is handed to another GPU, a new worker is leased on its GPU, and a GPU whose
workers die ``max_deaths_per_gpu`` times is retired. Finished chunks are in the driver
the moment they end, so nothing finished is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

from .chunks import LOST, Attempt, ChunkRun
from .pool import Worker, WorkerPool, shared_pool
from .schedule import Schedule, Taken

MAX_DEATHS_PER_GPU = 2


def run_local(
    fn: Callable[[Any], Any],
    chunks: Sequence[Any],
    gpus: Sequence[str],
    *,
    max_attempts: int = 3,
    on_result: Callable[[int, Any, Attempt], None] | None = None,
    timeout_s: float | None = None,
    max_deaths_per_gpu: int = MAX_DEATHS_PER_GPU,
    pool: WorkerPool | None = None,
) -> ChunkRun:
    """Run ``fn`` on every chunk, one worker process per GPU in ``gpus`` (from ``pool``, default the
    session's :func:`~profiling.scaleout.pool.shared_pool`); see the module docstring."""
    pool = pool or shared_pool()
    plan = Schedule("local", gpus, len(chunks), max_attempts, on_result)
    deaths = dict.fromkeys(gpus, 0)
    workers: dict[str, Worker] = {}
    holding: dict[str, Taken] = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    busy_at_end: list[Worker] = []
    try:
        for gpu in gpus[: max(1, len(chunks))]:
            workers[gpu] = _leased(pool, gpu, plan)
        while plan.pending or holding:
            _assign(workers, holding, plan, fn, chunks)
            if not workers:
                plan.give_up("every GPU's worker died (see the lost attempts)")
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                plan.give_up(f"not run: the sweep's time limit ({timeout_s:g} s) ran out")
                for gpu, item in holding.items():
                    plan.run.errors[item.index] = f"stopped on GPU {gpu}: the time limit ran out"
                break
            waitables: list[Any] = [w.conn for w in workers.values()] + [w.process.sentinel for w in workers.values()]
            ready = set(wait(waitables, timeout=None if remaining is None else min(remaining, 1.0)))
            for gpu, worker in list(workers.items()):
                message = None
                if worker.conn in ready:
                    try:
                        message = worker.conn.recv()
                    except (EOFError, OSError):
                        message = None
                if message is not None:
                    _received(worker, message, holding, plan)
                elif worker.process.sentinel in ready or (worker.conn in ready and not worker.alive()):
                    worker.process.join(1.0)
                    item = holding.pop(gpu, None)
                    if item is not None:
                        plan.ended(item, gpu, LOST, f"its worker process died (exit status {worker.process.exitcode})")
                    deaths[gpu] += 1
                    pool.discard(worker)
                    del workers[gpu]
                    if deaths[gpu] < max_deaths_per_gpu and plan.pending:
                        workers[gpu] = _leased(pool, gpu, plan)
    finally:
        busy_at_end = [workers.pop(gpu) for gpu in list(holding) if gpu in workers]
        for worker in busy_at_end:  # the run ended without their chunk (time limit, Ctrl-C)
            pool.discard(worker, busy=True)
        for worker in workers.values():
            pool.release(worker)
    return plan.finish()


def _leased(pool: WorkerPool, gpu: str, plan: Schedule) -> Worker:
    worker = pool.lease(gpu)
    if worker.ready_at is not None:
        plan.run.ready_s.setdefault(gpu, 0.0)
    return worker


def _received(worker: Worker, message: tuple, holding: dict[str, Taken], plan: Schedule) -> None:
    if message[0] == "ready":
        worker.ready_at = message[1]
        plan.run.ready_s[worker.gpu] = round(max(0.0, worker.ready_at - plan.started_at), 3)
        return
    index, outcome, value, seconds = message
    item = holding.pop(worker.gpu)
    assert item.index == index, f"worker on GPU {worker.gpu} answered chunk {index}, not {item.index}"
    plan.ended(item, worker.gpu, outcome, value, seconds)


def _assign(
    workers: dict[str, Worker], holding: dict[str, Taken], plan: Schedule, fn: Callable, chunks: Sequence[Any]
) -> None:
    """Hand each idle worker the first pending chunk not lost on its GPU (or any, if only such are left)."""
    live = set(workers)
    for gpu, worker in workers.items():
        if gpu in holding:
            continue
        item = plan.take(gpu, live)
        if item is None:
            continue
        try:
            worker.conn.send((item.index, fn, chunks[item.index]))
        except (BrokenPipeError, ConnectionResetError):  # it has just died: its sentinel says so next
            plan.put_back(item)
            continue
        holding[gpu] = item
