"""What both engines share: a task's outcome on a GPU, and the record of a whole run (what ran where).

A sweep is split into *chunks* (a config, or a few for an ncu run); a module-level
function ``fn(chunk) -> result`` runs each on one GPU, in a worker the engine owns.
A chunk is retried elsewhere when its worker (or node) dies under it, or when ``fn``
raises :class:`ChunkLost` (its own subprocess, such as ncu, died); any other exception
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
    """One run of one chunk: where, how long, how it ended (``ok``, ``error`` or ``lost``), and when it
    ended (``ended_s``, seconds since the run began, as the driver saw it)."""

    chunk: int
    gpu: str
    host: str
    seconds: float
    outcome: str
    error: str = ""
    ended_s: float = 0.0


class ChunkLost(Exception):
    """Raised by a chunk's function when what ran the chunk died (its ncu, its GPU): run it on another GPU."""


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
    ready_s: dict[str, float] = field(default_factory=dict)
    """Per GPU, seconds from the run's start until its worker could take work (0 for a warm worker)."""

    def startup(self) -> list[dict[str, Any]]:
        """Where each GPU's time to its first result went: one row per GPU.

        ``ready_s`` (worker start-up, where the engine reports it), ``first_result_s`` (since the
        run began), ``first_chunk_s`` (that chunk's own time: CUDA start-up and module loads
        included) and ``median_chunk_s`` (its later chunks).
        """
        rows = []
        for gpu in dict.fromkeys(a.gpu for a in self.attempts if a.outcome == OK):
            done = sorted((a for a in self.attempts if a.gpu == gpu and a.outcome == OK), key=lambda a: a.ended_s)
            later = sorted(a.seconds for a in done[1:])
            rows.append({
                "gpu": gpu, "chunks": len(done), "ready_s": round(self.ready_s.get(gpu, float("nan")), 3),
                "first_result_s": round(done[0].ended_s, 3), "first_chunk_s": round(done[0].seconds, 3),
                "median_chunk_s": round(later[len(later) // 2], 3) if later else float("nan"),
            })  # fmt: skip
        return rows

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


def call(fn: Callable[..., Any], chunk: Any, *args: Any) -> tuple[str, Any, float]:
    """Run ``fn(chunk, *args)`` in a worker: ``("ok", result, seconds)``, or ``("error", one-paragraph cause,
    seconds)``, or ``("lost", why, seconds)`` when it raised :class:`ChunkLost`."""
    start = time.perf_counter()
    try:
        result = fn(chunk, *args)
    except ChunkLost as exc:
        return LOST, str(exc), time.perf_counter() - start
    except Exception as exc:  # the chunk's own failure, reported to the driver
        frames = traceback.extract_tb(exc.__traceback__)[-1:]
        where = f" (at {frames[0].filename}:{frames[0].lineno})" if frames else ""
        return ERROR, f"{type(exc).__name__}: {exc}{where}", time.perf_counter() - start
    return OK, result, time.perf_counter() - start


def worker_gpu() -> str:
    """The device id this worker runs on (``""`` outside a scale-out worker)."""
    return os.environ.get(GPU_ENV, "")
