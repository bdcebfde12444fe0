"""The ncu runner (profiling.nsight.runner) and worker, with fake ``ncu`` executables on PATH.

Each fake is a small Python script that prints what the real ncu 2025.3 prints
(``==PROF==`` lines, ``==ERROR== ERR_NVGPUCTRPERM ...``, ``==WARNING== No kernels
were profiled.``) plus the worker's progress events, or runs the real worker
("passthrough"). The last test profiles for real and needs a CUDA GPU and ncu.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from profiling.nsight import runner
from profiling.nsight.presets import ncu_args
from profiling.nsight.runner import (
    CountersNotPermittedError,
    NcuFailedError,
    NcuNotFoundError,
    NcuTimeoutError,
    NoGpuError,
    NothingProfiledError,
    SweepInterruptedError,
    WorkerCrashedError,
)
from profiling.nsight.worker import EVENT_PREFIX, SweepSpec

SPEC = SweepSpec(op="scale", configs=[{"n": 2048}, {"n": 8192}, {"n": 32768}], dtypes=["float16"])

PRELUDE = f"""#!{sys.executable}
import json, os, signal, subprocess, sys, time
argv = sys.argv[1:]
if argv == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
out = argv[argv.index("-o") + 1]
app = argv[argv.index("-f") + 1 :]
spec = json.load(open(app[-1]))
cases = [(c, d) for c in spec["configs"] for d in spec["dtypes"]]
def ev(event, **fields):
    print({EVENT_PREFIX!r} + json.dumps(dict(event=event, **fields)), flush=True)
def prof(index, name="ScaleKernel"):
    print(f'==PROF== Profiling "{{name}}" - {{index}}: 0%....50%....100% - 14 passes', flush=True)
"""

SWEEP = """
print("==PROF== Connected to process 4242 (/usr/bin/python3.12)", flush=True)
ev("start", pid=os.getpid(), total=len(cases))
k = 0
for i, (c, d) in enumerate(cases):
    for b in spec["backends"]:
        prof(k); k += 1
    ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
ev("end", total=len(cases))
print("==PROF== Disconnected from process 4242", flush=True)
open(out, "w").write("fake report")
print(f"==PROF== Report: {out}", flush=True)
"""

PERM_TEXT = (
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
    "Counters on the target device 0. For instructions on enabling permissions and to get more information "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """Write an executable ``ncu`` running ``body`` after :data:`PRELUDE`; put it first on PATH."""
    folder = tmp_path / "fakebin"
    folder.mkdir(exist_ok=True)
    exe = folder / "ncu"
    exe.write_text(PRELUDE + textwrap.dedent(body))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("OASR_NCU", raising=False)
    return exe


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_gone(pids: list[int], within_s: float = 3.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "orphan processes survived the runner"


def run(tmp_path: Path, **kwargs):
    return runner.run_sweep(SPEC, tmp_path / "out.ncu-rep", **kwargs)


# ---------------------------------------------------------------------------
# Finding ncu, the command, parsing
# ---------------------------------------------------------------------------


def test_ncu_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("OASR_NCU", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(runner, "DEFAULT_CUDA_HOMES", (str(tmp_path / "cuda"),))
    monkeypatch.setattr(runner, "NCU_GLOB_ROOT", tmp_path / "opt")
    with pytest.raises(NcuNotFoundError) as info:
        runner.find_ncu()
    message = str(info.value)
    assert "PATH" in message and "OASR_NCU" in message and "Install Nsight Compute" in message
    assert not runner.ncu_available()
    with pytest.raises(NcuNotFoundError):
        run(tmp_path, preset_args=[])


def test_find_ncu_order_and_newest(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("OASR_NCU", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(runner, "DEFAULT_CUDA_HOMES", ())
    monkeypatch.setattr(runner, "NCU_GLOB_ROOT", tmp_path / "opt")
    for version in ("2024.1.0", "2025.3.1", "2025.10.0"):
        exe = tmp_path / "opt" / version / "ncu"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    assert runner.find_ncu() == tmp_path / "opt" / "2025.10.0" / "ncu"
    on_path = fake_ncu(tmp_path, monkeypatch, "")
    assert runner.find_ncu() == on_path  # PATH before /opt
    monkeypatch.setenv("OASR_NCU", str(tmp_path / "opt" / "2024.1.0" / "ncu"))
    assert runner.find_ncu() == tmp_path / "opt" / "2024.1.0" / "ncu"  # explicit override first


def test_ncu_version(tmp_path, monkeypatch):
    exe = fake_ncu(tmp_path, monkeypatch, "")
    assert runner.ncu_version(exe) == "2025.3.1.0"


def test_a_hanging_ncu_version_is_stopped_soon_and_said(tmp_path):
    exe = tmp_path / "ncu"
    pid_file = tmp_path / "ncu.pid"
    exe.write_text(f'#!/bin/sh\necho $$ > "{pid_file}"\nexec sleep 600\n')
    exe.chmod(0o755)
    start = time.monotonic()
    with pytest.warns(runner.NcuVersionWarning) as caught:
        assert runner.ncu_version(exe) == "unknown"
    assert time.monotonic() - start < runner.VERSION_TIMEOUT_S + 5 <= 20
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"`{exe} --version` did not answer within") and "unknown" in message
    assert not alive(int(pid_file.read_text()))


def test_build_command():
    cmd = runner.build_command("/x/ncu", "/t/spec.json", "/r/out.ncu-rep", preset="roofline")
    assert cmd[0] == "/x/ncu"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--cache-control") + 1] == "all"
    assert "--nvtx" in cmd and cmd[cmd.index("--nvtx-include") + 1] == "oasr@sweep/"
    args = ncu_args("roofline")
    start = cmd.index(args[0])
    assert cmd[start : start + len(args)] == args
    assert cmd[cmd.index("-o") + 1] == "/r/out.ncu-rep" and "-f" in cmd
    assert cmd[-4:] == [sys.executable, "-m", "profiling.nsight.worker", "/t/spec.json"]
    timing = runner.build_command("ncu", "s", "r", preset="timing", clock_control="base", cache_control="none")
    assert timing[timing.index("--clock-control") + 1] == "base"
    assert timing[timing.index("--cache-control") + 1] == "none"
    assert ncu_args("timing")[1] in timing
    with pytest.raises(ValueError, match="unknown metric preset"):
        runner.build_command("ncu", "s", "r", preset="bogus")


def test_parse_line():
    kernel = runner.parse_line('==PROF== Profiling "ScaleKernel" - 6: 0%....50%....100% - 14 passes')
    assert kernel == {"event": "kernel", "kernel": "ScaleKernel", "index": 6, "passes": 14}
    one = runner.parse_line('==PROF== Profiling "vectorized_elementwise_kernel" - 0: 0%....50%....100% - 1 pass')
    assert one["passes"] == 1 and one["kernel"] == "vectorized_elementwise_kernel"
    done = runner.parse_line(EVENT_PREFIX + json.dumps({"event": "done", "config": {"n": 4}, "dtype": "float16"}))
    assert done["event"] == "done" and done["config"] == {"n": 4}
    for other in ("==PROF== Connected to process 12 (python3)", "hello", EVENT_PREFIX + "{not json"):
        assert runner.parse_line(other) is None


def test_worker_spec_roundtrip():
    spec = SweepSpec(op="scale", configs=[{"n": 1}, {"n": 2}], dtypes=["float16", "bfloat16"], backends=["oasr"])
    assert SweepSpec.from_json(spec.to_json()) == spec
    assert spec.cases == [({"n": 1}, "float16"), ({"n": 1}, "bfloat16"), ({"n": 2}, "float16"), ({"n": 2}, "bfloat16")]


def test_worker_loop_ranges_and_events(tmp_path, monkeypatch, capsys):
    """Warm-ups run outside every range; each measured launch inside sweep/<its range>."""
    from contextlib import contextmanager

    from profiling.harness.ops import get_op
    from profiling.nsight import worker

    stack: list[str] = []
    seen: list[tuple[str, ...]] = []

    @contextmanager
    def recording_range(name):
        stack.append(name)
        try:
            yield
        finally:
            stack.pop()

    def torch_backend(inputs):
        seen.append(tuple(stack))
        return torch.mul(inputs["x"], inputs["factor"], out=inputs["out"])

    monkeypatch.setattr(worker, "nvtx_range", recording_range)
    monkeypatch.setitem(get_op("scale").backends, "torch", torch_backend)
    spec = SweepSpec(op="scale", configs=[{"n": 64}, {"n": 256}], backends=["torch"], warmup=2, device="cpu")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.to_json())
    assert worker.main([str(spec_path)]) == 0
    events = [runner.parse_line(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events] == ["start", "ready", "done", "done", "end"]
    assert events[0]["pid"] == os.getpid() and events[0]["total"] == 2
    assert events[3] == {"event": "done", "index": 2, "total": 2, "config": {"n": 256}, "dtype": "float16"}
    assert seen == [
        (),
        (),
        ("sweep", "scale:torch:n=64,dtype=float16"),
        (),
        (),
        ("sweep", "scale:torch:n=256,dtype=float16"),
    ]


def test_profile_launches_warms_up_outside_the_range(monkeypatch):
    """The benchmark CLI's --profile: warm-ups, then the launches inside the op's own range."""
    from contextlib import contextmanager

    from profiling.nsight import naming

    stack: list[str] = []
    seen: list[object] = []

    @contextmanager
    def recording_range(name):
        stack.append(name)
        try:
            yield
        finally:
            stack.pop()

    monkeypatch.setattr(naming, "nvtx_range", recording_range)
    monkeypatch.setattr(naming.torch.cuda, "synchronize", lambda: seen.append("sync"))
    name = naming.RangeName("scale", "oasr", {"n": 64}, "float16")
    naming.profile_launches(name, lambda: seen.append(tuple(stack)), warmup=2, launches=3)
    inside = ("scale:oasr:n=64,dtype=float16",)
    assert seen == [(), (), "sync", inside, inside, inside, "sync"]
    assert name.nvtx_filter() == "oasr@scale:oasr:n=64,dtype=float16/"
    assert naming.parse_range_name(str(name)) == name


def test_worker_without_nvtx_fails_clearly(tmp_path, monkeypatch, capsys):
    from profiling.nsight import worker

    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx -> ImportError
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(SPEC.to_json())
    assert worker.main([str(spec_path)]) == worker.EXIT_NO_NVTX
    captured = capsys.readouterr()
    error = [e for e in map(runner.parse_line, captured.out.splitlines()) if e and e["event"] == "error"]
    assert error[0]["kind"] == "no_nvtx" and "pip install" in error[0]["message"]
    assert "`nvtx` Python package is missing" in captured.err


# ---------------------------------------------------------------------------
# A good run, and each failure
# ---------------------------------------------------------------------------


def test_success_progress_and_recorded_settings(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, SWEEP)
    events = []
    result = run(tmp_path, progress=lambda p: events.append((p.kind, p.kernels, p.configs_done, p.configs_total)))
    assert result.report.read_text() == "fake report"
    assert result.clock_control == "none" and result.cache_control == "all" and result.preset == "roofline"
    assert result.command[result.command.index("--nvtx-include") + 1] == "oasr@sweep/"
    assert result.ncu_version == "2025.3.1.0"
    assert result.kernels == 6
    assert result.finished == [({"n": 2048}, "float16"), ({"n": 8192}, "float16"), ({"n": 32768}, "float16")]
    kinds = [e[0] for e in events]
    assert kinds == ["start", "kernel", "kernel", "config"] * 1 + ["kernel", "kernel", "config"] * 2 + ["end"]
    assert events[3] == ("config", 2, 1, 3)
    assert events[-1] == ("end", 6, 3, 3)


def test_counters_not_permitted(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        f"""
        ev("start", pid=os.getpid(), total=len(cases))
        print({PERM_TEXT!r}, flush=True)
        for i, (c, d) in enumerate(cases):
            ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
        ev("end", total=len(cases))
        print("==WARNING== No kernels were profiled.", flush=True)
        """,
    )
    with pytest.raises(CountersNotPermittedError) as info:
        run(tmp_path, preset_args=[])
    message = str(info.value)
    assert "ERR_NVGPUCTRPERM" in message and "NVreg_RestrictProfilingToAdminUsers=0" in message
    assert "root" in message and "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in message
    assert "\n" not in message  # one paragraph


def test_counters_not_permitted_early_in_long_output(tmp_path, monkeypatch):
    """ERR_NVGPUCTRPERM is found anywhere in the output, not only in the last lines."""
    fake_ncu(
        tmp_path,
        monkeypatch,
        f"""
        print({PERM_TEXT!r}, flush=True)
        ev("start", pid=os.getpid(), total=len(cases))
        for i, (c, d) in enumerate(cases):
            for line in range(30):
                print(f"worker chatter {{i}}.{{line}}", flush=True)
            ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
        ev("end", total=len(cases))
        print("==WARNING== No kernels were profiled.", flush=True)
        """,
    )
    with pytest.raises(CountersNotPermittedError, match="NVreg_RestrictProfilingToAdminUsers=0"):
        run(tmp_path, preset_args=[])


def test_malformed_worker_events_are_ignored_with_a_note(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        textwrap.dedent(
            """
        ev("start", pid="not a pid", total=len(cases))
        ev("done", index=1)  # no config, no dtype
        ev("done", index=1, total=len(cases), config={"n": "big"}, dtype="float16")
        ev("done", index=1, total="three", config={"n": 1}, dtype="float16")
        ev("error", kind=["x"], message={"y": 1})
        ev("ready", device="cpu")
        print("@@oasr-worker " + json.dumps({"event": 5}), flush=True)
        """
        )
        + SWEEP,
    )
    with pytest.warns(runner.MalformedEventWarning, match="ignored a malformed worker event") as caught:
        result = run(tmp_path)
    assert len(caught) == 6 and len(result.notes) == 6
    assert any("'config'" in note for note in result.notes) and any("'pid'" in note for note in result.notes)
    assert result.kernels == 6 and result.finished == SPEC.cases


def test_a_malformed_event_in_a_crash_still_gives_the_crash(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        """
        ev("start", pid=os.getpid(), total=len(cases))
        ev("done")
        ev("error", kind="exception", message="RuntimeError: boom")
        sys.exit(1)
        """,
    )
    with pytest.warns(runner.MalformedEventWarning), pytest.raises(WorkerCrashedError, match="boom"):
        run(tmp_path, preset_args=[])


OUTLIVES_NCU = (
    """
holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # inherits stdout
open(os.environ["PIDS_FILE"], "w").write(str(holder.pid))
"""
    + SWEEP
)


def test_a_child_holding_stdout_does_not_delay_a_finished_run(tmp_path, monkeypatch):
    """The runner waits for ncu to exit, not for end of output; what still holds the pipe is stopped."""
    fake_ncu(tmp_path, monkeypatch, OUTLIVES_NCU)
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("PIDS_FILE", str(pids_file))
    start = time.monotonic()
    try:
        result = run(tmp_path, timeout_s=15.0, kill_grace_s=1.0)
        elapsed = time.monotonic() - start
        assert elapsed < 8, f"a finished run waited {elapsed:.1f} s for its output to end"
        assert result.kernels == 6 and len(result.finished) == 3
        assert_gone([int(pids_file.read_text())])
    finally:
        if pids_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pids_file.read_text()), signal.SIGKILL)


PASSTHROUGH = """
env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
status = subprocess.run(app, env=env).returncode
print("==WARNING== No kernels were profiled.", flush=True)
sys.exit(status)
"""


def test_no_gpu_from_the_real_worker(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, PASSTHROUGH)  # runs the real worker, with no GPU visible
    with pytest.raises(NoGpuError) as info:
        run(tmp_path, preset_args=[])
    assert str(info.value).startswith("no CUDA GPU:") and "live=False" in str(info.value)


def test_worker_crash_shows_its_stderr(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        """
        ev("start", pid=os.getpid(), total=len(cases))
        print("Traceback (most recent call last):", file=sys.stderr, flush=True)
        print('  File "worker.py", line 1, in <module>', file=sys.stderr, flush=True)
        print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr, flush=True)
        print("==ERROR== The application returned an error code (1).", flush=True)
        print("==WARNING== No kernels were profiled.", flush=True)
        sys.exit(1)
        """,
    )
    with pytest.raises(WorkerCrashedError) as info:
        run(tmp_path, preset_args=[])
    message = str(info.value)
    assert "crashed" in message and "after 0 of 3 configs" in message
    assert "illegal memory access" in message and "Traceback" in message
    assert any("illegal memory access" in line for line in info.value.output_tail)


def test_real_worker_exception(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, PASSTHROUGH)
    bad = SweepSpec(op="no_such_op", configs=[{"n": 1}])
    with pytest.raises(WorkerCrashedError, match="unknown op 'no_such_op'"):
        runner.run_sweep(bad, tmp_path / "out.ncu-rep", preset_args=[])


def test_nothing_matched_the_nvtx_filter(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        """
        ev("start", pid=os.getpid(), total=len(cases))
        for i, (c, d) in enumerate(cases):
            ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
        ev("end", total=len(cases))
        print("==WARNING== No kernels were profiled.", flush=True)
        """,
    )
    with pytest.raises(NothingProfiledError) as info:
        run(tmp_path, preset_args=[])
    assert "oasr@sweep/" in str(info.value) and "No kernels were profiled" in str(info.value)


def test_ncu_failure_after_a_good_worker(tmp_path, monkeypatch):
    fake_ncu(
        tmp_path,
        monkeypatch,
        """
        ev("start", pid=os.getpid(), total=1)
        prof(0)
        ev("end", total=1)
        print("==ERROR== An error was reported by the driver", flush=True)
        sys.exit(9)
        """,
    )
    with pytest.raises(NcuFailedError, match="exited with status 9"):
        run(tmp_path, preset_args=[])


# ---------------------------------------------------------------------------
# Timeouts and interrupts: the whole process group goes, nothing is orphaned
# ---------------------------------------------------------------------------

HANG_STUBBORN = """
signal.signal(signal.SIGINT, signal.SIG_IGN)
stubborn = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(300)"
child = subprocess.Popen([sys.executable, "-c", stubborn])
open(os.environ["PIDS_FILE"], "w").write(f"{os.getpid()} {child.pid}")
ev("start", pid=child.pid, total=len(cases))
c, d = cases[0]
prof(0); prof(1)
ev("done", index=1, total=len(cases), config=c, dtype=d)
time.sleep(300)
"""


def test_timeout_kills_the_whole_group(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, HANG_STUBBORN)  # ignores SIGINT: needs the SIGKILL stage
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("PIDS_FILE", str(pids_file))
    start = time.monotonic()
    with pytest.raises(NcuTimeoutError) as info:
        run(tmp_path, preset_args=[], timeout_s=1.5, kill_grace_s=0.5)
    elapsed = time.monotonic() - start
    assert elapsed < 6
    error = info.value
    assert error.finished == [({"n": 2048}, "float16")] and error.report is None
    assert "1.5 s" in str(error) and "1 of 3 configs done" in str(error) and "SIGKILL" in str(error)
    assert_gone([int(p) for p in pids_file.read_text().split()])


CHILD_WORKER = """
import json, os, sys, time
spec = json.load(open(sys.argv[1]))
cases = [(c, d) for c in spec["configs"] for d in spec["dtypes"]]
def ev(event, **fields):
    print("@@oasr-worker " + json.dumps(dict(event=event, **fields)), flush=True)
ev("start", pid=os.getpid(), total=len(cases))
for i, (c, d) in enumerate(cases[: int(sys.argv[2])]):
    for b in spec["backends"]:
        print(f'==PROF== Profiling "K_{b}" - {i}: 0%....50%....100% - 14 passes', flush=True)
    ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
time.sleep(300)  # a hung case; SIGINT ends it with KeyboardInterrupt
"""

HANG_THEN_SAVE = """
child = subprocess.Popen([sys.executable, os.environ["CHILD_WORKER"], app[-1], "2"])
open(os.environ["PIDS_FILE"], "w").write(f"{os.getpid()} {child.pid}")
signal.signal(signal.SIGINT, signal.SIG_IGN)
child.wait()  # like ncu: when the application ends, write what was profiled
open(out, "w").write("partial report")
print(f"==PROF== Report: {out}", flush=True)
sys.exit(child.returncode)
"""


@pytest.fixture
def hang_then_save(tmp_path, monkeypatch):
    child = tmp_path / "child_worker.py"
    child.write_text(CHILD_WORKER)
    monkeypatch.setenv("CHILD_WORKER", str(child))
    monkeypatch.setenv("PIDS_FILE", str(tmp_path / "pids"))
    fake_ncu(tmp_path, monkeypatch, HANG_THEN_SAVE)
    return tmp_path / "pids"


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_timeout_interrupts_the_worker_and_keeps_the_partial_report(tmp_path, hang_then_save, sigint):
    # Ignored as under nohup: ncu and the worker are started with SIGINT at its default all the same.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if sigint == "ignored" else signal.getsignal(signal.SIGINT))
    try:
        with pytest.raises(NcuTimeoutError) as info:
            run(tmp_path, preset_args=[], timeout_s=2.0, kill_grace_s=5.0)
    finally:
        signal.signal(signal.SIGINT, previous)
    error = info.value
    assert error.report == tmp_path / "out.ncu-rep" and error.report.read_text() == "partial report"
    assert error.finished == [({"n": 2048}, "float16"), ({"n": 8192}, "float16")]
    assert "partial report" in str(error)
    assert_gone([int(p) for p in hang_then_save.read_text().split()])


def test_keyboard_interrupt_stops_the_sweep(tmp_path, hang_then_save):
    def interrupt_after_two(progress):
        if progress.kind == "config" and progress.configs_done == 2:
            raise KeyboardInterrupt

    with pytest.raises(SweepInterruptedError) as info:
        run(tmp_path, preset_args=[], progress=interrupt_after_two, kill_grace_s=5.0)
    assert len(info.value.finished) == 2 and info.value.report is not None
    assert_gone([int(p) for p in hang_then_save.read_text().split()])


STALLING_WORKER = """
import sys, time
from profiling.nsight import worker

real_emit = worker.emit

def emit(event, **fields):
    real_emit(event, **fields)
    if event == "done" and fields["index"] >= int(sys.argv[1]):
        real_emit("stall", index=fields["index"])
        while True:  # a hung case, as a stuck kernel or driver call would leave it
            time.sleep(3600)

worker.emit = emit
sys.exit(worker.main(sys.argv[2:]))
"""


def stall_worker_after(monkeypatch: pytest.MonkeyPatch, cases: int) -> None:
    """Make every sweep's worker hang after ``cases`` config x dtype cases (the real worker, wrapped).

    The production worker has no test hook: the ncu command is rewritten to run
    :data:`STALLING_WORKER` instead of ``-m profiling.nsight.worker``.
    """
    real_build_command = runner.build_command

    def build_command(*args, **kwargs):
        command = real_build_command(*args, **kwargs)
        assert command[-3:-1] == ["-m", "profiling.nsight.worker"]
        return [*command[:-3], "-c", STALLING_WORKER, str(cases), command[-1]]

    monkeypatch.setattr(runner, "build_command", build_command)


def test_a_stalled_real_worker_times_out_keeping_finished_cases(tmp_path, monkeypatch):
    """The fault injection the live interrupt test uses, run here with the real worker on CPU."""
    fake_ncu(tmp_path, monkeypatch, PASSTHROUGH)
    stall_worker_after(monkeypatch, 2)
    spec = SweepSpec(op="scale", configs=SPEC.configs, backends=["torch"], warmup=1, device="cpu")
    start = time.monotonic()
    with pytest.raises(NcuTimeoutError) as info:
        runner.run_sweep(spec, tmp_path / "out.ncu-rep", preset_args=[], timeout_s=8.0, kill_grace_s=2.0)
    assert time.monotonic() - start < 20
    assert info.value.finished == [({"n": 2048}, "float16"), ({"n": 8192}, "float16")]
    assert "2 of 3 configs done" in str(info.value)


# ---------------------------------------------------------------------------
# On the GPU machine: a real sweep
# ---------------------------------------------------------------------------

needs_gpu_and_ncu = pytest.mark.skipif(
    not torch.cuda.is_available() or not runner.ncu_available(), reason="needs a CUDA GPU and Nsight Compute's ncu"
)


@pytest.mark.gpu
@needs_gpu_and_ncu
def test_live_scale_sweep_ten_configs_then_cache(tmp_path):
    from profiling.harness.ops import get_op
    from profiling.nsight.sweep import profile_sweep

    sweep = get_op("scale").default_sweep

    kinds: list[str] = []
    start = time.perf_counter()
    result = profile_sweep("scale", reports_dir=tmp_path, progress=lambda p: kinds.append(p.kind))
    live_s = time.perf_counter() - start
    assert len(sweep) == 10
    assert result.source == "live" and not result.replayed
    assert len(result.report_paths) == 1  # one ncu process for the whole sweep
    assert len(result.launches) == 20
    assert sorted(result.launches.groupby("backend").size().items()) == [("oasr", 10), ("torch", 10)]
    assert sorted(result.launches["n"].unique()) == sorted(c["n"] for c in sweep)
    assert (result.launches["duration_s"] > 0).all()
    assert kinds.count("kernel") == 20 and kinds.count("config") == 10
    provenance = result.provenance[0]
    assert provenance["clock_control"] == "none" and provenance["ncu_version"] != "unknown"

    start = time.perf_counter()
    again = profile_sweep("scale", reports_dir=tmp_path)
    cache_s = time.perf_counter() - start
    assert again.source == "cache" and len(again.launches) == 20
    print(f"\nlive 10-config sweep: {live_s:.1f} s; repeat from cache: {cache_s * 1000:.0f} ms")
    assert live_s < 30, f"live sweep took {live_s:.1f} s"
    assert cache_s < 1.0, f"cache hit took {cache_s:.2f} s"


@pytest.mark.gpu
@needs_gpu_and_ncu
def test_live_interrupted_sweep_keeps_finished_launches(tmp_path, monkeypatch):
    from profiling.nsight.reader import read_report

    stall_worker_after(monkeypatch, 2)
    spec = SweepSpec(op="scale", configs=[{"n": 2048 * 4**k} for k in range(5)])

    def stop_when_stalled(progress):
        if progress.kind == "config" and progress.configs_done == 2:
            raise KeyboardInterrupt

    with pytest.raises(SweepInterruptedError) as info:
        runner.run_sweep(spec, tmp_path / "partial.ncu-rep", progress=stop_when_stalled, timeout_s=300)
    assert len(info.value.finished) == 2
    assert info.value.report is not None, "ncu wrote no report after the worker was interrupted"
    launches = read_report(info.value.report).launches
    assert len(launches) == 4 and set(launches["n"]) == {2048, 8192}
