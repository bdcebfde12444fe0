"""The driver-thread engine: for chunks that run their own process per GPU (one ncu run each).

No worker process sits between the driver and the work: a thread of the driver runs
``fn(chunk, gpu, stop)`` for each chunk, and ``fn`` starts its own subprocess with
``CUDA_VISIBLE_DEVICES=gpu``. Results, and ``on_result``, are handled in the calling
thread, in the order chunks end. ``fn`` raises :class:`~profiling.scaleout.chunks.ChunkLost`
when its process died: the chunk goes to another GPU, and a GPU that loses
``max_deaths_per_gpu`` chunks is retired. At the time limit, or on Ctrl-C, ``stop`` is set:
``fn`` ends its process and may still return what finished, which is kept.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .chunks import LOST, Attempt, ChunkRun, call
from .schedule import Schedule, Taken

MAX_DEATHS_PER_GPU = 2

ThreadChunkFn = Callable[[Any, str, threading.Event], Any]
"""``fn(chunk, gpu, stop)``: run ``chunk`` on device ``gpu``; end early when ``stop`` is set."""


def run_threads(
    fn: ThreadChunkFn,
    chunks: Sequence[Any],
    gpus: Sequence[str],
    *,
    max_attempts: int = 3,
    on_result: Callable[[int, Any, Attempt], None] | None = None,
    timeout_s: float | None = None,
    max_deaths_per_gpu: int = MAX_DEATHS_PER_GPU,
) -> ChunkRun:
    """Run ``fn`` on every chunk, one chunk per GPU at a time, from threads of this process."""
    plan = Schedule("local", gpus, len(chunks), max_attempts, on_result)
    for gpu in gpus:
        plan.run.ready_s[gpu] = 0.0
    live = set(gpus)
    deaths = dict.fromkeys(gpus, 0)
    holding: dict[str, Taken] = {}
    done: queue.Queue[tuple[str, str, Any, float]] = queue.Queue()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def attempt(gpu: str, chunk: Any) -> None:
        try:
            done.put((gpu, *call(fn, chunk, gpu, stop)))
        except BaseException as exc:  # never leave the driver waiting for this thread
            done.put((gpu, LOST, f"{type(exc).__name__}: {exc}", 0.0))

    try:
        while plan.pending or holding:
            if not stop.is_set():
                for gpu in sorted(live - set(holding), key=list(gpus).index):
                    item = plan.take(gpu, live)
                    if item is not None:
                        holding[gpu] = item
                        thread = threading.Thread(target=attempt, args=(gpu, chunks[item.index]), name=f"oasr-gpu{gpu}")
                        threads.append(thread)
                        thread.start()
            if not holding:
                plan.give_up("every GPU was retired after losing chunks (see the lost attempts)")
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0 and not stop.is_set():
                stop.set()  # running chunks end and keep what they finished
                plan.give_up(f"not run: the sweep's time limit ({timeout_s:g} s) ran out")
            try:
                gpu, outcome, value, seconds = done.get(
                    timeout=1.0 if remaining is None else max(0.05, min(remaining, 1.0))
                )
            except queue.Empty:
                continue
            item = holding.pop(gpu)
            if stop.is_set() and outcome == LOST:
                plan.run.errors[item.index] = f"stopped on GPU {gpu}: the time limit ran out ({value})"
                continue
            plan.ended(item, gpu, outcome, value, seconds)
            if outcome == LOST:
                deaths[gpu] += 1
                if deaths[gpu] >= max_deaths_per_gpu:
                    live.discard(gpu)
    except BaseException:  # Ctrl-C: every chunk's process is stopped before this returns
        stop.set()
        raise
    finally:
        for thread in threads:
            thread.join()
    return plan.finish()
