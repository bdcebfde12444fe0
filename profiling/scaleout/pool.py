"""Warm worker processes, one or more per GPU, kept for the session: the local engine's workers.

A worker is forked from a ``forkserver`` that has already imported torch, oasr and the
profiling harness (:data:`PRELOAD`), so a new worker pays only its CUDA start-up, which
it does at once, before its first chunk arrives. Workers outlive a sweep: the next sweep
of the session (the panel runs one per click) finds them with CUDA up and kernels loaded.
Each is pinned to its GPU (``CUDA_VISIBLE_DEVICES``) before anything touches CUDA, and
takes the driver's environment at every lease. :func:`shared_pool` is the session's pool,
shut down at exit; a :class:`WorkerPool` of one's own is a context manager.

A worker's messages: ``("ready", time.time())`` once CUDA is up, then ``(index, outcome, value,
seconds)`` per chunk. The driver sends ``("env", environ)``, ``(index, fn, chunk)`` and None (stop).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

import torch

from .chunks import ERROR, GPU_ENV, call

PRELOAD = ("torch", "oasr", "profiling.harness.measure", "profiling.scaleout.timing")
"""Imported once by the forkserver, so that every worker starts with them loaded."""
STOP_GRACE_S = 20.0
"""How long a busy worker has to stop after SIGINT before it is killed."""


def _worker_main(gpu: str, conn: Connection) -> None:
    """A worker's life: pin the GPU, start CUDA, then run chunks until told to stop."""
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # before anything touches CUDA in this process
    os.environ[GPU_ENV] = gpu
    try:
        if torch.cuda.is_available():
            torch.cuda.init()
        conn.send(("ready", time.time()))
        while True:
            try:
                message = conn.recv()
            except EOFError:  # the driver is gone
                return
            if message is None:
                return
            if message[0] == "env":
                _adopt(message[1], gpu)
                continue
            index, fn, chunk = message
            outcome, value, seconds = call(fn, chunk)
            try:
                conn.send((index, outcome, value, seconds))
            except Exception as exc:  # an unpicklable result
                conn.send((index, ERROR, f"its result could not be sent back ({type(exc).__name__}: {exc})", seconds))
    except KeyboardInterrupt:  # the driver stops the run (Ctrl-C, time limit)
        return


def _adopt(environ: dict[str, str], gpu: str) -> None:
    """Take the driver's environment, keeping this worker's GPU."""
    for key in [k for k in os.environ if k not in environ]:
        del os.environ[key]
    os.environ.update(environ)
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ[GPU_ENV] = gpu


@dataclass(eq=False)
class Worker:
    """One worker process on one GPU; ``ready_at`` (``time.time()``) once it reported CUDA up."""

    gpu: str
    process: multiprocessing.process.BaseProcess
    conn: Connection
    started_at: float
    ready_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.is_alive()


class WorkerPool:
    """Workers per GPU, handed out by :meth:`lease` and taken back by :meth:`release`.

    Parameters
    ----------
    preload : sequence of str
        Modules the forkserver imports before forking workers (process-wide: the first
        pool to start the forkserver chooses them).
    """

    def __init__(self, preload: Sequence[str] = PRELOAD) -> None:
        self.preload = list(preload)
        self._idle: dict[str, list[Worker]] = {}
        self._all: list[Worker] = []
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _start(self, gpu: str) -> Worker:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(self.preload)
        parent, child = context.Pipe()
        process = context.Process(target=_worker_main, args=(gpu, child), name=f"oasr-gpu{gpu}", daemon=True)
        process.start()
        child.close()
        worker = Worker(gpu, process, parent, time.perf_counter())
        with self._lock:
            self._all.append(worker)
        return worker

    def start(self, gpus: Sequence[str]) -> None:
        """Have an idle worker on each of ``gpus`` (start those missing); returns once they are forked."""
        for gpu in gpus:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this worker pool was shut down")
                have = any(w.alive() for w in self._idle.get(gpu, []))
            if not have:
                worker = self._start(gpu)
                with self._lock:
                    self._idle.setdefault(gpu, []).append(worker)

    def lease(self, gpu: str) -> Worker:
        """An idle live worker on ``gpu`` (a new one if none is idle), with the driver's environment."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this worker pool was shut down")
                idle = self._idle.get(gpu, [])
                worker = idle.pop(0) if idle else None
            if worker is None:
                worker = self._start(gpu)
            if worker.alive():
                try:
                    worker.conn.send(("env", dict(os.environ)))
                except OSError:
                    self.discard(worker)
                    continue
                return worker
            self.discard(worker)

    def release(self, worker: Worker) -> None:
        """Take back a worker whose chunk (if any) has ended; a dead one is discarded."""
        with self._lock:
            keep = not self._closed and worker.alive()
            if keep:
                self._idle.setdefault(worker.gpu, []).append(worker)
        if not keep:
            self.discard(worker)

    def discard(self, worker: Worker, busy: bool = False) -> None:
        """End ``worker``: a busy one is interrupted (SIGINT), then killed after :data:`STOP_GRACE_S`."""
        _stop([worker], busy)
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            for idle in self._idle.values():
                if worker in idle:
                    idle.remove(worker)

    def pids(self) -> list[int]:
        """The process ids of every worker this pool holds, idle or leased."""
        with self._lock:
            return [w.pid for w in self._all if w.pid is not None]

    def shutdown(self) -> None:
        """End every worker, leased ones too (interrupted first); the pool takes no more leases."""
        with self._lock:
            self._closed = True
            workers, self._all, self._idle = list(self._all), [], {}
        _stop(workers, busy=True)


def _stop(workers: Sequence[Worker], busy: bool) -> None:
    """Ask each worker to end; ``busy`` ones are interrupted too; any left after the grace are killed."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(None)
        if busy and worker.alive() and worker.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(1.0)
        worker.conn.close()


_SHARED: WorkerPool | None = None
_SHARED_LOCK = threading.Lock()


def shared_pool() -> WorkerPool:
    """The session's pool (started on first use, shut down when the interpreter exits)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED._closed:
            _SHARED = WorkerPool()
            atexit.register(_SHARED.shutdown)
        return _SHARED


def shutdown_shared_pool() -> None:
    """End the session's workers now (the next sweep starts new ones)."""
    with _SHARED_LOCK:
        pool = _SHARED
    if pool is not None:
        pool.shutdown()
