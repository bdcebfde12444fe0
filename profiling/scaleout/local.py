"""The dependency-free engine: one worker process per GPU, each with its own ``CUDA_VISIBLE_DEVICES``.

Workers are started with ``spawn`` (a fresh interpreter: no CUDA state is inherited)
and live for the whole run, so a worker initialises CUDA and loads the kernels once.
The driver hands each idle worker one chunk at a time through its own pipe, so it
always knows which chunk a worker holds. A worker that dies (killed, out of memory,
a GPU fault) loses only that chunk: it is handed to another GPU, the worker is
restarted on its GPU, and a GPU whose workers die ``max_deaths_per_gpu`` times is
retired. Finished chunks are in the driver the moment they end, so nothing finished
is lost.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .chunks import ERROR, GPU_ENV, LOST, OK, Attempt, ChunkRun, call, host_name

MAX_DEATHS_PER_GPU = 2
STOP_GRACE_S = 20.0
"""How long a busy worker has to stop after SIGINT (the ncu runner's own grace is 15 s) before it is killed."""
_SPAWN_LOCK = threading.Lock()


def _worker_main(gpu: str, conn: Connection) -> None:
    """A worker's loop: receive ``(index, fn, chunk)``, send ``(index, outcome, value, seconds)``; None ends it."""
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # before anything touches CUDA in this process
    os.environ[GPU_ENV] = gpu
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:  # the driver is gone
                return
            if message is None:
                return
            index, fn, chunk = message
            outcome, value, seconds = call(fn, chunk)
            try:
                conn.send((index, outcome, value, seconds))
            except Exception as exc:  # an unpicklable result
                conn.send((index, ERROR, f"its result could not be sent back ({type(exc).__name__}: {exc})", seconds))
    except KeyboardInterrupt:  # the driver stops the run (Ctrl-C, time limit): what the chunk started has stopped
        return


@dataclass
class _Worker:
    gpu: str
    process: multiprocessing.process.BaseProcess
    conn: Connection
    chunk: int | None = None
    started: float = 0.0
    avoid: set[str] = field(default_factory=set)
    """The GPUs its chunk was lost on before."""


@dataclass
class _Pending:
    index: int
    avoid: set[str] = field(default_factory=set)
    """GPUs this chunk was lost on: tried last."""


def _spawn(gpu: str) -> _Worker:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_worker_main, args=(gpu, child), name=f"oasr-gpu{gpu}", daemon=True)
    with _SPAWN_LOCK:  # the child's environment is the parent's at start(): pin its GPU there too
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        try:
            process.start()
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
    child.close()
    return _Worker(gpu, process, parent)


def _stop(workers: Sequence[_Worker]) -> None:
    """End every worker: idle ones are asked to, busy ones interrupted (SIGINT, so that a chunk's ncu run
    stops its process group), and any still there after :data:`STOP_GRACE_S` are killed."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(None)
        if worker.chunk is not None and worker.process.pid is not None:  # the run ended without it
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.process.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(1.0)
        worker.conn.close()


def run_local(
    fn: Callable[[Any], Any],
    chunks: Sequence[Any],
    gpus: Sequence[str],
    *,
    max_attempts: int = 3,
    on_result: Callable[[int, Any, Attempt], None] | None = None,
    timeout_s: float | None = None,
    max_deaths_per_gpu: int = MAX_DEATHS_PER_GPU,
) -> ChunkRun:
    """Run ``fn`` on every chunk, one worker process per GPU in ``gpus``; see the module docstring."""
    start = time.perf_counter()
    host = host_name()
    run = ChunkRun("local", list(gpus), [None] * len(chunks))
    pending = deque(_Pending(i) for i in range(len(chunks)))
    tries = [0] * len(chunks)
    deaths = dict.fromkeys(gpus, 0)
    workers = {gpu: _spawn(gpu) for gpu in gpus[: max(1, len(chunks))]}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while pending or any(w.chunk is not None for w in workers.values()):
            _assign(workers, pending, chunks, fn, tries)
            if not workers:
                for item in pending:
                    run.errors[item.index] = "every GPU's worker died (see the lost attempts)"
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                for item in pending:
                    run.errors[item.index] = f"not run: the sweep's time limit ({timeout_s:g} s) ran out"
                for worker in workers.values():
                    if worker.chunk is not None:
                        run.errors[worker.chunk] = f"stopped on GPU {worker.gpu}: the time limit ran out"
                break
            busy = [w for w in workers.values() if w.chunk is not None]
            waitables: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in workers.values()]
            ready = set(wait(waitables, timeout=None if remaining is None else min(remaining, 1.0)))
            for worker in list(workers.values()):
                message = None
                if worker.conn in ready:
                    try:
                        message = worker.conn.recv()
                    except (EOFError, OSError):
                        message = None
                if message is not None:
                    _finish(run, worker, message, host, on_result)
                elif worker.process.sentinel in ready or (worker.conn in ready and not worker.process.is_alive()):
                    worker.process.join(1.0)
                    _lost(run, worker, pending, tries, max_attempts, host)
                    deaths[worker.gpu] += 1
                    worker.conn.close()
                    del workers[worker.gpu]
                    if deaths[worker.gpu] < max_deaths_per_gpu and pending:
                        workers[worker.gpu] = _spawn(worker.gpu)
    finally:
        _stop(list(workers.values()))
        run.wall_s = time.perf_counter() - start
    return run


def _assign(
    workers: dict[str, _Worker], pending: deque[_Pending], chunks: Sequence[Any], fn: Callable, tries: list[int]
) -> None:
    """Hand each idle worker the first pending chunk not lost on its GPU (or any, if only such are left)."""
    live = set(workers)
    for worker in workers.values():
        if worker.chunk is not None or not pending:
            continue
        item = next((p for p in pending if worker.gpu not in p.avoid), None)
        if item is None:
            if any(not (p.avoid >= live) for p in pending):
                continue  # another GPU can take them
            item = pending[0]
        try:
            worker.conn.send((item.index, fn, chunks[item.index]))
        except (BrokenPipeError, ConnectionResetError):  # it has just died: its sentinel says so next
            continue
        pending.remove(item)
        tries[item.index] += 1
        worker.chunk, worker.started = item.index, time.perf_counter()
        worker.avoid = item.avoid


def _finish(
    run: ChunkRun,
    worker: _Worker,
    message: tuple[int, str, Any, float],
    host: str,
    on_result: Callable[[int, Any, Attempt], None] | None,
) -> None:
    index, outcome, value, seconds = message
    worker.chunk = None
    if outcome == OK:
        attempt = Attempt(index, worker.gpu, host, seconds, OK)
        run.results[index] = value
        run.attempts.append(attempt)
        if on_result is not None:
            on_result(index, value, attempt)
    else:
        run.attempts.append(Attempt(index, worker.gpu, host, seconds, ERROR, value))
        run.errors[index] = f"on {host} GPU {worker.gpu}: {value}"


def _lost(
    run: ChunkRun, worker: _Worker, pending: deque[_Pending], tries: list[int], max_attempts: int, host: str
) -> None:
    """The worker died: record its chunk's attempt as lost and queue the chunk again (or fail it)."""
    code = worker.process.exitcode
    why = f"its worker process died (exit status {code})"
    if worker.chunk is None:
        return
    index = worker.chunk
    run.attempts.append(Attempt(index, worker.gpu, host, time.perf_counter() - worker.started, LOST, why))
    if tries[index] < max_attempts:
        avoid = {*worker.avoid, worker.gpu}
        pending.appendleft(_Pending(index, avoid))
    else:
        run.errors[index] = f"lost {tries[index]} times (last on {host} GPU {worker.gpu}: {why})"
    worker.chunk = None
