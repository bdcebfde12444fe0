"""Profile a sweep, from the cache when possible: the API notebooks and the benchmark CLI use.

:func:`profile_sweep` returns a :class:`ProfileResult` in one of three ways:

``"live"``
    A GPU and ncu are here: the entries not in the cache are profiled now, in
    one ncu process (:mod:`profiling.nsight.runner`), and stored (:mod:`profiling.nsight.recordings`).
    With ``gpus=`` the configs are split into one chunk per GPU, each profiled by its
    own ncu on its own GPU: with the ``"local"`` engine this process starts one ncu per
    GPU itself (``CUDA_VISIBLE_DEVICES`` and a ``TMPDIR`` of its own each), with ``"ray"``
    a Ray task per chunk does (on a cluster too). Each chunk's report is stored here as a
    profile of its own, so a chunk whose ncu, GPU or node dies is profiled again
    elsewhere and nothing finished is lost. Two ncu runs on two GPUs of one host overlap
    (measured: dev/scaleout/RESULTS.md); each run's fixed cost is its ncu and
    application start (about 5 s on the H200).
``"cache"``
    Every requested entry (backend x config x dtype, same preset, same kernel
    sources) is already stored for this GPU: returned at once, no ncu run.
``"recording"``
    No GPU or no ncu: the committed recordings of ``reports/h200/profiles/<op>/``
    are returned, always with ``replayed=True`` and a banner naming the GPU,
    date and commit they were made at. Missing entries are reported, never made up.

CLI, used to make the committed recordings on the H200::

    python -m profiling.nsight --op scale --preset roofline [--force]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import functools
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import commands, readable
from ..files import REPLAY_GPU, shown_path
from ..harness import device_state
from ..harness.ops import OPS, Config, dtype_name, get_op, parse_dtype
from ..provenance import collect, gpu_slug
from ..scaleout import gpus as scaleout_gpus
from ..scaleout.chunks import Attempt, ChunkLost, host_name, worker_gpu
from ..scaleout.engine import ENGINES, check_address, check_engine, expected_gpus, run_chunks
from ..scaleout.gpus import GpuSpec
from ..scaleout.threads import run_threads
from . import packing, recordings, runner, source
from .presets import PRESETS
from .reader import DamagedReportError, read_report
from .worker import SweepSpec

DEFAULT_TIMEOUT_S = runner.DEFAULT_TIMEOUT_S
WORKER_L2 = (
    "not read: the profiled kernels run in ncu's fresh worker process, whose context starts with no persisting-L2 "
    "carve-out or window (this process's own would say nothing of it)"
)
"""Why a profile's GPU state has clocks, power and temperature (device-wide, read here) but no L2 persisting state."""


class NoRecordingError(LookupError):
    """Replay found no recording for any requested entry."""


class MissingRecordingWarning(UserWarning):
    """Replay found recordings for some requested entries but not all; the rest are left out."""


class LaunchCountError(ValueError):
    """An entry holds a number of kernel launches other than the ``expected_launches`` of
    :func:`profile_sweep` (nsight-python #83: a region's kernels miscounted are a wrong sum, not a detail)."""


ExpectedLaunches = int | Mapping[str, int] | None
"""Kernel launches each entry must hold: one count for every backend, one per backend name, or None (any)."""


@dataclass
class ProfileResult:
    """Launch and advice tables of a sweep, with where they came from.

    ``source`` is ``"live"`` (something was profiled now), ``"cache"`` or
    ``"recording"`` (replayed without a GPU; then ``replayed`` is True).
    ``device`` is the GPU description of the newest report used (see
    :mod:`profiling.nsight.reader`), so ``profiling.analysis.roofline.analyze(result)`` works.
    ``missing`` labels requested entries that have no launch in the result.
    """

    op: str
    preset: str
    launches: pd.DataFrame
    advice: pd.DataFrame
    provenance: list[dict[str, Any]]
    replayed: bool
    source: str
    report_paths: list[Path]
    device: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    placement: str = ""
    """What ran where, when the sweep was spread over GPUs (:meth:`profiling.scaleout.chunks.ChunkRun.summary`)."""
    startup: list[dict[str, Any]] = field(default_factory=list)
    """Per GPU of a spread sweep, its time to first result (:meth:`profiling.scaleout.chunks.ChunkRun.startup`)."""

    @property
    def banner(self) -> str:
        """One line saying where the numbers come from (GPU, date, commit)."""
        made = "; ".join(
            dict.fromkeys(
                f"{p.get('gpu', '?')} on {str(p.get('date', '?'))[:10]} at commit {str(p.get('git_commit', '?'))[:7]}"
                for p in self.provenance
            )
        )
        if self.replayed:
            text = f"Replayed from recordings made on {made}"
        elif self.source == "cache":
            text = f"From the profile cache: made on {made}"
        else:
            text = f"Profiled live: {made}"
        if self.missing:
            shown = ", ".join(self.missing[:4]) + (
                f" and {len(self.missing) - 4} more" if len(self.missing) > 4 else ""
            )
            text += f" (nothing recorded for {shown})"
        return text + "."

    def summary(self) -> str:
        text = f"{self.banner}\n{len(self.launches)} launches of {self.op} ({self.preset}) in {self.wall_s:.2f} s."
        return f"{text}\n{self.placement}" if self.placement else text

    def __repr__(self) -> str:
        return f"<ProfileResult {self.summary()}>"


# ---------------------------------------------------------------------------
# Reading stored reports (cached in memory: a repeat returns in milliseconds)
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _read_cached(path: str, mtime_ns: int, size: int) -> Any:
    return read_report(path)


def read_tables(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(launches, advice, device) of one report, via :func:`profiling.nsight.reader.read_report`."""
    path = packing.readable(path)
    stat = path.stat()
    tables = _read_cached(str(path), stat.st_mtime_ns, stat.st_size)
    return tables.launches.copy(), tables.advice.copy(), dict(tables.device)


def _row_entries(df: pd.DataFrame, fields: Sequence[str]) -> list[recordings.Entry | None]:
    """The entry of each launch row (None where backend, dtype or a config field is missing)."""
    if df.empty or "backend" not in df or "dtype" not in df:
        return [None] * len(df)
    present = [f for f in fields if f in df]
    entries: list[recordings.Entry | None] = []
    for backend, dtype, *values in df[["backend", "dtype", *present]].itertuples(index=False, name=None):
        if any(pd.isna(v) for v in (backend, dtype, *values)):
            entries.append(None)
        else:
            entries.append(recordings.make_entry(backend, dict(zip(present, values, strict=True)), dtype))
    return entries


def _gather(
    hits: dict[recordings.Entry, recordings.StoredProfile], fields: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any], list[recordings.StoredProfile]]:
    """Launches (and their advice) of the wanted entries, newest profile first."""
    by_profile: dict[Path, tuple[recordings.StoredProfile, set[recordings.Entry]]] = {}
    for entry, profile in hits.items():
        by_profile.setdefault(profile.report, (profile, set()))[1].add(entry)
    ordered = sorted(by_profile.values(), key=lambda item: item[0].meta.get("created_ns", 0), reverse=True)
    launch_parts, advice_parts, devices, profiles = [], [], [], []
    for profile, entries in ordered:
        launches, advice, device = read_tables(profile.report)
        keep = pd.Series([e in entries for e in _row_entries(launches, fields)], index=launches.index, dtype=bool)
        launches = launches.loc[keep]
        if "launch" in advice and "launch" in launches:
            advice = advice[advice["launch"].isin(launches["launch"])]
        where = profile.provenance
        launch_parts.append(
            launches.assign(
                profile=profile.name, gpu_device=str(where.get("gpu_device", "")), host=where.get("host", "")
            )
        )
        advice_parts.append(advice.assign(profile=profile.name))
        devices.append(device)
        profiles.append(profile)
    launches = pd.concat(launch_parts, ignore_index=True) if launch_parts else pd.DataFrame()
    advice = pd.concat(advice_parts, ignore_index=True) if advice_parts else pd.DataFrame()
    return launches, advice, (devices[0] if devices else {}), profiles


def _report_problem(report: Path, claimed: set[recordings.Entry], fields: Sequence[str]) -> str | None:
    """Why ``report`` cannot back ``claimed`` (it is not whole, cannot be read, or lacks a launch of some entry), or
    None."""
    try:
        launches, _, _ = read_tables(report)
    except DamagedReportError as exc:
        return exc.problem
    except Exception as exc:  # any failure of NVIDIA's reader on a damaged file
        return f"it cannot be read ({type(exc).__name__}: {exc})"
    lacking = claimed - set(_row_entries(launches, fields))
    if not lacking:
        return None
    labels = sorted(recordings.entry_label(e) for e in lacking)
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return (
        f"it holds {len(launches)} launches but none for {len(lacking)} of the {len(claimed)} entries "
        f"it claims ({shown})"
    )


def _verified(
    hits: dict[recordings.Entry, recordings.StoredProfile], fields: Sequence[str]
) -> tuple[dict[recordings.Entry, recordings.StoredProfile], list[recordings.Entry]]:
    """``hits`` without the profiles whose report is damaged (one warning each), and the entries dropped."""
    problems: dict[Path, str | None] = {}
    for profile in hits.values():
        if profile.report not in problems:
            problems[profile.report] = problem = _report_problem(profile.report, profile.entries, fields)
            if problem is not None:
                recordings.warn_damaged(profile.report, problem, stacklevel=4)
    kept = {e: p for e, p in hits.items() if problems[p.report] is None}
    return kept, [e for e in hits if e not in kept]


# ---------------------------------------------------------------------------
# Live profiling
# ---------------------------------------------------------------------------


def gpu_available() -> bool:
    return torch.cuda.is_available()


def gpu_name() -> str:
    """The current CUDA device's name (``"NVIDIA H200"``)."""
    return torch.cuda.get_device_name()


def _spec_for(op: str, missing: Sequence[recordings.Entry], seed: int, warmup: int) -> SweepSpec:
    """The smallest product sweep covering the missing entries."""
    configs = list(dict.fromkeys(config for _, config, _ in missing))
    return SweepSpec(
        op=op,
        configs=[dict(c) for c in configs],
        dtypes=list(dict.fromkeys(d for _, _, d in missing)),
        backends=list(dict.fromkeys(b for b, _, _ in missing)),
        seed=seed,
        warmup=warmup,
    )


def _provenance(run_info: dict[str, Any], spec: SweepSpec, preset: str, src: str) -> dict[str, Any]:
    info = dict(collect())
    info.update(run_info)
    info.update(
        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        op=spec.op,
        backends=spec.backends,
        configs=spec.configs,
        dtypes=spec.dtypes,
        seed=spec.seed,
        warmup=spec.warmup,
        preset=preset,
        source_hash=src,
    )
    return info


def _settings(info: dict[str, Any]) -> dict[str, str]:
    """The ncu settings that belong to the cache key."""
    return {"clock_control": info["clock_control"], "cache_control": info["cache_control"]}


def _entries_in_report(report: Path, candidates: set[recordings.Entry], fields: Sequence[str]) -> set[recordings.Entry]:
    launches, _, _ = read_tables(report)
    return {e for e in _row_entries(launches, fields) if e in candidates}


def _profile_missing(
    profiles: recordings.ProfileStore,
    spec: SweepSpec,
    *,
    preset: str,
    src: str,
    fields: Sequence[str],
    run_kwargs: dict[str, Any],
) -> recordings.StoredProfile:
    """Run one ncu sweep for ``spec`` and store it; on a stop, store what finished, then re-raise."""
    ncu_path = runner.find_ncu()
    info = {
        "gpu": gpu_name(),
        "gpu_slug": profiles.gpu,
        "ncu_path": str(ncu_path),
        "ncu_version": runner.ncu_version(ncu_path),
        "clock_control": run_kwargs["clock_control"],
        "cache_control": run_kwargs["cache_control"],
        "gpu_device": (scaleout_gpus.discover() or ["0"])[0],
        "host": host_name(),
    }
    settings = _settings(info)
    tmp = profiles.temp_report_path()
    try:
        try:
            with device_state.around(l2=WORKER_L2) as info["device_state"]:  # kept by _keep_finished too
                run = runner.run_sweep(spec, tmp, preset=preset, ncu=ncu_path, **run_kwargs)
        except runner.PartialSweepError as exc:
            _keep_finished(profiles, spec, exc, info, preset=preset, src=src, fields=fields)
            raise
        info.update(ncu_command=run.command, kernels_profiled=run.kernels, ncu_wall_s=round(run.wall_s, 3))
        entries = [recordings.make_entry(b, c, d) for c, d in spec.cases for b in spec.backends]
        problem = _report_problem(tmp, set(entries), fields)
        if problem is not None:
            raise runner.NcuFailedError(
                f"ncu finished, but the report it wrote is damaged: {problem}. Nothing was stored, so the "
                "next call profiles these entries again; if this repeats, check the disk and the ncu version. "
                f"Last output:\n{runner._tail_text(run.output_tail)}",
                run.output_tail,
            )
        return profiles.save(
            tmp,
            entries,
            preset=preset,
            source_hash=src,
            provenance=_provenance(info, spec, preset, src),
            settings=settings,
        )
    finally:
        tmp.unlink(missing_ok=True)


def _keep_finished(
    profiles: recordings.ProfileStore,
    spec: SweepSpec,
    exc: runner.PartialSweepError,
    info: dict[str, Any],
    *,
    preset: str,
    src: str,
    fields: Sequence[str],
) -> None:
    """Store the entries an interrupted sweep finished (those the worker reported *and* the report holds)."""
    finished = {recordings.make_entry(b, c, d) for c, d in exc.finished for b in spec.backends}
    kept: set[recordings.Entry] = set()
    note = "nothing was kept"
    if finished and exc.report is not None:
        try:
            kept = _entries_in_report(exc.report, finished, fields)
        except Exception as read_error:
            note = f"nothing was kept (the partial report could not be read: {read_error})"
    if kept:
        info = {**info, "interrupted": True}
        saved = profiles.save(
            exc.report,
            kept,
            preset=preset,
            source_hash=src,
            provenance=_provenance(info, spec, preset, src),
            settings=_settings(info),
            complete=False,
        )
        note = f"kept {len(kept)} finished launches in {saved.report}; a re-run profiles only the rest"
    exc.args = (f"{exc.args[0]} {note[0].upper()}{note[1:]}.", *exc.args[1:])


# ---------------------------------------------------------------------------
# Live profiling spread over GPUs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NcuChunk:
    """One ncu run of a spread sweep: a part of the configs, on whichever GPU the engine gives it."""

    spec: SweepSpec
    preset: str
    clock_control: str
    cache_control: str
    timeout_s: float
    private_tmp: bool = False


LOST_WITH_NCU = (runner.WorkerCrashedError, runner.NcuFailedError, runner.NoGpuError)
"""Failures of a chunk's ncu or its application (killed, crashed, its GPU gone): the chunk is run on another GPU."""


def profile_chunk_on(chunk: NcuChunk, gpu: str | None, stop: threading.Event | None = None) -> dict[str, Any]:
    """Profile ``chunk`` with its own ncu on device ``gpu``; the report comes back as bytes.

    ``gpu`` None: the GPU of this process (``CUDA_VISIBLE_DEVICES`` as a Ray task gets it); else ncu
    gets ``CUDA_VISIBLE_DEVICES=gpu`` and a ``TMPDIR`` of its own. A run stopped half-way (time limit,
    ``stop``) returns what it finished, with ``complete`` False and its ``error``; a dead ncu or
    application raises :class:`~profiling.scaleout.chunks.ChunkLost`.
    """
    ncu_path = runner.find_ncu()
    # A private /tmp (unshare -m) would hide a chunk folder kept under /tmp.
    with tempfile.TemporaryDirectory(prefix="oasr-chunk-", dir="/var/tmp" if chunk.private_tmp else None) as tmp:
        report = Path(tmp) / "chunk.ncu-rep"
        env: dict[str, str] = {}
        if gpu is not None:
            (Path(tmp) / "tmp").mkdir()
            env = {"CUDA_VISIBLE_DEVICES": gpu, "TMPDIR": str(Path(tmp) / "tmp")}
        kwargs = dict(clock_control=chunk.clock_control, cache_control=chunk.cache_control, timeout_s=chunk.timeout_s)
        info: dict[str, Any] = {
            "ncu_path": str(ncu_path),
            "ncu_version": runner.ncu_version(ncu_path),
            "worker_gpu": scaleout_gpus.name_of(worker_gpu() if gpu is None else gpu),  # no CUDA context here
        }
        try:
            run = runner.run_sweep(
                chunk.spec, report, preset=chunk.preset, ncu=ncu_path, env=env, stop=stop,
                private_tmp=chunk.private_tmp, **kwargs,
            )  # fmt: skip
        except runner.PartialSweepError as exc:
            if exc.report is None or not exc.finished:
                raise
            return {**info, "report": exc.report.read_bytes(), "finished": exc.finished, "complete": False,
                    "error": str(exc).splitlines()[0]}  # fmt: skip
        except LOST_WITH_NCU as exc:
            raise ChunkLost(f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
        info.update(ncu_command=run.command, kernels_profiled=run.kernels, ncu_wall_s=round(run.wall_s, 3))
        return {**info, "report": report.read_bytes(), "finished": run.finished, "complete": True, "error": ""}


def profile_chunk(chunk: NcuChunk) -> dict[str, Any]:
    """Runs in a Ray task: :func:`profile_chunk_on` the task's GPU."""
    return profile_chunk_on(chunk, None)


def _split(spec: SweepSpec, parts: int) -> list[SweepSpec]:
    """``spec``'s configs dealt round-robin into ``parts`` sweeps (sweeps run small to large: this balances them).

    One part per GPU: each part pays its own ncu and application start (about 5 s on the H200),
    so more, smaller parts would only add start-ups.
    """
    parts = max(1, min(parts, len(spec.configs)))
    return [dataclasses.replace(spec, configs=spec.configs[j::parts]) for j in range(parts)]


def _profile_spread(
    profiles: recordings.ProfileStore,
    spec: SweepSpec,
    *,
    preset: str,
    src: str,
    fields: Sequence[str],
    run_kwargs: dict[str, Any],
    gpus: GpuSpec,
    engine: str,
    address: str | None,
) -> tuple[dict[recordings.Entry, recordings.StoredProfile], str, list[dict[str, Any]]]:
    """Profile ``spec`` in chunks over several GPUs, storing each chunk's report as it arrives.

    Returns the stored profile of every entry, the run's summary (what ran where) and its start-up rows; raises
    :class:`~profiling.nsight.runner.NcuFailedError` after storing what finished when a chunk failed.
    """
    check_address(engine, address)
    ids = scaleout_gpus.resolve(gpus) if engine == "local" else []
    settings = {"clock_control": run_kwargs["clock_control"], "cache_control": run_kwargs["cache_control"]}
    chunks = [
        NcuChunk(part, preset, **settings, timeout_s=run_kwargs["timeout_s"], private_tmp=run_kwargs["private_tmp"])
        for part in _split(spec, len(ids) if ids else expected_gpus(gpus, engine, address))
    ]
    stored: dict[recordings.Entry, recordings.StoredProfile] = {}
    problems: list[str] = []
    driver_gpu = gpu_name() if gpu_available() else ""

    def keep(index: int, result: dict[str, Any], attempt: Attempt) -> None:
        part = chunks[index].spec
        info = {k: v for k, v in result.items() if k not in ("report", "finished", "complete", "error", "worker_gpu")}
        info.update(
            gpu=result["worker_gpu"] or driver_gpu, gpu_slug=profiles.gpu, gpu_device=attempt.gpu, host=attempt.host,
            engine=engine, chunk=index, chunks=len(chunks), **settings,
        )  # fmt: skip
        finished = {recordings.make_entry(b, c, d) for c, d in result["finished"] for b in part.backends}
        tmp = profiles.temp_report_path()
        try:
            tmp.write_bytes(result["report"])
            kept = _entries_in_report(tmp, finished, fields)
            lacking = finished - kept
            if lacking:
                problems.append(f"chunk {index}: its report lacks {len(lacking)} of the launches it claims")
            if result["error"]:
                problems.append(f"chunk {index} on {attempt.host} GPU {attempt.gpu}: {result['error']}")
                info["interrupted"] = True
            if kept:
                saved = profiles.save(
                    tmp, kept, preset=preset, source_hash=src, provenance=_provenance(info, part, preset, src),
                    settings=settings, complete=bool(result["complete"]) and not lacking,
                )  # fmt: skip
                stored.update(dict.fromkeys(kept, saved))
        except Exception as exc:  # a damaged report: the rest of the sweep goes on
            problems.append(f"chunk {index}: its report could not be stored ({type(exc).__name__}: {exc})")
        finally:
            tmp.unlink(missing_ok=True)

    limit = run_kwargs["timeout_s"] * len(chunks) + 120  # a backstop: each ncu run has its own limit
    if engine == "local":  # the driver runs one ncu per GPU itself: no worker process in between
        run = run_threads(profile_chunk_on, chunks, ids, on_result=keep, timeout_s=limit)
    else:
        run = run_chunks(profile_chunk, chunks, gpus=gpus, engine=engine, address=address, on_result=keep,
                         timeout_s=limit)  # fmt: skip
    placement = run.summary()
    startup = run.startup()
    if run.errors or problems:
        failed = [*problems, *(f"chunk {i}: {e}" for i, e in sorted(run.errors.items()))]
        raise runner.NcuFailedError(
            f"{len(failed)} problem(s) in a sweep spread over GPUs: {'; '.join(failed)}. The {len(stored)} launches "
            f"that finished are stored, so a re-run profiles only the rest.\n{placement}"
        )
    return stored, placement, startup


# ---------------------------------------------------------------------------
# The public call
# ---------------------------------------------------------------------------


def profile_sweep(
    op: str,
    configs: Iterable[Config] | None = None,
    dtypes: Sequence[str] = ("float16",),
    backends: Sequence[str] = ("oasr", "torch"),
    preset: str = "roofline",
    force: bool = False,
    live: bool | None = None,
    progress: Callable[[runner.Progress], None] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    clock_control: str = "none",
    cache_control: str = "all",
    seed: int = 0,
    warmup: int = 3,
    reports_dir: Path | None = None,
    gpus: GpuSpec = None,
    engine: str = "local",
    address: str | None = None,
    private_tmp: bool = False,
    expected_launches: ExpectedLaunches = None,
) -> ProfileResult:
    """Profile ``op`` over ``configs x dtypes`` for each backend, or return stored profiles.

    Parameters
    ----------
    op : str
        Op name in the registry (:func:`profiling.harness.ops.get_op`).
    configs : iterable of dict, optional
        Defaults to the op's ``default_sweep``.
    dtypes, backends : sequence of str
        Every config runs for each dtype and backend.
    preset : {"timing", "roofline", "source", "full"}
        Metric preset (:mod:`profiling.nsight.presets`).
    force : bool
        Profile again even when the cache holds every entry.
    live : bool, optional
        True: profile (errors if there is no GPU or no ncu); False: replay the
        recordings; None: live when a GPU and ncu are present, else replay.
    progress : callable, optional
        Called with a :class:`profiling.nsight.runner.Progress` after each profiled launch
        and finished config (e.g. to drive a notebook progress bar).
    timeout_s : float
        Limit for the ncu run; on timeout the finished configs are kept.
    gpus : "all", int or sequence of device ids, optional
        Spread the configs over these GPUs, one ncu run per GPU (see
        :func:`profiling.scaleout.gpus.resolve`); None (default) profiles in one ncu run here.
    engine : {"local", "ray"}
        The :mod:`profiling.scaleout` engine when ``gpus`` is given.
    address : str, optional
        With ``engine="ray"``: the cluster to join (``"auto"``, ``"ray://head:10001"``).
    private_tmp : bool
        Run each ncu in its own mount namespace with an empty /tmp (``unshare -m``; root only).
        Off by default: on the 2xH200 host two ncu runs overlapped as well with a shared /tmp
        (measured: dev/scaleout/RESULTS.md).
    expected_launches : int or mapping of str to int, optional
        The kernel launches each entry must hold (e.g. ``{"oasr": 1}``: one fused kernel; a backend left out
        of the mapping may launch any number). Checked on live, cached and replayed results alike.

    Returns
    -------
    ProfileResult

    Raises
    ------
    LaunchCountError
        When an entry holds another number of launches than ``expected_launches`` says (all such entries named).
    """
    start = time.perf_counter()
    spec = get_op(op)
    configs = [dict(c) for c in (configs if configs is not None else spec.default_sweep)]
    dtypes = [dtype_name(parse_dtype(d)) for d in dtypes]
    unknown = sorted(set(backends) - set(spec.backends))
    if unknown or not configs:
        raise ValueError(f"op {op!r}: unknown backends {unknown} or no configs; backends: {sorted(spec.backends)}")
    wanted = [recordings.make_entry(b, c, d) for c in configs for d in dtypes for b in backends]
    fields = spec.config_fields
    check_engine(engine)
    expected = _expected_counts(expected_launches, backends)

    if live is None:
        live = gpu_available() and runner.ncu_available()
    if not live:
        result = _replay(op, preset, wanted, fields, reports_dir, expected)
        result.wall_s = time.perf_counter() - start
        return result

    if not gpu_available():
        raise runner.NoGpuError(
            "no CUDA GPU: live profiling needs an NVIDIA GPU (torch.cuda.is_available() is False). "
            "Replay the recordings in reports/ instead: profile_sweep(..., live=False) in Python, "
            "`python -m profiling.nsight ... --replay` on the command line."
        )
    profiles = recordings.ProfileStore(gpu_slug(gpu_name()), op, reports_dir)
    src = recordings.source_hash(spec)
    settings = {"clock_control": clock_control, "cache_control": cache_control}
    hits, missing = ({}, wanted) if force else profiles.lookup(wanted, preset, src, settings)
    hits, damaged = _verified(hits, fields)
    missing = [*missing, *damaged]
    placement, startup = "", []
    if missing:
        run_kwargs = dict(
            clock_control=clock_control, cache_control=cache_control, timeout_s=timeout_s, progress=progress,
            private_tmp=private_tmp,
        )  # fmt: skip
        sweep = _spec_for(op, missing, seed, warmup)
        if gpus is None:
            saved = _profile_missing(profiles, sweep, preset=preset, src=src, fields=fields, run_kwargs=run_kwargs)
            hits.update({entry: saved for entry in missing})
        else:
            spread, placement, startup = _profile_spread(
                profiles, sweep, preset=preset, src=src, fields=fields, run_kwargs=run_kwargs, gpus=gpus,
                engine=engine, address=address,
            )  # fmt: skip
            hits.update(spread)
    if preset == "source":
        for report in {p.report for p in hits.values()}:
            source.ensure_lines(report)
    result = _finish(
        op, preset, hits, [], fields, replayed=False, source="live" if missing else "cache", where=profiles,
        expected=expected,
    )  # fmt: skip
    result.placement, result.startup = placement, startup
    result.wall_s = time.perf_counter() - start
    return result


def _replay(
    op: str,
    preset: str,
    wanted: list[recordings.Entry],
    fields: Sequence[str],
    reports_dir: Path | None,
    expected: Mapping[str, int],
) -> ProfileResult:
    stored = recordings.ProfileStore(REPLAY_GPU, op, reports_dir)
    hits, missing = stored.lookup(wanted, preset, source_hash=None)
    hits, damaged = _verified(hits, fields)
    missing = [*missing, *damaged]
    if not hits:
        intact, broken = stored.scan()
        have = sorted({p.meta.get("preset", "?") for p in intact})
        left_out = "; damaged recordings there were left out, see the warnings" if damaged or broken else ""
        raise NoRecordingError(
            f"no recording of op {op!r} with preset {preset!r} for any requested entry in {stored.directory} "
            f"(presets recorded there: {', '.join(have) or 'none'}{left_out}). Without a GPU and ncu only "
            "recordings can be shown; make them on a GPU with `python -m profiling.nsight --op "
            f"{op} --preset {preset}` and commit reports/."
        )
    return _finish(
        op, preset, hits, missing, fields, replayed=True, source="recording", where=stored, stacklevel=4,
        expected=expected,
    )  # fmt: skip


def _finish(
    op: str,
    preset: str,
    hits: dict[recordings.Entry, recordings.StoredProfile],
    missing: list[recordings.Entry],
    fields: Sequence[str],
    *,
    replayed: bool,
    source: str,
    where: recordings.ProfileStore,
    stacklevel: int = 3,
    expected: Mapping[str, int] | None = None,
) -> ProfileResult:
    """Gather the stored launches; warn about every requested entry with no launch row, and raise
    :class:`LaunchCountError` for one whose launches are not the ``expected`` count of its backend."""
    launches, advice, device, used = _gather(hits, fields)
    counts = collections.Counter(_row_entries(launches, fields))
    found = set(counts)
    expected = expected or {}
    wrong = sorted(
        f"{recordings.entry_label(e)}: {n}" for e, n in counts.items() if e and n != expected.get(e[0], n)
    )  # a backend the caller gave no count for may launch any number
    if wrong:
        shown = "; ".join(wrong[:6]) + (f"; and {len(wrong) - 6} more" if len(wrong) > 6 else "")
        raise LaunchCountError(
            f"{op} ({preset}): expected {', '.join(f'{b} {n}' for b, n in expected.items())} kernel launch(es) per "
            f"entry, but {len(wrong)} entries hold another count ({shown}). A backend that launches more kernels "
            "than expected (an unfused path, a library's split) would be summed as if it were one; check the "
            "backend, or pass the count it really launches."
        )
    lacking = [*missing, *(e for e in hits if e not in found)]
    labels = [recordings.entry_label(e) for e in lacking]
    if lacking:
        warnings.warn(
            MissingRecordingWarning(
                f"no {preset!r} profile of {op} for {', '.join(labels)} in {where.directory}; "
                "those are left out of the result."
            ),
            stacklevel=stacklevel,
        )
    return ProfileResult(
        op=op,
        preset=preset,
        launches=launches,
        advice=advice,
        provenance=[p.provenance for p in used],
        replayed=replayed,
        source=source,
        report_paths=[p.report for p in used],
        device=device,
        missing=labels,
    )


def _expected_counts(expected: ExpectedLaunches, backends: Sequence[str]) -> dict[str, int]:
    """``expected_launches`` as {backend: count} (empty: no check); TypeError or ValueError naming the argument."""
    if expected is None:
        return {}
    if isinstance(expected, Mapping):
        counts = dict(expected)
    elif isinstance(expected, int) and not isinstance(expected, bool):
        counts = dict.fromkeys(backends, expected)
    else:
        raise TypeError(f"expected_launches must be an int or a mapping of backend to int, not {type(expected)}")
    for backend, count in counts.items():
        if backend not in backends:
            raise ValueError(f"expected_launches names {backend!r}, which is not profiled ({', '.join(backends)})")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"expected_launches[{backend!r}] must be an int >= 1, not {count!r}")
    return counts


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

TABLE_COLUMNS = (
    "backend", "dtype", "kernel", "duration_s", "dram_bytes", "flop", "dram_bw_bytes_per_s", "pct_dram_peak", "profile",
    "flagged",
)  # fmt: skip


def op_table() -> str:
    """The ops with their config fields and backends (``--list``)."""
    lines = [f"{'op':<20} {'config fields':<28} backends"]
    lines += [f"{name:<20} {','.join(spec.config_fields):<28} {', '.join(spec.backends)}" for name, spec in OPS.items()]
    return "\n".join(lines)


def _check_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the parser (standard library only, :mod:`profiling.commands`) leaves to the loaded modules."""
    if args.op not in OPS:
        parser.error(f"argument --op: invalid choice: {args.op!r} (choose from {', '.join(OPS)})")
    if args.preset not in PRESETS:
        parser.error(f"argument --preset: invalid choice: {args.preset!r} (choose from {', '.join(PRESETS)})")
    if args.engine not in ENGINES:
        parser.error(f"argument --engine: invalid choice: {args.engine!r} (choose from {', '.join(ENGINES)})")
    fields = list(get_op(args.op).config_fields)
    for config in args.config or ():
        if sorted(config) != sorted(fields):
            parser.error(
                f"argument --config: {','.join(f'{k}={v}' for k, v in config.items())} does not give "
                f"{args.op}'s fields {','.join(fields)}; expected {','.join(f'{f}=INT' for f in fields)}"
            )
    if args.address is not None and args.engine != "ray":
        parser.error("argument --address: joins a Ray cluster, so it needs --engine ray")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m profiling.nsight``: profile (or replay) an op's sweep and print its launches for people."""
    parser = commands.nsight_parser()
    args = parser.parse_args(argv)
    if args.list:
        print(op_table())
        return 0
    _check_names(parser, args)
    if args.live and not gpu_available():
        replay = f"python -m profiling.nsight --op {args.op} --preset {args.preset} --replay"
        print(
            "error: --live needs an NVIDIA GPU and there is none here (torch.cuda.is_available() is False); "
            f"replay the recordings in reports/ instead: {replay} (or leave out --live).",
            file=sys.stderr,
        )
        return 1
    try:
        result = profile_sweep(
            args.op,
            configs=args.config,
            dtypes=args.dtypes.split(","),
            backends=args.backends.split(","),
            preset=args.preset,
            force=args.force,
            live=args.live,
            progress=runner.print_progress,
            timeout_s=DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout,
            gpus=args.gpus,
            engine=args.engine,
            address=args.address,
            expected_launches=args.expect_launches,
        )
    except (runner.NcuError, NoRecordingError, ValueError, TypeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, runner.NcuNotFoundError):
            print(f"On the command line: python -m profiling.nsight --op {args.op} --replay", file=sys.stderr)
        return 1
    fields = list(get_op(args.op).config_fields)
    columns = [c for c in (*TABLE_COLUMNS[:2], *fields, *TABLE_COLUMNS[2:]) if c in result.launches]
    print(readable.text(result.launches[columns]) if columns else result.launches)
    print(result.summary())
    for path in result.report_paths:
        print(f"report: {shown_path(path if path.is_file() else packing.packed(path))}")  # the file there is
    return 0


if __name__ == "__main__":
    sys.exit(main())
