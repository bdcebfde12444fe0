"""The gemm autotuner (``OASR_AUTOTUNE=1``, off by default): oasr's candidates against cuBLAS's, timed once.

Once per (GPU, dtype, epilogue, shape bucket) the first call times the candidates of
:func:`oasr.jit.gemm_plan.candidates` (cuBLAS through torch, the oasr configuration the rule would run, and for a
bare product of long K the long-K configurations) on its own operands, which stand for the bucket, and keeps the
fastest. Results
live in one JSON file per GPU in the JIT cache folder (``<OASR_JIT_DIR>/gemm_tune/<gpu>.json``), each entry keyed by
its bucket and stamped with :func:`source_hash` (the kernels' and the rule's sources, torch's and CUDA's versions:
what can change the winner). A damaged file or entry, or one of other sources, is ignored and rewritten; writes hold
an ``fcntl`` lock and replace the file atomically, so processes tuning at once all finish and leave one entry a
bucket. Off, on CPU, while a CUDA graph is captured, or without a timer, the rule decides.

The timer is the repository's one timing implementation, ``profiling.harness.timing`` (the library does not import
the profiler): importing it registers :func:`profiling.harness.timing.candidate_seconds` as :data:`TIMER`.

Buckets: M to the nearest power of two in [1, 65536], N and K to the nearest of :data:`NK_BUCKETS` by ratio
(log distance), so neighbouring sizes share a bucket and none is a cliff.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import math
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from . import cutlass, env
from .gemm_plan import BACKENDS, GemmPlan, candidates

NK_BUCKETS = (256, 384, 512, 640, 768, 1024, 1536, 2048, 2560, 3072, 4096)
M_MAX = 65536
Timer = Callable[[Mapping[str, Callable[[], object]]], Mapping[str, float]]
"""``timer(candidates)``: per candidate name, its time in seconds (a median of many launches)."""
TIMER: Timer | None = None
"""The timer the tuner uses; ``profiling.harness.timing`` sets it when imported."""
_MEMO: dict[tuple[str, str], dict] = {}
"""Entries read or written by this process, by (file, key): a call reads the file once per bucket."""
_SOURCES = (
    ("csrc", "gemm*"),
    ("csrc", "bmm*"),
    ("csrc", "activation*"),
    ("include/oasr/gemm", "*.cuh"),
    ("include/oasr", "activation.cuh"),
    ("include/oasr/common", "*.cuh"),
)
"""(folder under the source root, pattern): the kernels the candidates run, and what they include of oasr's."""


def enabled() -> bool:
    """``OASR_AUTOTUNE=1`` (read each call, so a test or a session can switch it)."""
    return os.environ.get("OASR_AUTOTUNE", "0") == "1"


def bucket_m(m: int) -> int:
    """The power of two nearest ``m`` (by ratio) in [1, :data:`M_MAX`]."""
    return 1 << min(max(round(math.log2(max(m, 1))), 0), M_MAX.bit_length() - 1)


def bucket_nk(size: int) -> int:
    """The size of :data:`NK_BUCKETS` nearest ``size`` by ratio (below the first: the first; above: the last)."""
    return min(NK_BUCKETS, key=lambda b: abs(math.log(max(size, 1) / b)))


def bucket_key(plan: GemmPlan, dtype: str) -> str:
    """E.g. ``gemm/bfloat16/bias+silu/m8192_n768_k3072`` (bmm: ``..._b64``, its batch bucketed as M is; a problem
    with the long-K candidates: ``..._long-k``, since the K bucket of 2048 also holds K below them)."""
    p = plan.problem
    shape = f"m{bucket_m(p.m)}_n{bucket_nk(p.n)}_k{bucket_nk(p.k)}"
    if p.op == "bmm":
        shape += f"_b{bucket_m(p.batch)}"
    if len(candidates(plan)) > len(BACKENDS):
        shape += "_long-k"
    return f"{p.op}/{dtype}/{p.epilogue}/{shape}"


@functools.cache
def source_hash() -> str:
    """The candidates' sources, the rule's, CUTLASS's version, torch's and its CUDA's (cuBLAS's): what can change the
    winner. An entry of another hash is stale."""
    import torch  # (oasr.jit imports torch only where a rule needs it)

    digest = hashlib.sha256(f"{torch.__version__}|{torch.version.cuda}|{cutlass.flags()}".encode())
    for folder, pattern in _SOURCES:
        for path in sorted((env.OASR_SOURCE_ROOT / folder).glob(pattern)):
            digest.update(f"{folder}/{path.name}".encode() + path.read_bytes())
    for module in ("gemm_config.py", "gemm_plan.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    return digest.hexdigest()[:16]


def cache_file(gpu: str) -> Path:
    """The tuner's file for ``gpu`` (its name, e.g. "NVIDIA H200", made a file name)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu).strip("_") or "gpu"
    return env.jit_cache_dir() / "gemm_tune" / f"{name}.json"


def _valid(entry: object, gpu: str, names: object) -> bool:
    """An entry of this GPU and these sources, naming one of the candidates ``names`` and the seconds of each."""
    return (
        isinstance(entry, dict)
        and entry.get("choice") in names
        and entry.get("gpu") == gpu
        and entry.get("source") == source_hash()
        and isinstance(entry.get("seconds"), dict)
        and all(isinstance(entry["seconds"].get(name), (int, float)) for name in names)
    )


def _read(path: Path) -> dict:
    """The file's entries; a missing or damaged file reads as none (the next write replaces it)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _store(path: Path, key: str, entry: dict, gpu: str) -> dict:
    """Write ``entry`` under ``key`` unless a valid one landed meanwhile (another process tuned it): that one is
    kept, so every process ends on one entry. Returns the entry kept."""
    with _locked(path):
        data = _read(path)
        if _valid(data.get(key), gpu, entry["seconds"]):
            return data[key]
        data[key] = entry
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(data, file, indent=1, sort_keys=True)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    return entry


def cached(plan: GemmPlan, dtype: str, gpu: str) -> GemmPlan | None:
    """The tuned plan of ``plan``'s bucket if one is recorded for ``gpu`` and these sources, else None."""
    path, key = cache_file(gpu), bucket_key(plan, dtype)
    entry = _MEMO.get((str(path), key))
    if entry is None:
        entry = _read(path).get(key)
        if not _valid(entry, gpu, candidates(plan)):
            return None
        _MEMO[(str(path), key)] = entry
    return _tuned_plan(plan, entry, key)


def tuned(
    plan: GemmPlan, dtype: str, gpu: str, runs: Mapping[str, Callable[[], object]], timer: Timer | None = None
) -> GemmPlan:
    """``plan`` as the tuner decides it on ``gpu``: its bucket's recorded entry, or (none valid) the candidates
    (per name of :func:`~oasr.jit.gemm_plan.candidates`, a callable running it) timed now by ``timer`` (default
    :data:`TIMER`) and recorded. Without a timer, ``plan`` itself, and a warning. (Candidate "oasr" is the rule's
    configuration of each call: of the bucket's shapes, the one first timed stands for them.)"""
    found = cached(plan, dtype, gpu)
    if found is not None:
        return found
    timer = timer or TIMER
    if timer is None:
        warnings.warn(
            "OASR_AUTOTUNE=1 but no timer is registered (import profiling.harness.timing, the repository's timing, "
            "to register it): the rule decides",
            RuntimeWarning,
            stacklevel=3,
        )
        return plan
    timed = timer({name: runs[name] for name in candidates(plan)})
    seconds = {name: float(timed[name]) for name in candidates(plan)}
    entry = {"choice": min(seconds, key=seconds.__getitem__), "seconds": seconds, "gpu": gpu, "source": source_hash()}
    path, key = cache_file(gpu), bucket_key(plan, dtype)
    entry = _store(path, key, entry, gpu)
    _MEMO[(str(path), key)] = entry
    return _tuned_plan(plan, entry, key)


def _tuned_plan(plan: GemmPlan, entry: dict, key: str) -> GemmPlan:
    named = candidates(plan)
    times = ", ".join(
        f"{'cuBLAS' if backend == 'cublas' else config.name} {1e6 * entry['seconds'][name]:.2f} us"
        for name, (backend, config) in named.items()
    )
    why = f"timed on this GPU for bucket {key}: {times}\n(OASR_AUTOTUNE=1; the rule's band was {plan.band!r})."
    backend, config = named[entry["choice"]]
    return replace(plan.with_backend(backend, "autotune", why), config=config)


def forget() -> None:
    """Drop this process's memo of entries (tests; a file edited by hand)."""
    _MEMO.clear()
