"""The Ray Core engine: one task per chunk with ``num_gpus=1``, on one machine or a cluster.

Ray gives each task its own ``CUDA_VISIBLE_DEVICES`` and never puts two tasks on one
GPU, so no two ncu runs share a GPU. Results (timing rows, ``.ncu-rep`` bytes) come
back through the object store and are stored where the driver (the notebook) runs.
Tasks run with ``max_retries=0`` and the driver retries a chunk whose worker or node
died (``LOST``), so the summary can say where each attempt ran; an exception raised
by the chunk's function is its own failure and is not retried.

``address=None`` joins a Ray instance already started in this process, else starts
a local one over ``gpus`` (and shuts it down afterwards); ``address="auto"`` or
``"ray://host:10001"`` joins a cluster (``ray start --head`` on its nodes).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..provenance import REPO_ROOT
from .chunks import ERROR, GPU_ENV, LOST, OK, Attempt, ChunkRun, call, host_name
from .gpus import GpuSpec, resolve

try:
    import ray
except ImportError:  # the optional extra 'scaleout'
    ray = None

INSTALL_HINT = "engine='ray' needs Ray, which is not installed: pip install 'oasr[scaleout]'"


def require_ray() -> Any:
    """The ``ray`` module, or ImportError with the one line that installs it."""
    if ray is None:
        raise ImportError(INSTALL_HINT)
    return ray


def _remote_call(fn: Callable[[Any], Any], chunk: Any) -> tuple[str, Any, float, str, str]:
    """Runs in a Ray worker: ``fn(chunk)`` on the task's GPU; returns the outcome and where it ran."""
    ids = [str(i) for i in ray.get_gpu_ids()]
    gpu = ",".join(ids) or "?"
    os.environ[GPU_ENV] = gpu
    outcome, value, seconds = call(fn, chunk)
    return outcome, value, seconds, gpu, host_name()


def _start(gpus: GpuSpec, address: str | None) -> tuple[int, bool]:
    """Join or start Ray; returns (concurrent tasks, whether this call started it)."""
    started = False
    if not ray.is_initialized():
        if address is None:
            ids = resolve(gpus)
            saved = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)  # the GPUs Ray hands out
            try:
                ray.init(num_gpus=len(ids), include_dashboard=False, runtime_env={"env_vars": _worker_env()})
            finally:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
            started = True
        else:
            _join(address)
            started = True
    total = int(ray.cluster_resources().get("GPU", 0))
    if total < 1:
        raise ValueError(
            "the Ray cluster has no GPU resources: start its nodes on GPU machines (ray start --num-gpus N)"
        )
    if gpus is None or (isinstance(gpus, str) and gpus.strip().lower() == "all"):
        return total, started
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        if gpus > total:
            raise ValueError(f"gpus={gpus}, but the Ray cluster has {total} GPU(s)")
        return gpus, started
    if started and address is None:  # a list: Ray was started over exactly those
        return total, started
    raise ValueError(
        f"gpus={gpus!r}: with a Ray cluster pass 'all' or a count; Ray decides which GPU of which node runs a task"
    )


def cluster_gpus(gpus: GpuSpec, address: str | None = None) -> int:
    """The GPUs :func:`run_ray` would use at once, without starting Ray when it can be told from here."""
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        return gpus
    if ray is not None and ray.is_initialized():
        return int(ray.cluster_resources().get("GPU", 0)) or 1
    if address is None:
        return len(resolve(gpus))
    require_ray()
    _join(address)  # stays joined: run_ray then uses this connection
    return int(ray.cluster_resources().get("GPU", 0)) or 1


def _worker_env() -> dict[str, str]:
    """The job's environment: workers import ``profiling`` from this checkout."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}


def _join(address: str) -> None:
    ray.init(address=address, runtime_env={"env_vars": _worker_env()})


def run_ray(
    fn: Callable[[Any], Any],
    chunks: Sequence[Any],
    gpus: GpuSpec,
    *,
    address: str | None = None,
    max_attempts: int = 3,
    on_result: Callable[[int, Any, Attempt], None] | None = None,
    timeout_s: float | None = None,
) -> ChunkRun:
    """Run ``fn`` on every chunk as Ray tasks of one GPU each; see the module docstring."""
    require_ray()
    start = time.perf_counter()
    limit, started = _start(gpus, address)
    remote = ray.remote(_remote_call).options(num_gpus=1, max_retries=0)
    run = ChunkRun("ray", [], [None] * len(chunks))
    pending = deque(range(len(chunks)))
    tries = [0] * len(chunks)
    in_flight: dict[Any, tuple[int, float]] = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    fn_ref = ray.put(fn)
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                index = pending.popleft()
                tries[index] += 1
                in_flight[remote.remote(fn_ref, chunks[index])] = (index, time.perf_counter())
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                for ref, (index, _) in in_flight.items():
                    ray.cancel(ref, force=True)
                    run.errors[index] = f"stopped: the sweep's time limit ({timeout_s:g} s) ran out"
                for index in pending:
                    run.errors[index] = f"not run: the sweep's time limit ({timeout_s:g} s) ran out"
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=None if remaining is None else remaining)
            for ref in ready:
                index, began = in_flight.pop(ref)
                try:
                    outcome, value, seconds, gpu, host = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # raised outside fn (call() catches fn's own)
                    run.attempts.append(Attempt(index, "?", "?", time.perf_counter() - began, ERROR, str(exc)))
                    run.errors[index] = str(exc).splitlines()[0]
                    continue
                except ray.exceptions.RayError as exc:  # the worker or its node died: retry elsewhere
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    run.attempts.append(Attempt(index, "?", "?", time.perf_counter() - began, LOST, why))
                    if tries[index] < max_attempts:
                        pending.appendleft(index)
                    else:
                        run.errors[index] = f"lost {tries[index]} times (last: {why})"
                    continue
                ended = round(time.perf_counter() - start, 3)
                attempt = Attempt(index, gpu, host, seconds, outcome, "" if outcome == OK else value, ended)
                run.attempts.append(attempt)
                if gpu not in run.gpus:
                    run.gpus.append(gpu)
                if outcome == OK:
                    run.results[index] = value
                    if on_result is not None:
                        on_result(index, value, attempt)
                elif outcome == LOST and tries[index] < max_attempts:  # fn's own process died (ChunkLost)
                    pending.appendleft(index)
                elif outcome == LOST:
                    run.errors[index] = f"lost {tries[index]} times (last on {host} GPU {gpu}: {value})"
                else:
                    run.errors[index] = f"on {host} GPU {gpu}: {value}"
    finally:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
        run.wall_s = time.perf_counter() - start
    return run
