"""``run_chunks``: run a function over chunks of a sweep on several GPUs, with the local or the Ray engine.

Both engines take the same call and return the same :class:`~profiling.scaleout.chunks.ChunkRun`:
every chunk's result (in chunk order), every attempt with the GPU and host it ran on,
and the chunks that failed. ``fn`` must be a module-level function (it is pickled by
name into the workers) and its chunks and results picklable.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .chunks import Attempt, ChunkRun
from .gpus import GpuSpec, resolve
from .local import run_local
from .pool import shared_pool
from .ray_engine import cluster_gpus, run_ray

ENGINES = ("local", "ray")


def check_engine(engine: str) -> str:
    """``engine`` if it is one of :data:`ENGINES`, else ValueError naming the argument."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return engine


def start_workers(gpus: GpuSpec = "all") -> threading.Thread:
    """Start the local engine's workers on ``gpus`` now, in the background (a session that will sweep
    soon, such as a panel, spares its first sweep their start-up); join the thread to wait for them."""
    ids = resolve(gpus)
    thread = threading.Thread(target=shared_pool().start, args=(ids,), name="oasr-start-workers", daemon=True)
    thread.start()
    return thread


def check_address(engine: str, address: str | None) -> None:
    """ValueError when ``address`` (a Ray cluster) comes without ``engine='ray'``."""
    if address is not None and engine != "ray":
        raise ValueError("address= joins a Ray cluster; it needs engine='ray'")


def expected_gpus(gpus: GpuSpec, engine: str = "local", address: str | None = None) -> int:
    """How many GPUs ``run_chunks`` would use at once: to cut a sweep into one chunk per GPU."""
    check_engine(engine)
    if engine == "ray":
        return cluster_gpus(gpus, address)
    return len(resolve(gpus))


def run_chunks(
    fn: Callable[[Any], Any],
    chunks: Sequence[Any],
    *,
    gpus: GpuSpec = "all",
    engine: str = "local",
    address: str | None = None,
    max_attempts: int = 3,
    on_result: Callable[[int, Any, Attempt], None] | None = None,
    timeout_s: float | None = None,
) -> ChunkRun:
    """Run ``fn(chunk)`` for every chunk, one chunk per GPU at a time.

    Parameters
    ----------
    fn : callable
        Module-level function of one chunk; runs in a worker whose ``CUDA_VISIBLE_DEVICES``
        is its one GPU (so the GPU is ``cuda:0`` there).
    chunks : sequence
        The work, one item per task.
    gpus : "all", int or sequence of device ids
        See :func:`profiling.scaleout.gpus.resolve` (with Ray on a cluster: "all" or a count).
    engine : {"local", "ray"}
        ``local``: one process per GPU on this machine; ``ray``: Ray tasks (``address`` joins a cluster).
    max_attempts : int
        Runs of a chunk whose worker dies before it is given up.
    on_result : callable, optional
        Called in the driver with ``(index, result, attempt)`` as each chunk finishes.
    timeout_s : float, optional
        Limit for the whole run; what has not finished by then is reported as failed.

    Returns
    -------
    ChunkRun
    """
    check_engine(engine)
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise TypeError(f"fn must be a module-level function (workers import it by name), not {fn!r}") from error
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
    if engine == "ray":
        return run_ray(
            fn, chunks, gpus, address=address, max_attempts=max_attempts, on_result=on_result, timeout_s=timeout_s
        )
    check_address(engine, address)
    return run_local(fn, chunks, resolve(gpus), max_attempts=max_attempts, on_result=on_result, timeout_s=timeout_s)
