"""What both engines share: a task's outcome on a GPU, and the record of a whole run (what ran where).

A sweep is split into *chunks* (a config, or a few for an ncu run); a module-level
function ``fn(chunk) -> result`` runs each on one GPU, in a worker the engine owns.
A chunk is retried elsewhere when its worker (or node) dies under it; an exception
raised by ``fn`` is the chunk's own failure and is not retried (it would fail again).
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LOST = "lost"
"""Outcome of an attempt whose worker, GPU or node died under it (the chunk goes to another GPU)."""
ERROR = "error"
"""Outcome of an attempt whose function raised (not retried)."""
OK = "ok"

GPU_ENV = "OASR_SCALEOUT_GPU"
"""Set in each worker to the device id of its GPU (``CUDA_VISIBLE_DEVICES`` is that id too)."""


@dataclass(frozen=True)
class Attempt:
    """One run of one chunk: where, how long, and how it ended (``ok``, ``error`` or ``lost``)."""

    chunk: int
    gpu: str
    host: str
    seconds: float
    outcome: str
    error: str = ""


@dataclass
class ChunkRun:
    """The outcome of :func:`profiling.scaleout.engine.run_chunks`.

    ``results[i]`` is chunk ``i``'s result, or None where it failed (``errors[i]`` says why).
    ``attempts`` lists every attempt in the order they ended.
    """

    engine: str
    gpus: list[str]
    results: list[Any]
    attempts: list[Attempt] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    def placement(self, chunk: int) -> Attempt | None:
        """The attempt that finished ``chunk`` (None if none did)."""
        return next((a for a in self.attempts if a.chunk == chunk and a.outcome == OK), None)

    def summary(self) -> str:
        """What ran where: per GPU, the chunks it finished and lost and its busy time; then what failed."""
        per_gpu: dict[tuple[str, str], list[Attempt]] = {}
        for attempt in self.attempts:
            per_gpu.setdefault((attempt.host, attempt.gpu), []).append(attempt)
        done = sum(r is not None for r in self.results)
        lines = [
            f"{self.engine} engine: {done} of {len(self.results)} chunks done on {len(per_gpu)} GPU(s) "
            f"in {self.wall_s:.1f} s"
        ]
        for (host, gpu), attempts in sorted(per_gpu.items()):
            count = {o: sum(a.outcome == o for a in attempts) for o in (OK, ERROR, LOST)}
            busy = sum(a.seconds for a in attempts)
            lines.append(
                f"  {host} GPU {gpu}: {count[OK]} done, {count[ERROR]} failed, {count[LOST]} lost "
                f"(worker died), busy {busy:.1f} s"
            )
        for attempt in self.attempts:
            if attempt.outcome == LOST:
                retried = self.placement(attempt.chunk)
                then = f"redone on {retried.host} GPU {retried.gpu}" if retried else "not redone"
                lines.append(
                    f"  chunk {attempt.chunk} lost on {attempt.host} GPU {attempt.gpu}: {attempt.error}; {then}"
                )
        for chunk, error in sorted(self.errors.items()):
            lines.append(f"  chunk {chunk} FAILED: {error}")
        return "\n".join(lines)


def host_name() -> str:
    return socket.gethostname()


def call(fn: Callable[[Any], Any], chunk: Any) -> tuple[str, Any, float]:
    """Run ``fn(chunk)`` in a worker: ``("ok", result, seconds)`` or ``("error", one-paragraph cause, seconds)``."""
    start = time.perf_counter()
    try:
        result = fn(chunk)
    except Exception as exc:  # the chunk's own failure, reported to the driver
        frames = traceback.extract_tb(exc.__traceback__)[-1:]
        where = f" (at {frames[0].filename}:{frames[0].lineno})" if frames else ""
        return ERROR, f"{type(exc).__name__}: {exc}{where}", time.perf_counter() - start
    return OK, result, time.perf_counter() - start


def worker_gpu() -> str:
    """The device id this worker runs on (``""`` outside a scale-out worker)."""
    return os.environ.get(GPU_ENV, "")
