"""Which chunk a GPU takes next and what an attempt's end does to the run: shared by the local engines.

A chunk lost on a GPU (its worker or its ncu died) goes back to the front of the queue
and is handed to another GPU first; after ``max_attempts`` runs it is given up. What
finished is in :class:`~profiling.scaleout.chunks.ChunkRun` the moment it ends.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .chunks import ERROR, OK, Attempt, ChunkRun, host_name


@dataclass
class Taken:
    """A chunk handed to a GPU: its index, when it was handed out, and the GPUs it was lost on before."""

    index: int
    avoid: set[str] = field(default_factory=set)
    began: float = 0.0


class Schedule:
    """The queue of chunks of one run, and its :class:`ChunkRun`."""

    def __init__(
        self,
        engine: str,
        gpus: Sequence[str],
        count: int,
        max_attempts: int,
        on_result: Callable[[int, Any, Attempt], None] | None,
    ) -> None:
        self.run = ChunkRun(engine, list(gpus), [None] * count)
        self.pending: deque[Taken] = deque(Taken(i) for i in range(count))
        self.tries = [0] * count
        self.max_attempts = max_attempts
        self.on_result = on_result
        self.host = host_name()
        self.start = time.perf_counter()
        self.started_at = time.time()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def take(self, gpu: str, live: set[str]) -> Taken | None:
        """The first pending chunk not lost on ``gpu`` (one lost everywhere else too, when only such are left)."""
        item = next((p for p in self.pending if gpu not in p.avoid), None)
        if item is None:
            if not self.pending or any(not (p.avoid >= live) for p in self.pending):
                return None  # another GPU can take them
            item = self.pending[0]
        self.pending.remove(item)
        self.tries[item.index] += 1
        item.began = time.perf_counter()
        return item

    def put_back(self, item: Taken) -> None:
        """``item`` never started (its worker died as it was handed over): not an attempt."""
        self.tries[item.index] -= 1
        self.pending.appendleft(item)

    def ended(self, item: Taken, gpu: str, outcome: str, value: Any, seconds: float | None = None) -> None:
        """Record an attempt: a result, the chunk's own error, or a loss (queued again, or given up)."""
        seconds = time.perf_counter() - item.began if seconds is None else seconds
        run, index = self.run, item.index
        error = "" if outcome == OK else str(value)
        attempt = Attempt(index, gpu, self.host, seconds, outcome, error, round(self.elapsed(), 3))
        run.attempts.append(attempt)
        if outcome == OK:
            run.results[index] = value
            if self.on_result is not None:
                self.on_result(index, value, attempt)
        elif outcome == ERROR:
            run.errors[index] = f"on {self.host} GPU {gpu}: {value}"
        elif self.tries[index] < self.max_attempts:
            self.pending.appendleft(Taken(index, {*item.avoid, gpu}))
        else:
            run.errors[index] = f"lost {self.tries[index]} times (last on {self.host} GPU {gpu}: {value})"

    def give_up(self, why: str) -> None:
        """Every pending chunk fails with ``why``."""
        for item in self.pending:
            self.run.errors[item.index] = why
        self.pending.clear()

    def finish(self) -> ChunkRun:
        self.run.wall_s = self.elapsed()
        return self.run
