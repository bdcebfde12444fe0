"""Profile a region, not a kernel: every kernel a call launches, in one ncu run, or the region's recording.

:func:`profile_region` runs ``fn`` once inside the NVTX range ``region:<name>`` (domain ``oasr``) of a worker
process (:mod:`profiling.nsight.region_worker`) that ncu launches with ``--nvtx --nvtx-include
"oasr@region:<name>/"``; the run goes through :func:`profiling.nsight.runner.run_sweep`, so its process handling and
errors (no ncu, no GPU, counters not permitted, nothing profiled, a crashed worker, a timeout) are the sweep's.
Because ncu starts the process, ``fn`` travels by reference: a ``"module:qualname"`` string, a module-level function,
or a ``functools.partial`` of one with picklable arguments (:func:`portable_call`).

Each launch is named after the innermost op that launched it: oasr ops mark their calls with NVTX ranges when
``OASR_NVTX=1`` (:mod:`oasr.api_logging`; the worker's environment sets it), torch ops through
``torch.autograd.profiler.emit_nvtx``. The result's ``launches`` are :mod:`profiling.nsight.reader`'s table plus
``region_op``; ``region_wall_s`` is the worker's median eager call, timed under ncu outside the profiled range (an
upper bound: ncu intercepts those launches). :func:`profiling.analysis.region.region_table` makes the tidy table.

Recordings live beside the op sweeps' but apart, ``reports/<gpu>/regions/<name>/`` (a
:class:`~profiling.nsight.recordings.ProfileStore` of kind ``regions``); without a GPU the recording is replayed,
labelled so, and its absence is a :class:`~profiling.nsight.sweep.NoRecordingError` naming the command that makes
one. With ``preset="full"`` (``ncu --set full``) ``metrics`` holds every metric of every launch, long-format
(:func:`metrics_frame`).

CLI, which makes the built-in regions' recordings on a GPU (``scripts/h200_session.sh``)::

    python -m profiling.nsight.region conformer_layer_oasr conformer_layer_torch --live [--shape d=256,b=64,t=250,k=15]
    python -m profiling.nsight.region --fn package.module:function --name my_region
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import math
import pickle
import pkgutil
import re
import sys
import tempfile
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import commands, readable
from ..files import REPLAY_GPU, shown_path
from ..harness import regions
from ..harness.ops import dtype_name
from ..provenance import collect, gpu_slug
from . import recordings, runner
from .naming import DOMAIN, SWEEP_RANGE, parse_range_name
from .presets import get_preset
from .reader import load_actions, tables_from_actions
from .sweep import NoRecordingError, ProfileResult, gpu_available, gpu_name

REGION_PREFIX = "region:"
KIND = "regions"
"""The :class:`~profiling.nsight.recordings.ProfileStore` kind of region recordings."""
WORKER = "profiling.nsight.region_worker"
BACKEND = "region"
"""The backend of a region's one recorded entry (its config is the region's shape, its dtype the one given)."""
ANY_DTYPE = "any"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
METRIC_COLUMNS = ("launch", "kernel", "region_op", "metric", "value", "text", "unit", "section", "label")
"""Columns of :func:`metrics_frame`: ``value`` in ``unit`` (NaN for a text metric, whose value is ``text``);
``section`` is the identifier of the ncu section showing the metric (``SpeedOfLight``), "" when none does."""


def check_name(name: object) -> str:
    """``name`` when it can name a region (letters, digits, ``_ . -``; it becomes an NVTX range and a folder)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"`name` must be letters, digits, '_', '.' or '-' (it names the NVTX range and the recordings' folder), "
            f"got {name!r}"
        )
    return name


def region_range(name: str) -> str:
    """The push/pop range the region runs in: ``region:<name>`` (domain ``oasr``)."""
    return f"{REGION_PREFIX}{check_name(name)}"


def nvtx_include(name: str) -> str:
    """The ``--nvtx-include`` expression selecting every launch inside the region: ``oasr@region:<name>/``."""
    return f"{DOMAIN}@{region_range(name)}/"


# ---------------------------------------------------------------------------
# The call, by reference
# ---------------------------------------------------------------------------

_FIX = (
    "ncu starts a new process to profile it, so `fn` must be importable by reference: pass 'module:qualname' of "
    "a module-level function, the function itself, or functools.partial(function, *args) with picklable args"
)


def resolve(reference: str) -> Callable[..., Any]:
    """The callable ``"module:qualname"`` names; TypeError naming ``fn`` when it names none."""
    module_name, sep, qualname = reference.partition(":")
    if not sep or not module_name or not qualname:
        raise TypeError(f"`fn` {reference!r} is not of the form 'module:qualname'; {_FIX}")
    try:
        target = pkgutil.resolve_name(reference)  # the standard library's reading of 'module:qualname'
    except (ImportError, AttributeError, ValueError) as exc:
        raise TypeError(f"`fn` {reference!r} cannot be imported ({type(exc).__name__}: {exc}); {_FIX}") from None
    if not callable(target):
        raise TypeError(f"`fn` {reference!r} names a {type(target).__name__}, not a callable; {_FIX}")
    return target


def _check_importable(function: Any, shown: str) -> None:
    """TypeError unless ``function`` is found again by its module and qualname (what pickle does)."""
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname or module == "__main__":
        where = f"{module}.{qualname}" if module and qualname else type(function).__name__
        raise TypeError(f"`fn` {shown} ({where}) is not importable by reference; {_FIX}")
    if resolve(f"{module}:{qualname}") is not function:
        raise TypeError(f"`fn` {shown}: {module}:{qualname} is not the same object; {_FIX}")


def portable_call(fn: object) -> tuple[str, str]:
    """(the call pickled, base64; a label for people) for ``fn``, checked to unpickle in another process.

    Parameters
    ----------
    fn : str, function or functools.partial
        ``"module:qualname"``, a module-level function, or a partial of one with picklable arguments.

    Raises
    ------
    TypeError
        Naming ``fn`` and the fix, for anything else (a lambda, a closure, a function of ``__main__`` or a
        notebook, a bound method, a partial with unpicklable arguments).
    """
    if isinstance(fn, str):  # what it names is checked as if passed itself (a function, or a partial of one)
        return portable_call(resolve(fn))[0], fn
    if isinstance(fn, functools.partial):
        _check_importable(fn.func, "(a partial)")
        shown = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in fn.keywords.items()]
        target, label = fn, f"{fn.func.__module__}:{fn.func.__qualname__}({', '.join(shown)})"
    elif isinstance(fn, types.FunctionType):
        _check_importable(fn, repr(fn.__qualname__))
        target, label = fn, f"{fn.__module__}:{fn.__qualname__}"
    else:
        raise TypeError(f"`fn` of type {type(fn).__name__} is not importable by reference; {_FIX}")
    try:
        data = pickle.dumps(target)
    except Exception as exc:  # any argument pickle refuses
        raise TypeError(f"`fn` {label} cannot be pickled ({type(exc).__name__}: {exc}); {_FIX}") from None
    return base64.b64encode(data).decode("ascii"), label


@dataclass
class RegionSpec:
    """What one region worker run profiles (:mod:`profiling.nsight.region_worker`).

    It has what :func:`profiling.nsight.runner.run_sweep` asks of a spec: ``op`` (the region's name), ``cases`` (one
    (config, dtype)) and ``to_json``.
    """

    name: str
    call: str
    """The call, pickled and base64-encoded (:func:`portable_call`)."""
    label: str
    config: dict[str, int] = field(default_factory=dict)
    dtype: str = ANY_DTYPE
    warmup: int = 2
    repeats: int = 5
    timing_path: str = ""

    @property
    def op(self) -> str:
        return self.name

    @property
    def cases(self) -> list[tuple[dict[str, int], str]]:
        return [(dict(self.config), self.dtype)]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> RegionSpec:
        return cls(**json.loads(text))


def build_command(ncu: Path | str, spec_path: Path | str, report: Path | str, name: str, preset: str) -> list[str]:
    """The ncu command line of a region profile (:func:`profiling.nsight.runner.build_command` with the region's
    ``--nvtx-include`` and worker)."""
    return runner.build_command(ncu, spec_path, report, preset=preset, nvtx_include=nvtx_include(name), worker=WORKER)


# ---------------------------------------------------------------------------
# Reading a region's report
# ---------------------------------------------------------------------------


def launch_op(action: Any) -> str | None:
    """The innermost op that launched ``action``'s kernel, from its NVTX stack (None outside every op).

    An oasr op's range (domain ``oasr``: ``oasr.gemm``; a sweep's ``scale:oasr:...`` reads ``scale:oasr``) wins over
    the torch op's (``emit_nvtx``'s ``aten::addmm, seq = 12``, read ``aten::addmm``); the region's and a sweep's own
    range are no op.
    """
    state = action.nvtx_state()
    if state is None:
        return None
    ours: list[str] = []
    torch_op: str | None = None
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        names = list(domain.push_pop_ranges())
        if domain.name() == DOMAIN:
            ours = [n for n in names if not n.startswith(REGION_PREFIX) and n != SWEEP_RANGE]
        elif names:
            torch_op = names[-1].split(",", 1)[0]
    if ours:
        try:
            parsed = parse_range_name(ours[-1])
        except ValueError:
            return ours[-1]
        return f"{parsed.op}:{parsed.backend}"
    return torch_op


def _section_of(action: Any) -> dict[str, str]:
    """Metric name -> the identifier of the first section that shows it."""
    found: dict[str, str] = {}
    for section in action.sections():
        for metric in (*section.header_metrics(), *section.body_metrics()):
            found.setdefault(metric.name(), section.identifier())
    return found


def metrics_frame(actions: Sequence[Any], ops: Sequence[str | None] | None = None) -> pd.DataFrame:
    """Every metric of every launch, one row each: columns :data:`METRIC_COLUMNS` (ncu's own values and units).

    Parameters
    ----------
    actions : sequence
        ncu_report actions (:func:`profiling.nsight.reader.load_actions`).
    ops : sequence, optional
        Each launch's ``region_op`` (default: :func:`launch_op` of each).
    """
    rows = []
    for index, action in enumerate(actions):
        sections, kernel = _section_of(action), action.name()
        op = ops[index] if ops is not None else launch_op(action)
        for name in action.metric_names():
            metric = action.metric_by_name(name)
            raw = metric.value()
            number = isinstance(raw, (int, float)) and not isinstance(raw, bool)
            rows.append(
                (index, kernel, op, name, float(raw) if number else math.nan, "" if number else str(raw),
                 metric.unit(), sections.get(name, ""), metric.label())
            )  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    frame["launch"] = frame["launch"].astype("Int64")
    return frame


def report_metrics(path: str | Path) -> pd.DataFrame:
    """:func:`metrics_frame` of the report at ``path`` (plain or packed); any preset's report, ``full``'s whole."""
    return metrics_frame(load_actions(path))


@dataclass
class RegionProfile(ProfileResult):
    """A region's profile: :class:`~profiling.nsight.sweep.ProfileResult` with ``region_op`` in ``launches``.

    ``op`` is the region's name. ``region_wall_s`` is the worker's median eager call of the region (NaN when not
    recorded); ``metrics`` the long-format frame of every metric (``preset="full"`` only, else None); ``call`` what
    ran (``module:function(args)``).
    """

    region_wall_s: float = math.nan
    metrics: pd.DataFrame | None = None
    call: str = ""


def _seconds(value: object) -> float:
    """A sidecar's recorded seconds, NaN when absent or not a number (a sidecar's provenance is data)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _result(stored: recordings.StoredProfile, *, replayed: bool, source: str) -> RegionProfile:
    actions = load_actions(stored.report)
    tables = tables_from_actions(actions, source=str(stored.report))
    ops = [launch_op(action) for action in actions]
    launches = tables.launches
    launches.insert(1, "region_op", pd.Series(ops, index=launches.index, dtype="string"))
    provenance = stored.provenance
    return RegionProfile(
        op=str(stored.meta.get("op", "")),
        preset=str(stored.meta["preset"]),
        launches=launches,
        advice=tables.advice,
        provenance=[provenance],
        replayed=replayed,
        source=source,
        report_paths=[stored.report],
        device=tables.device,
        region_wall_s=_seconds(provenance.get("region_wall_s")),
        metrics=metrics_frame(actions, ops) if stored.meta["preset"] == "full" else None,
        call=str(provenance.get("call", "")),
    )


# ---------------------------------------------------------------------------
# Profiling, or replaying
# ---------------------------------------------------------------------------


def record_command(name: str, fn: object, preset: str, config: Mapping[str, int] | None = None) -> str:
    """The command that makes the recording of region ``name`` on a GPU (or the call, where no command can)."""
    flags = f" --preset {preset}" if preset != "roofline" else ""
    if name in regions.REGIONS:
        default = regions.region_shape(name)
        if config and dict(config) != default:
            flags += " --shape " + ",".join(f"{k}={config[k]}" for k in default)  # d,b,t,k: the layer's order
        return f"python -m profiling.nsight.region {name} --live{flags}"
    if isinstance(fn, str):
        return f"python -m profiling.nsight.region --fn {fn} --name {name} --live{flags}"
    return f"profile_region(fn, name={name!r}, preset={preset!r}) in Python"


def _source_hash(label: str, config: Mapping[str, int]) -> str:
    """What a region recording is keyed on besides its name: the call and the tree's commit."""
    text = json.dumps([label, sorted(config.items()), str(collect().get("git_commit", ""))])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def profile_region(
    fn: object,
    name: str,
    *,
    preset: str = "roofline",
    live: bool | None = None,
    config: Mapping[str, int] | None = None,
    dtype: str = ANY_DTYPE,
    warmup: int = 2,
    repeats: int = 5,
    timeout_s: float = runner.DEFAULT_TIMEOUT_S,
    clock_control: str = "none",
    cache_control: str = "all",
    progress: Callable[[runner.Progress], None] | None = None,
    reports_dir: Path | None = None,
) -> RegionProfile:
    """Profile every kernel ``fn()`` launches with one ncu run, or replay the region's recording.

    Parameters
    ----------
    fn : str, function or functools.partial
        The region, importable by reference (:func:`portable_call`). It is called ``warmup`` times outside the
        range, once inside it, then ``repeats`` times for its wall time.
    name : str
        Names the NVTX range (``region:<name>``) and the recordings' folder (``reports/<gpu>/regions/<name>/``).
    preset : {"timing", "roofline", "source", "full"}
        ncu metric preset (:mod:`profiling.nsight.presets`); ``"full"`` also fills ``metrics``.
    live : bool, optional
        True: profile (errors without a GPU or ncu); False: replay; None: live when a GPU and ncu are here.
    config : mapping of str to int, optional
        The region's shape, recorded as its entry's config and matched on replay.
    dtype : str
        A label for the entry (the region's own inputs decide what runs).
    warmup, repeats : int
        Calls before the profiled one (JIT builds, caches), and calls timed after it.
    timeout_s, clock_control, cache_control, progress
        As :func:`profiling.nsight.runner.run_sweep`.
    reports_dir : Path, optional
        Root of the recordings (default ``reports/``).

    Returns
    -------
    RegionProfile

    Raises
    ------
    TypeError
        ``fn`` is not importable by reference.
    ValueError
        A bad ``name``, ``preset``, ``config``, ``warmup`` or ``repeats``.
    NoRecordingError
        Replay found no recording; the message names the command that makes one on a GPU.
    profiling.nsight.runner.NcuError
        Live: its subclasses, as for a sweep (no ncu, no GPU, counters not permitted, nothing profiled ...).
    """
    check_name(name)
    get_preset(preset)
    config = dict(config or {})
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in config.items()):
        raise ValueError(f"`config` must map field names to integers, got {config!r}")
    for arg, value, least in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"`{arg}` must be an int >= {least}, got {value!r}")
    call, label = portable_call(fn)
    entry = recordings.make_entry(BACKEND, config, dtype)
    if live is None:
        live = gpu_available() and runner.ncu_available()
    if not live:
        return _replay(name, fn, preset, entry, reports_dir)
    if not gpu_available():
        raise runner.NoGpuError(
            "no CUDA GPU: profiling a region needs an NVIDIA GPU (torch.cuda.is_available() is False). "
            "Replay its recording instead: profile_region(..., live=False)."
        )
    start = time.perf_counter()
    ncu_path = runner.find_ncu()
    store = recordings.ProfileStore(gpu_slug(gpu_name()), name, reports_dir, kind=KIND)
    report = store.temp_report_path()
    try:
        with tempfile.TemporaryDirectory(prefix="oasr-region-") as scratch:
            timing = Path(scratch) / "timing.json"
            spec = RegionSpec(name, call, label, config, dtype, warmup, repeats, str(timing))
            run = runner.run_sweep(
                spec, report, preset=preset, clock_control=clock_control, cache_control=cache_control,
                timeout_s=timeout_s, progress=progress, ncu=ncu_path, env={"OASR_NVTX": "1"},
                nvtx_include=nvtx_include(name), worker=WORKER,
            )  # fmt: skip
            wall = json.loads(timing.read_text()) if timing.is_file() else {}
        src = _source_hash(label, config)
        provenance = {
            **collect(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gpu": gpu_name(),
            "region": name,
            "call": label,
            "config": config,
            "preset": preset,
            "ncu_path": str(ncu_path),
            "ncu_version": run.ncu_version,
            "ncu_command": run.command,
            "clock_control": clock_control,
            "cache_control": cache_control,
            "kernels_profiled": run.kernels,
            "ncu_wall_s": round(run.wall_s, 3),
            "warmup": warmup,
            **wall,
        }
        settings = {"clock_control": clock_control, "cache_control": cache_control}
        saved = store.save(report, [entry], preset=preset, source_hash=src, provenance=provenance, settings=settings)
    finally:
        report.unlink(missing_ok=True)
    result = _result(saved, replayed=False, source="live")
    result.wall_s = time.perf_counter() - start
    return result


def _replay(name: str, fn: object, preset: str, entry: recordings.Entry, reports_dir: Path | None) -> RegionProfile:
    store = recordings.ProfileStore(REPLAY_GPU, name, reports_dir, kind=KIND)
    hits, _ = store.lookup([entry], preset, source_hash=None)
    if entry not in hits:
        recorded = sorted({recordings.entry_label(e) for p in store.profiles() for e in p.entries})
        have = f"recorded there: {'; '.join(recorded)}" if recorded else "nothing is recorded there"
        raise NoRecordingError(
            f"no {preset!r} recording of region {name!r} for {recordings.entry_label(entry)} in "
            f"{shown_path(store.directory)} ({have}). Without a GPU and ncu only recordings can be shown; make this "
            "one on a GPU with "
            f"`{record_command(name, fn, preset, dict(entry[1]))}` and commit reports/."
        )
    return _result(hits[entry], replayed=True, source="recording")


def profile_builtin(
    name: str, shape: Mapping[str, int] | None = None, *, preset: str = "roofline", **kwargs: Any
) -> RegionProfile:
    """:func:`profile_region` of a built-in region (:data:`profiling.harness.regions.REGIONS`) at ``shape``."""
    call = regions.region_call(name, dict(shape or {}))
    return profile_region(call, name, preset=preset, config=call.keywords, dtype=dtype_name(regions.DTYPE), **kwargs)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

TABLE_COLUMNS = ("region_op", "kernel", "duration_s", "dram_bytes", "flop", "pct_dram_peak")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m profiling.nsight.region",
        description="Profile every kernel of a region under Nsight Compute (one ncu run), or replay its recording.",
    )
    parser.add_argument("names", nargs="*", help=f"built-in regions: {', '.join(regions.REGIONS)}")
    parser.add_argument("--fn", help="a region of your own, 'module:qualname' (needs --name)")
    parser.add_argument("--name", help="the name of the --fn region")
    parser.add_argument("--shape", type=commands.parse_config, help="the built-ins' shape, e.g. d=256,b=64,t=250,k=15")
    parser.add_argument("--preset", default="roofline", help="timing, roofline, source or full")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--live", action="store_true", help="profile (an error without a GPU or ncu)")
    mode.add_argument("--replay", action="store_true", help="show the recordings; profile nothing")
    parser.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT_S, help="seconds per ncu run")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Profile (or replay) each region named and print its launches."""
    parser = _parser()
    args = parser.parse_args(argv)
    if bool(args.fn) != bool(args.name) or not (args.names or args.fn):
        parser.error("name built-in regions, or give --fn module:qualname with --name")
    unknown = [n for n in args.names if n not in regions.REGIONS]
    if unknown:
        parser.error(f"unknown built-in regions {unknown}; choose from {', '.join(regions.REGIONS)}")
    live = True if args.live else False if args.replay else None
    jobs: list[Callable[[], RegionProfile]] = [
        functools.partial(profile_builtin, n, args.shape, preset=args.preset, live=live, timeout_s=args.timeout,
                          progress=runner.print_progress)
        for n in args.names
    ]  # fmt: skip
    if args.fn:
        jobs.append(
            functools.partial(profile_region, args.fn, args.name, preset=args.preset, live=live,
                              timeout_s=args.timeout, progress=runner.print_progress)
        )  # fmt: skip
    status = 0
    for job in jobs:
        try:
            result = job()
        except (runner.NcuError, NoRecordingError, ValueError, TypeError, ImportError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"{result.op}: {len(result.launches)} launches, {result.banner}")
        print(readable.text(result.launches[[c for c in TABLE_COLUMNS if c in result.launches]]))
    return status


if __name__ == "__main__":
    sys.exit(main())
