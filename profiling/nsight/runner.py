"""Run one sweep under Nsight Compute: find ``ncu``, build its command, watch it, classify failures.

:func:`run_sweep` starts one ``ncu`` process for a whole sweep::

    ncu --clock-control none --cache-control all --nvtx --nvtx-include oasr@sweep/ \\
        <preset metrics> -o <report>.ncu-rep -f <python> -m profiling.nsight.worker <spec.json>

``--clock-control none`` (never touch the GPU's clocks) and ``--cache-control
all`` (flush caches between replay passes) are the defaults; both are recorded
in :class:`NcuRun` because ceilings depend on them. ncu runs in its own session
(process group), so a timeout or a Ctrl-C stops ncu *and* the worker: first
SIGINT, so ncu can still write what it has, then SIGKILL after a grace period.

Failures raise one of the :class:`NcuError` subclasses below, each with a
one-paragraph message saying what happened and what to do.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..provenance import REPO_ROOT
from .naming import DOMAIN, SWEEP_RANGE
from .presets import ncu_args
from .worker import parse_event

NVTX_INCLUDE = f"{DOMAIN}@{SWEEP_RANGE}/"
WORKER_MODULE = "profiling.nsight.worker"
DEFAULT_TIMEOUT_S = 900.0
DEFAULT_KILL_GRACE_S = 15.0
TAIL_LINES = 40
DEFAULT_CUDA_HOMES: tuple[str, ...] = ("/usr/local/cuda",)
PRIVATE_TMP_PREFIX = (
    "unshare", "-m", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs /tmp && exec "$@"', "sh",
)  # fmt: skip
"""Runs a command in its own mount namespace with an empty /tmp (``run_sweep(private_tmp=True)``)."""
NCU_GLOB_ROOT = Path("/opt/nvidia/nsight-compute")
PERM_DOC = (
    "NVIDIA's guide 'NVIDIA Development Tools Solutions - ERR_NVGPUCTRPERM: Permission issue with "
    "Performance Counters' (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)

_PROFILING = re.compile(
    r'==PROF== Profiling "(?P<kernel>[^"]*)" - (?P<index>\d+):.*?(?:(?P<passes>\d+) pass(?:es)?)?\s*$'
)
_VERSION = re.compile(r"Version\s+(\d+(?:\.\d+)+)")
_NO_DEVICE = re.compile(r"no (cuda-capable|supported) (device|gpu)|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE", re.I)


class MalformedEventWarning(RuntimeWarning):
    """A worker event line had the event prefix but fields the runner cannot use; it was ignored."""


class NcuVersionWarning(RuntimeWarning):
    """``ncu --version`` did not answer in time; the version is recorded as ``"unknown"``."""


class NcuError(RuntimeError):
    """A profiling run failed; ``output_tail`` holds ncu's and the worker's last lines."""

    def __init__(self, message: str, output_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.output_tail = list(output_tail)


class NcuNotFoundError(NcuError):
    """No ``ncu`` executable was found."""


class NoGpuError(NcuError):
    """The worker saw no CUDA GPU."""


class CountersNotPermittedError(NcuError):
    """ncu may not read performance counters (ERR_NVGPUCTRPERM)."""


class NothingProfiledError(NcuError):
    """No launch matched the NVTX filter."""


class WorkerCrashedError(NcuError):
    """The worker exited with an error before finishing its sweep."""


class NcuFailedError(NcuError):
    """ncu exited with an error, or wrote no report, for a reason not classified above."""


class PartialSweepError(NcuError):
    """A sweep stopped half-way; ``finished`` lists the (config, dtype) cases it completed.

    ``report`` is the report ncu wrote with what it had (None when it wrote none).
    """

    def __init__(
        self,
        message: str,
        output_tail: Sequence[str] = (),
        *,
        report: Path | None = None,
        finished: Sequence[tuple[dict[str, int], str]] = (),
    ) -> None:
        super().__init__(message, output_tail)
        self.report = report
        self.finished = list(finished)


class NcuTimeoutError(PartialSweepError):
    """The run exceeded its time limit and was stopped."""


class SweepInterruptedError(PartialSweepError):
    """The run was interrupted (KeyboardInterrupt) and stopped."""


# ---------------------------------------------------------------------------
# Finding ncu
# ---------------------------------------------------------------------------


def _version_key(path: Path) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", path.parent.name)
    return tuple(int(n) for n in numbers)


def ncu_candidates() -> list[Path]:
    """Where ncu is looked for, in order: ``$OASR_NCU``, PATH, ``$CUDA_HOME/bin``,
    ``/usr/local/cuda/bin``, then ``/opt/nvidia/nsight-compute/*/ncu`` newest first."""
    found: list[Path] = []
    if os.environ.get("OASR_NCU"):
        found.append(Path(os.environ["OASR_NCU"]))
    on_path = shutil.which("ncu")
    if on_path:
        found.append(Path(on_path))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *DEFAULT_CUDA_HOMES):
        if home:
            found.append(Path(home) / "bin" / "ncu")
    found.extend(sorted(NCU_GLOB_ROOT.glob("*/ncu"), key=_version_key, reverse=True))
    return found


def find_ncu() -> Path:
    """The ncu executable to use (see :func:`ncu_candidates`); :class:`NcuNotFoundError` if none."""
    for candidate in ncu_candidates():
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise NcuNotFoundError(
        "Nsight Compute's `ncu` was not found: looked at $OASR_NCU, the PATH, $CUDA_HOME/bin, "
        "/usr/local/cuda/bin and /opt/nvidia/nsight-compute/*/ncu. Install Nsight Compute 2025.3 or newer "
        "(it comes with the CUDA toolkit, or as NVIDIA's `nsight-compute` package) and put the folder holding "
        "`ncu` on PATH, or set OASR_NCU to the executable. Without ncu, profile_sweep() replays the "
        "committed recordings in reports/ instead of profiling."
    )


def ncu_available() -> bool:
    try:
        find_ncu()
    except NcuNotFoundError:
        return False
    return True


VERSION_TIMEOUT_S = 10.0
"""``ncu --version`` answers in about a second; one silent for ten is hung (a broken install, a stuck driver)."""


@functools.cache
def ncu_version(ncu: Path) -> str:
    """``"2025.3.1.0"`` from ``ncu --version`` (``"unknown"`` if it cannot be read; one
    :class:`NcuVersionWarning` when it does not answer within :data:`VERSION_TIMEOUT_S`)."""
    try:
        process = subprocess.Popen(
            [str(ncu), "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError:
        return "unknown"
    try:
        out, _ = process.communicate(timeout=VERSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        warnings.warn(
            NcuVersionWarning(
                f"`{ncu} --version` did not answer within {VERSION_TIMEOUT_S:g} s and was stopped, so the "
                "recordings give its version as 'unknown'; check that this ncu runs, or set OASR_NCU to one that does."
            ),
            stacklevel=2,
        )
        return "unknown"
    match = _VERSION.search(out)
    return match.group(1) if match else "unknown"


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------


def build_command(
    ncu: Path | str,
    spec_path: Path | str,
    report: Path | str,
    *,
    preset: str = "roofline",
    clock_control: str = "none",
    cache_control: str = "all",
    preset_args: Sequence[str] | None = None,
    python: str = sys.executable,
    nvtx_include: str = NVTX_INCLUDE,
    worker: str = WORKER_MODULE,
) -> list[str]:
    """The full ncu command line for one sweep (``preset_args`` defaults to ``ncu_args(preset)``).

    ``nvtx_include`` and ``worker`` (the module run as ``python -m``) default to the sweep's; a region
    profile (:mod:`profiling.nsight.region`) passes its own range and worker."""
    if preset_args is None:
        preset_args = ncu_args(preset)
    return [
        str(ncu),
        "--clock-control",
        clock_control,
        "--cache-control",
        cache_control,
        "--nvtx",
        "--nvtx-include",
        nvtx_include,
        *preset_args,
        "-o",
        str(report),
        "-f",
        python,
        "-m",
        worker,
        str(spec_path),
    ]


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------


@dataclass
class Progress:
    """State of a running sweep, passed to the ``progress`` callback after each event.

    ``kind`` is ``"kernel"`` (ncu profiled a launch), ``"config"`` (the worker
    finished a config x dtype case), or ``"start"``, ``"ready"``, ``"built"``, ``"end"``.
    """

    kind: str
    kernels: int = 0
    configs_done: int = 0
    configs_total: int = 0
    kernel: str = ""
    message: str = ""
    finished: list[tuple[dict[str, int], str]] = field(default_factory=list)


def parse_line(line: str) -> dict[str, Any] | None:
    """Classify one output line: a worker event, an ncu ``Profiling`` line, or None."""
    event = parse_event(line)
    if event is not None:
        return event
    match = _PROFILING.search(line)
    if match:
        passes = match.group("passes")
        return {
            "event": "kernel",
            "kernel": match.group("kernel"),
            "index": int(match.group("index")),
            "passes": int(passes) if passes else None,
        }
    return None


class _Tracker:
    """Folds output lines into a :class:`Progress` and calls the callback."""

    def __init__(self, total: int, callback: Callable[[Progress], None] | None) -> None:
        self.state = Progress(kind="start", configs_total=total)
        self.callback = callback
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.errors: list[dict[str, Any]] = []
        self.ended = False
        self.worker_pid: int | None = None
        self.seen: set[str] = set()
        """Markers seen anywhere in the output (not only in the tail): ``"perm"``, ``"no_kernels"``, ``"no_device"``."""
        self.notes: list[str] = []
        """One line per malformed worker event that was ignored."""

    def feed(self, line: str) -> None:
        self.tail.append(line)
        if "ERR_NVGPUCTRPERM" in line:
            self.seen.add("perm")
        if "No kernels were profiled" in line:
            self.seen.add("no_kernels")
        if _NO_DEVICE.search(line):
            self.seen.add("no_device")
        event = parse_line(line)
        if event is None:
            return
        problem = _event_problem(event)
        if problem is not None:
            self.notes.append(f"ignored a malformed worker event ({problem}): {line.strip()[:200]}")
            return
        state = self.state
        kind = event["event"]
        if kind == "kernel":
            state.kernels += 1
            state.kernel = event["kernel"]
            state.message = f"profiled {event['kernel']} ({state.kernels} launches)"
        elif kind == "done":
            state.finished.append((event["config"], event["dtype"]))
            state.configs_done = len(state.finished)
            state.configs_total = event.get("total", state.configs_total)
            label = ",".join(f"{k}={v}" for k, v in event["config"].items())
            state.message = f"config {state.configs_done}/{state.configs_total} done: {label},dtype={event['dtype']}"
            kind = "config"
        elif kind == "error":
            self.errors.append(event)
            return
        elif kind == "end":
            self.ended = True
            state.message = "sweep finished"
        elif kind == "start":
            self.worker_pid = event.get("pid")
            state.configs_total = event.get("total", state.configs_total)
            state.message = f"worker started: {state.configs_total} configs to profile"
        elif kind in ("ready", "built"):
            detail = ", ".join(f"{k}={v}" for k, v in event.items() if k != "event")
            state.message = f"worker {kind}: {detail}"
        else:
            return
        state.kind = kind
        if self.callback is not None:
            self.callback(state)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _event_problem(event: dict[str, Any]) -> str | None:
    """What is wrong with a worker event's fields (None when the runner can use it)."""
    kind = event.get("event")
    if not isinstance(kind, str):
        return f"'event' is {kind!r}, not a string"
    if "total" in event and not _is_count(event["total"]):
        return f"'total' is {event['total']!r}, not a count"
    if kind == "done":
        config = event.get("config")
        if not isinstance(config, dict) or not all(isinstance(k, str) and _is_count(v) for k, v in config.items()):
            return f"its 'config' is {config!r}, not a map of field names to integers"
        if not isinstance(event.get("dtype"), str):
            return f"its 'dtype' is {event.get('dtype')!r}, not a string"
    elif kind == "start" and "pid" in event and not (_is_count(event["pid"]) and event["pid"] > 0):
        return f"its 'pid' is {event['pid']!r}, not a process id"
    elif kind == "error" and not all(isinstance(event.get(k, ""), str) for k in ("kind", "message")):
        return "its 'kind' or 'message' is not a string"
    return None


def print_progress(progress: Progress) -> None:
    """A ``progress`` callback for terminals: one line per event, on stderr."""
    print(f"[ncu] {progress.message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


@dataclass
class NcuRun:
    """A finished sweep: where its report is and how it was made."""

    report: Path
    command: list[str]
    ncu_path: str
    ncu_version: str
    preset: str
    clock_control: str
    cache_control: str
    finished: list[tuple[dict[str, int], str]]
    kernels: int
    wall_s: float
    output_tail: list[str]
    notes: list[str] = field(default_factory=list)
    """Malformed worker events that were ignored (each also warned about)."""


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _reader(stream: Any, lines: queue.Queue[str | None]) -> None:
    for raw in iter(stream.readline, ""):
        lines.put(raw.rstrip("\n"))
    lines.put(None)


class WorkerSpec(Protocol):
    """What :func:`run_sweep` needs of a spec: its ``op`` (for messages), its ``cases`` (the worker reports one
    ``done`` event each) and ``to_json`` (the file the worker reads). :class:`SweepSpec` is one."""

    @property
    def op(self) -> str: ...

    @property
    def cases(self) -> list[tuple[dict[str, int], str]]: ...

    def to_json(self) -> str: ...


def run_sweep(
    spec: WorkerSpec,
    report: Path | str,
    *,
    preset: str = "roofline",
    clock_control: str = "none",
    cache_control: str = "all",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Callable[[Progress], None] | None = None,
    ncu: Path | str | None = None,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
    preset_args: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    stop: threading.Event | None = None,
    private_tmp: bool = False,
    nvtx_include: str = NVTX_INCLUDE,
    worker: str = WORKER_MODULE,
) -> NcuRun:
    """Profile ``spec`` with one ncu process and write ``report`` (a ``.ncu-rep`` path).

    ``nvtx_include`` and ``worker`` are passed to :func:`build_command` (a sweep's by default).

    ``env`` is added to ncu's environment (a spread sweep pins ``CUDA_VISIBLE_DEVICES`` and a
    private ``TMPDIR`` there). Setting ``stop`` from another thread stops the run as Ctrl-C does.
    ``private_tmp`` runs ncu in its own mount namespace with an empty /tmp (``unshare -m``, root
    only; the spec file then sits beside ``report``, which must not be under /tmp).

    Raises
    ------
    NcuNotFoundError, NoGpuError, CountersNotPermittedError, NothingProfiledError,
    WorkerCrashedError, NcuFailedError
        See each class; every message is one paragraph, with the output tail where it helps.
    NcuTimeoutError, SweepInterruptedError
        The run was stopped; ``.finished`` and ``.report`` say what it completed.
    """
    ncu_path = Path(ncu) if ncu is not None else find_ncu()
    report = Path(report)
    if private_tmp:
        _check_private_tmp(report)
    report.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="oasr-sweep-", dir=report.parent if private_tmp else None) as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(spec.to_json())
        command = build_command(
            ncu_path,
            spec_path,
            report,
            preset=preset,
            clock_control=clock_control,
            cache_control=cache_control,
            preset_args=preset_args,
            nvtx_include=nvtx_include,
            worker=worker,
        )
        environ = {**os.environ, **(env or {})}
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), environ.get("PYTHONPATH")]))
        environ["PYTHONUNBUFFERED"] = "1"
        tracker = _Tracker(len(spec.cases), progress)
        start = time.perf_counter()
        launched = [*PRIVATE_TMP_PREFIX, *command] if private_tmp else command
        returncode, stopped = _watch(launched, environ, tracker, timeout_s, kill_grace_s, stop)
        wall_s = time.perf_counter() - start
    tail = list(tracker.tail)
    for note in tracker.notes:
        warnings.warn(MalformedEventWarning(f"ncu sweep of {spec.op}: {note}"), stacklevel=2)
    if stopped is not None:
        raise _partial_error(stopped, report, tracker, timeout_s, kill_grace_s) from None
    _raise_for_failure(returncode, report, tracker, nvtx_include)
    return NcuRun(
        report=report,
        command=command,
        ncu_path=str(ncu_path),
        ncu_version=ncu_version(ncu_path),
        preset=preset,
        clock_control=clock_control,
        cache_control=cache_control,
        finished=list(tracker.state.finished),
        kernels=tracker.state.kernels,
        wall_s=wall_s,
        output_tail=tail,
        notes=list(tracker.notes),
    )


def _check_private_tmp(report: Path) -> None:
    """ValueError naming ``private_tmp`` when this machine cannot give ncu a private /tmp."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise ValueError(
            "private_tmp=True runs ncu in its own mount namespace (unshare -m), which needs root and "
            "util-linux's unshare; run as root or leave private_tmp off."
        )
    if report.resolve().is_relative_to("/tmp"):
        raise ValueError(f"private_tmp=True hides /tmp from ncu, so the report {report} must be written elsewhere")


# Stopping relies on SIGINT (below). A process started with SIGINT ignored (under nohup, or as a background job of a
# script) passes that on to its children, so ncu and the worker are then started with it at its default.
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"
)


def _with_default_sigint(command: list[str]) -> list[str]:
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return command
    return [sys.executable, "-S", "-c", _DEFAULT_SIGINT, *command]


def _watch(
    command: list[str],
    env: dict[str, str],
    tracker: _Tracker,
    timeout_s: float,
    kill_grace_s: float,
    stop: threading.Event | None = None,
) -> tuple[int, str | None]:
    """Run ``command`` in its own session, feeding output lines to ``tracker``.

    Returns (exit status, None) when it ended by itself, or (status, "timeout"
    / "interrupt") when it was stopped. It waits for ncu to *exit*, then drains
    the output; a child that still holds the output after that is killed with
    the group instead of keeping a finished run waiting for end of output. Stopping is staged: SIGINT to the
    worker (ncu then sees its application end and writes the report with what
    it profiled; the whole group when the worker's pid is not known yet), then
    SIGKILL to the whole process group after ``kill_grace_s`` (or at a second
    Ctrl-C), so neither ncu nor the worker outlives the call.
    """
    proc = subprocess.Popen(
        _with_default_sigint(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    stopped: str | None = None
    kill_at = math.inf
    eof = False
    try:
        # Watch the process, not the pipe: a child that inherited stdout and outlives ncu
        # must not keep a finished run waiting for end of output.
        while proc.poll() is None:
            try:
                if eof:  # ncu closed its output but runs on
                    time.sleep(0.05)
                    line: str | None = ""
                else:
                    line = _next_line(lines)
                if line is None:
                    eof = True
                elif line:
                    tracker.feed(line)
                now = time.monotonic()
                if stopped is None and now > deadline:
                    stopped, kill_at = "timeout", now + kill_grace_s
                    _interrupt(proc.pid, tracker.worker_pid)
                elif stopped is None and stop is not None and stop.is_set():
                    stopped, kill_at = "interrupt", now + kill_grace_s
                    _interrupt(proc.pid, tracker.worker_pid)
                if now > kill_at:
                    break
            except KeyboardInterrupt:
                if stopped is not None:
                    break  # a second Ctrl-C: kill at once
                stopped, kill_at = "interrupt", time.monotonic() + kill_grace_s
                _interrupt(proc.pid, tracker.worker_pid)
    finally:
        if stopped is not None or proc.poll() is None:
            # Whatever is left of the group (ncu, the worker, their children) goes now.
            _kill_group(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
        if not eof and not _drain(lines, tracker):
            # ncu has exited but something it started still holds the output: it goes too.
            _kill_group(proc.pid, signal.SIGKILL)
            _drain(lines, tracker)
        reader.join(timeout=1.0)
        if not reader.is_alive() and proc.stdout is not None:
            proc.stdout.close()
    return returncode, stopped


def _next_line(lines: queue.Queue[str | None]) -> str | None:
    """The next output line, ``""`` after 0.1 s without one, None at end of output."""
    try:
        return lines.get(timeout=0.1)
    except queue.Empty:
        return ""


def _interrupt(pgid: int, worker_pid: int | None) -> None:
    """SIGINT the worker alone when its pid is known (and in ncu's process group), else the whole group."""
    try:
        in_group = worker_pid is not None and os.getpgid(worker_pid) == pgid
    except OSError:
        in_group = False
    if worker_pid is None or not in_group:  # unknown, gone, or not one of ncu's: interrupt the group
        _kill_group(pgid, signal.SIGINT)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(worker_pid, signal.SIGINT)


def _drain(lines: queue.Queue[str | None], tracker: _Tracker, quiet_s: float = 0.25, limit_s: float = 2.0) -> bool:
    """Feed what is left of the output; True at end of output, False after ``quiet_s`` without a
    line (or ``limit_s`` in all) while something still holds the pipe."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=quiet_s)
        except queue.Empty:
            return False
        if line is None:
            return True
        tracker.feed(line)
    return False


def _tail_text(tail: Sequence[str]) -> str:
    return "\n".join(f"    {line}" for line in tail) if tail else "    (no output)"


def _partial_error(
    stopped: str, report: Path, tracker: _Tracker, timeout_s: float, kill_grace_s: float
) -> PartialSweepError:
    state = tracker.state
    partial = report if report.is_file() else None
    kept = f"ncu wrote a partial report ({partial})" if partial else "ncu wrote no report"
    done = f"{state.configs_done} of {state.configs_total} configs done, {state.kernels} launches profiled"
    if stopped == "timeout":
        cls: type[PartialSweepError] = NcuTimeoutError
        message = (
            f"ncu did not finish within {timeout_s:g} s ({done}), so its whole process group was stopped "
            f"(SIGINT, then SIGKILL after {kill_grace_s:g} s); {kept}. Raise timeout_s, profile fewer configs, "
            f"or use the lighter 'timing' preset. Last output:\n{_tail_text(tracker.tail)}"
        )
    else:
        cls = SweepInterruptedError
        message = f"sweep interrupted ({done}); ncu and the worker were stopped and {kept}."
    return cls(message, list(tracker.tail), report=partial, finished=state.finished)


def _raise_for_failure(returncode: int, report: Path, tracker: _Tracker, nvtx_include: str) -> None:
    tail = list(tracker.tail)
    state = tracker.state
    if "perm" in tracker.seen:
        raise CountersNotPermittedError(
            "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the NVIDIA driver "
            "restricts them to administrators. Either profile as root (sudo, or a container started with "
            "--cap-add=SYS_ADMIN), or allow all users: put `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
            "in a file under /etc/modprobe.d/, rebuild the initramfs if your distribution needs it, and reboot. "
            f"See {PERM_DOC}.",
            tail,
        )
    kinds = {error.get("kind") for error in tracker.errors}
    if "no_gpu" in kinds or (not tracker.ended and "no_device" in tracker.seen):
        raise NoGpuError(
            "no CUDA GPU: the profiling worker that ncu launched found no CUDA device, so nothing can be "
            "profiled. Nsight Compute needs an NVIDIA GPU and its driver (check `nvidia-smi`, and "
            "CUDA_VISIBLE_DEVICES); on a machine without one, profile_sweep(live=False) replays the recordings "
            "in reports/.",
            tail,
        )
    if not tracker.ended:
        messages = "; ".join(e.get("message", "") for e in tracker.errors if e.get("message"))
        reason = f": {messages}" if messages else ""
        raise WorkerCrashedError(
            f"the profiling worker crashed (ncu exit status {returncode}) after {state.configs_done} of "
            f"{state.configs_total} configs{reason}. Its last output lines:\n{_tail_text(tail)}",
            tail,
        )
    if "no_kernels" in tracker.seen or state.kernels == 0:
        raise NothingProfiledError(
            f"ncu ran the worker to the end but profiled no kernel: no launch matched the NVTX filter "
            f"--nvtx-include {nvtx_include!r} (ncu: 'No kernels were profiled'). The worker wraps each measured "
            "launch in push/pop ranges of domain 'oasr' (profiling/nsight/naming.py); check that the `nvtx` "
            "package in the worker's Python is a real one and that the filter matches the range names. "
            f"Last output:\n{_tail_text(tail)}",
            tail,
        )
    if returncode != 0 or not report.is_file():
        what = f"exited with status {returncode}" if returncode != 0 else f"wrote no report at {report}"
        raise NcuFailedError(f"ncu {what} although the worker finished. Last output:\n{_tail_text(tail)}", tail)
