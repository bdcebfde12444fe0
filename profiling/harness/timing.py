"""GPU timing: the one implementation that benchmarks, notebooks and the profiler share.

Two methods, both excluding warm-up launches:

``"graph"`` (default)
    Capture many launches into one CUDA graph, replay it ``iters`` times, each
    replay timed with CUDA events; a sample is replay time / launches. Host
    launch overhead is gone, so even microsecond kernels are timed on the GPU.
``"events"``
    One pair of CUDA events around each launch. Kernels shorter than the host's
    launch overhead are timed as the gap between launches; optionally the L2 is
    flushed before each launch.

Repeated launches on the same tensors would measure the L2 (60 MB on an H200)
rather than DRAM, so callers pass a list of callables, one per input set, and
the launches cycle through them: :func:`rotation_sets` says how many sets make
the working set exceed the L2, and :func:`op_input_sets` builds them for an op
of the registry.

Outputs rotate too. An op that writes into ``out=`` of its input set does so by
itself; an op that allocates its output (``F.silu(x)``) would get from the caching
allocator the block its previous output just freed, still in the L2, and save the
write-back that ``out=`` ops pay. So each timing loop keeps the results of the last
``len(fns)`` launches alive: allocated outputs then cycle through as many blocks as
there are input sets, like ``out=`` tensors (measured: dev/harness/RESULTS.md).

Backends are compared with :func:`time_interleaved`: each is timed in turn, for
several rounds, and its samples pooled. A GPU's speed drifts within a run (clocks,
what ran just before), and timing one backend after the other would hand the drift
to whichever came first. A first round, discarded, absorbs the slow start after the
reference check (on the H200, 12% at 1 GiB; measured: dev/harness/RESULTS.md).

oasr's gemm autotuner (``OASR_AUTOTUNE=1``, ``oasr/jit/gemm_tune.py``) times its candidates with
:func:`candidate_seconds`, registered as its timer when this module is imported (the library does not import
the profiler).

Every function that touches the GPU raises :class:`NoGPUError` (a
``RuntimeError``) at once when CUDA is unavailable.
"""

from __future__ import annotations

import collections
import functools
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

import numpy as np
import torch

from oasr.jit import gemm_tune

from .ops import Config, Inputs, OpSpec, parse_dtype

Method = Literal["graph", "events"]

NOISY_IQR_REL = 0.10
"""A result is *noisy* when its interquartile range exceeds this fraction of its median."""
GRAPH_TARGET_MS = 2.0
"""The graph method sizes one graph to about this long, so replay overhead stays below 1%."""
MAX_GRAPH_LAUNCHES = 4096
MAX_INPUT_SETS = 512


class NoGPUError(RuntimeError):
    """CUDA is unavailable; the message is one sentence starting ``no CUDA GPU:``."""


class NoisyTimingWarning(UserWarning):
    """A timing whose spread (IQR / median) exceeds :data:`NOISY_IQR_REL`."""


def require_cuda(what: str = "GPU timing") -> None:
    """Raise :class:`NoGPUError` unless torch sees a CUDA device."""
    if not torch.cuda.is_available():
        raise NoGPUError(f"no CUDA GPU: {what} needs an NVIDIA GPU, and torch.cuda.is_available() is False.")


def run_gpu_script(main: Callable[[], int], script: str) -> NoReturn:
    """Exit with ``main()``'s code; without a GPU, with the one-line :class:`NoGPUError` message, not a traceback."""
    try:
        code = main()
    except NoGPUError as error:
        sys.exit(f"{Path(script).name}: {error}")
    sys.exit(code)


@dataclass(frozen=True)
class TimingResult:
    """Per-launch times of one timed function, in milliseconds.

    Attributes
    ----------
    samples_ms : tuple[float, ...]
        One per-launch time per sample (graph replay / launches, or one event pair).
    method : {"graph", "events"}
        How the samples were taken.
    launches_per_sample : int
        Launches averaged into each sample (1 for ``"events"``).
    input_sets : int
        Number of callables (input sets) the launches cycled through.
    """

    samples_ms: tuple[float, ...]
    method: Method
    launches_per_sample: int
    input_sets: int

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.samples_ms, q))

    @property
    def median_ms(self) -> float:
        return self.percentile(50)

    @property
    def p10_ms(self) -> float:
        return self.percentile(10)

    @property
    def p90_ms(self) -> float:
        return self.percentile(90)

    @property
    def iqr_ms(self) -> float:
        return self.percentile(75) - self.percentile(25)

    @property
    def iqr_rel(self) -> float:
        """Interquartile range as a fraction of the median."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def std_ms(self) -> float:
        return float(np.std(self.samples_ms, ddof=1)) if len(self.samples_ms) > 1 else 0.0

    @property
    def noisy(self) -> bool:
        return self.iqr_rel > NOISY_IQR_REL

    def __iter__(self) -> Iterator[float]:
        """Unpack as ``(median_ms, std_ms)``, the pair ``bench_fn`` callers of the kernel guide expect."""
        return iter((self.median_ms, self.std_ms))

    def __str__(self) -> str:
        return (
            f"{self.median_ms:.4f} ms median (p10 {self.p10_ms:.4f}, p90 {self.p90_ms:.4f}, "
            f"IQR {100 * self.iqr_rel:.1f}%, {len(self.samples_ms)} samples, {self.method} "
            f"x{self.launches_per_sample}, {self.input_sets} input sets)"
        )


def time_fn(
    fns: Callable[[], object] | Sequence[Callable[[], object]],
    *,
    warmup: int = 5,
    iters: int = 30,
    method: Method = "graph",
    flush_l2: bool = False,
    launches: int | None = None,
) -> TimingResult:
    """Time zero-argument GPU callables, cycling through them launch by launch.

    Parameters
    ----------
    fns : callable or sequence of callables
        The same op on different input sets (see :func:`op_input_sets`).
    warmup : int
        Launches before timing (at least 1: the first call may JIT-compile).
    iters : int
        Samples: graph replays (``"graph"``) or single launches (``"events"``).
    method : {"graph", "events"}
        See the module docstring.
    flush_l2 : bool
        Overwrite the L2 before each launch (``"events"`` only; graphs rotate inputs instead).
    launches : int, optional
        Launches per graph; by default enough for about :data:`GRAPH_TARGET_MS`.

    Returns
    -------
    TimingResult
        Warns :class:`NoisyTimingWarning` when the result is noisy.

    Raises
    ------
    NoGPUError
        CUDA is unavailable.
    ValueError
        Bad arguments.
    RuntimeError
        ``fns`` cannot be captured into a CUDA graph (use ``method="events"``).
    """
    fns = [fns] if callable(fns) else list(fns)
    if not fns:
        raise ValueError("time_fn needs at least one callable")
    if warmup < 1 or iters < 1:
        raise ValueError(f"warmup and iters must be >= 1 (got {warmup}, {iters})")
    if method not in ("graph", "events"):
        raise ValueError(f"method must be 'graph' or 'events', not {method!r}")
    if flush_l2 and method == "graph":
        raise ValueError("flush_l2 needs method='events'; with graphs, rotate input sets instead")
    require_cuda("time_fn")

    _warm_up(fns, warmup)
    if method == "events":
        samples, per_sample = _time_events(fns, iters, flush_l2), 1
    else:
        per_sample = launches or _graph_launches(fns)
        samples = _time_graph(fns, iters, per_sample)
    result = TimingResult(tuple(samples), method, per_sample, len(fns))
    if result.noisy:
        warnings.warn(f"noisy timing: IQR is {100 * result.iqr_rel:.0f}% of the median", NoisyTimingWarning, 2)
    return result


def time_interleaved(
    fns: Mapping[str, Callable[[], object] | Sequence[Callable[[], object]]],
    *,
    rounds: int = 3,
    warmup: int = 5,
    iters: int = 30,
    method: Method = "graph",
    discarded_rounds: int = 1,
    before_each: Callable[[], object] | None = None,
) -> dict[str, TimingResult]:
    """Time several backends of one op in turn, ``rounds`` times, pooling each one's samples.

    Parameters
    ----------
    fns : mapping of str to callable or sequence of callables
        Per backend name, its callables (one per input set, as for :func:`time_fn`).
    rounds : int
        Passes over the backends; each pass times every backend once, in order.
    warmup, iters, method
        As for :func:`time_fn`; ``iters`` samples per backend in all, split over the rounds.
    discarded_rounds : int
        Rounds run first, the same way, and dropped.
    before_each : callable, optional
        Run before every timing of every backend, so that each starts from the state it
        leaves (e.g. the L2 after the float64 check of a large op).

    Returns
    -------
    dict[str, TimingResult]
        Per backend, the kept rounds' samples (launches per sample fixed by its first round).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1 (got {rounds})")
    if discarded_rounds < 0:
        raise ValueError(f"discarded_rounds must be >= 0 (got {discarded_rounds})")
    per_round = max(1, math.ceil(iters / rounds))
    pooled: dict[str, list[TimingResult]] = {name: [] for name in fns}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyTimingWarning)  # judged on the pooled samples below
        for _ in range(discarded_rounds + rounds):
            for name, backend_fns in fns.items():
                if before_each is not None:
                    before_each()
                first = pooled[name][0] if pooled[name] else None
                launches = first.launches_per_sample if first and method == "graph" else None
                pooled[name].append(
                    time_fn(backend_fns, warmup=warmup, iters=per_round, method=method, launches=launches)
                )
    results = {
        name: TimingResult(
            tuple(s for r in parts[discarded_rounds:] for s in r.samples_ms),
            method,
            parts[0].launches_per_sample,
            parts[0].input_sets,
        )
        for name, parts in pooled.items()
    }
    noisy = [name for name, result in results.items() if result.noisy]
    if noisy:
        warnings.warn(f"noisy timing of {', '.join(noisy)}", NoisyTimingWarning, 2)
    return results


def _event_pair() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def _warm_up(fns: list[Callable[[], object]], warmup: int) -> None:
    # On a side stream, as torch recommends before graph capture (lazy handles, workspaces).
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(warmup):
            fns[i % len(fns)]()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()


def _graph_launches(fns: list[Callable[[], object]]) -> int:
    """Launches per graph: every input set once, and about GRAPH_TARGET_MS of work."""
    count = min(len(fns), 16)
    start, end = _event_pair()
    start.record()
    for fn in fns[:count]:
        fn()
    end.record()
    end.synchronize()
    per_launch_ms = max(start.elapsed_time(end) / count, 1e-4)
    return max(len(fns), min(MAX_GRAPH_LAUNCHES, math.ceil(GRAPH_TARGET_MS / per_launch_ms)))


def _time_graph(fns: list[Callable[[], object]], iters: int, launches: int) -> list[float]:
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            recent = collections.deque(maxlen=len(fns))  # see "Outputs rotate too" above
            for i in range(launches):
                recent.append(fns[i % len(fns)]())
            del recent
    except RuntimeError as error:
        raise RuntimeError(f"CUDA graph capture failed ({error}); time it with method='events'") from error
    graph.replay()  # uploads the graph
    torch.cuda.synchronize()
    pairs = [_event_pair() for _ in range(iters)]
    for start, end in pairs:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / launches for start, end in pairs]


def _time_events(fns: list[Callable[[], object]], iters: int, flush_l2: bool) -> list[float]:
    flush = _flush_buffer(torch.cuda.current_device()) if flush_l2 else None
    pairs = [_event_pair() for _ in range(iters)]
    recent = collections.deque(maxlen=len(fns))  # see "Outputs rotate too" above
    for i, (start, end) in enumerate(pairs):
        if flush is not None:
            flush.zero_()
        start.record()
        recent.append(fns[i % len(fns)]())
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


@functools.cache
def _flush_buffer(device: int) -> torch.Tensor:
    return torch.empty(2 * l2_cache_bytes(device), dtype=torch.uint8, device=f"cuda:{device}")


def l2_cache_bytes(device: int | None = None) -> int:
    """The L2 size of a CUDA device (the current one by default)."""
    require_cuda("l2_cache_bytes")
    return int(torch.cuda.get_device_properties(device).L2_cache_size)


def rotation_sets(
    bytes_per_set: int, *, l2_bytes: int | None = None, factor: float = 2.0, max_sets: int = MAX_INPUT_SETS
) -> int:
    """How many input sets make a rotation's working set exceed ``factor`` x the L2.

    Parameters
    ----------
    bytes_per_set : int
        Bytes one launch touches (e.g. ``op.work(config, dtype).bytes``).
    l2_bytes : int, optional
        L2 size; the current device's when omitted (then CUDA is needed).
    factor : float
        Working set / L2 to reach.
    max_sets : int
        Cap: the tiniest tensors stay L2-resident rather than need thousands of sets.

    Returns
    -------
    int
        Between 1 and ``max_sets``.
    """
    l2 = l2_cache_bytes() if l2_bytes is None else l2_bytes
    return max(1, min(max_sets, math.ceil(factor * l2 / max(bytes_per_set, 1))))


def op_input_sets(
    op: OpSpec, config: Config, dtype: str | torch.dtype, *, device: str = "cuda", max_sets: int = MAX_INPUT_SETS
) -> list[Inputs]:
    """Input sets for ``op`` (seeds 0, 1, ...), as many as :func:`rotation_sets` asks for."""
    dtype = parse_dtype(dtype)
    count = rotation_sets(op.work(config, dtype).bytes, max_sets=max_sets)
    return [op.make_inputs(config, dtype, torch.device(device), seed) for seed in range(count)]


def measure_copy_bandwidth(nbytes: int = 256 * 2**20) -> float:
    """Device-to-device copy bandwidth in TB/s (read + write bytes / time), cached per device."""
    require_cuda("measure_copy_bandwidth")
    return _copy_bandwidth(torch.cuda.current_device(), nbytes)


def settle(fns: Sequence[Callable[[], object]], seconds: float) -> None:
    """Run ``fns`` in turn, back to back and untimed, for about ``seconds`` of wall time."""
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        recent = collections.deque(maxlen=len(fns))  # as in the timing loops
        for i in range(max(10, len(fns))):
            recent.append(fns[i % len(fns)]())
        torch.cuda.synchronize()


def _best_median_ms(fn: Callable[[], object], repeats: int = 3) -> float:
    """The fastest of a few medians: a ceiling is what the GPU can do, not its average."""
    settle([fn], 0.5)  # an idle GPU needs that long to reach full clocks
    return min(time_fn(fn, warmup=3, iters=30).median_ms for _ in range(repeats))


@functools.cache
def _copy_bandwidth(device: int, nbytes: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    dst = torch.empty_like(src)
    return 2 * nbytes / (_best_median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e12


def measure_cublas_tflops(n: int = 8192, dtype: str | torch.dtype = torch.bfloat16) -> float:
    """cuBLAS rate of an ``n`` x ``n`` x ``n`` matmul in TFLOP/s (2 n^3 / time), cached per device."""
    require_cuda("measure_cublas_tflops")
    return _cublas_tflops(torch.cuda.current_device(), n, parse_dtype(dtype))


@functools.cache
def _cublas_tflops(device: int, n: int, dtype: torch.dtype) -> float:
    a, b, c = (torch.randn(n, n, dtype=dtype, device=f"cuda:{device}") for _ in range(3))
    return 2 * n**3 / (_best_median_ms(lambda: torch.matmul(a, b, out=c)) * 1e-3) / 1e12


def eager_seconds(fns: Sequence[Callable[[], object]], *, calls: int = 200, warmup: int = 10) -> float:
    """Host wall time per eager call, in seconds: ``calls`` calls back to back (cycling through the
    input sets, as the graph timing does), then one synchronize, over ``calls``.

    What a caller running the op outside a CUDA graph pays per call: Python, argument checks
    and the launch for a kernel shorter than them, the kernel's device time for a longer one.
    Works on CPU-only machines too (no synchronization then), as :func:`host_overhead_us`.
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
    for i in range(warmup):
        fns[i % len(fns)]()
    sync()
    recent = collections.deque(maxlen=len(fns))  # outputs rotate, as in the graph timing
    start = time.perf_counter()
    for i in range(calls):
        recent.append(fns[i % len(fns)]())
    sync()
    return (time.perf_counter() - start) / calls


def host_overhead_us(fn: Callable[[], object], *, calls: int = 100, warmup: int = 5) -> float:
    """CPU time per call in microseconds, calls issued back to back without synchronizing.

    The launches queue up on the GPU, so this is the host's cost of issuing one
    call (argument checks, dispatch, launch). Keep ``calls`` below the driver's
    launch queue depth (about 1000), beyond which the host waits for the GPU.
    Works on CPU-only machines too (no synchronization then).
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    sync()
    return elapsed / calls * 1e6


def candidate_seconds(candidates: Mapping[str, Callable[[], object]]) -> dict[str, float]:
    """Per candidate (a zero-argument callable), its median per-launch time in seconds, timed interleaved
    (:func:`time_interleaved`, CUDA graphs): oasr's gemm autotuner's timer. The candidates run on the call's own
    operands, so both see the same (hot) L2."""
    return {name: result.median_ms * 1e-3 for name, result in time_interleaved(candidates).items()}


gemm_tune.TIMER = candidate_seconds
