"""Sweeps over several GPUs (profiling.scaleout): GPU selection, the local and the Ray engine, failures.

The engines run on fake GPUs here: device ids handed to workers as ``CUDA_VISIBLE_DEVICES``,
with work that needs no GPU. A worker killed mid-sweep (``os._exit`` the first time a
chunk runs, a marker file remembering it) must lose only that chunk, which is redone
on another GPU. Ray tests start a local Ray with ``num_gpus=2`` faked as resources.
The GPU tests at the end compare a live sweep on 1 GPU and on all GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from test_ncu_runner import CHILD_WORKER, HANG_THEN_SAVE, assert_gone, fake_ncu
from test_reports import _notebook
from test_reports import reports_dir as reports_dir  # the fixture, re-exported
from test_store import CONFIGS, GOOD, LiveEnv

from benchmarks import oasr_benchmark as benchmark
from oasr.jit.families import SCALE
from profiling.harness.ops import get_op
from profiling.nsight import runner
from profiling.nsight import sweep as sweep_cli
from profiling.nsight.sweep import profile_sweep
from profiling.nsight.worker import SweepSpec
from profiling.scaleout import gpus as gpus_module
from profiling.scaleout import ray_engine
from profiling.scaleout import timing as scaleout_timing
from profiling.scaleout.chunks import LOST, OK, Attempt, ChunkLost, ChunkRun, call, worker_gpu
from profiling.scaleout.engine import run_chunks, start_workers
from profiling.scaleout.gpus import resolve
from profiling.scaleout.local import run_local
from profiling.scaleout.pool import WorkerPool, shared_pool, shutdown_shared_pool
from profiling.scaleout.threads import run_threads
from profiling.scaleout.timing import SweepFailedError, measure_sweep
from profiling.workbench import panel as panel_module
from profiling.workbench import publish
from profiling.workbench.notebook import Workbench
from profiling.workbench.panel import SweepPanel

TESTS = str(Path(__file__).resolve().parent)


# ---------------------------------------------------------------------------
# Chunk functions (module level: workers import them by name)
# ---------------------------------------------------------------------------


def square(chunk: int) -> dict:
    return {"value": chunk * chunk, "gpu": worker_gpu(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def slow_square(chunk: int) -> dict:
    time.sleep(0.3)
    return square(chunk)


def die_once(chunk: tuple[int, str]) -> dict:
    """Kill this worker the first time chunk 3 runs (the marker file remembers it across processes)."""
    value, marker = chunk
    if value == 3 and not Path(marker).exists():
        Path(marker).write_text(worker_gpu())
        os._exit(17)
    time.sleep(0.2)
    return square(value)


def always_die(chunk: int) -> dict:
    if chunk == 1:
        os._exit(9)
    return square(chunk)


def raise_on_two(chunk: int) -> dict:
    if chunk == 2:
        raise ValueError("chunk two is bad")
    return square(chunk)


def env_of_worker(name: str) -> dict:
    return {"value": os.environ.get(name), "pid": os.getpid(), "gpu": worker_gpu()}


def descendants(pid: int) -> set[int]:
    """Live (not zombie) processes below ``pid``."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def assert_no_workers_left(pids: list[int], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and p in descendants(1) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if p in descendants(1)]
    assert not left, f"worker processes {left} outlived the pool"


# ---------------------------------------------------------------------------
# GPU selection
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("all", ["0", "1", "2"]), (2, ["0", "1"]), ("2", ["0", "1"]), ([2, 0], ["2", "0"]), ("1,2", ["1", "2"])],
)
def test_resolve_all_count_and_list(spec, expected):
    assert resolve(spec, available=["0", "1", "2"]) == expected


@pytest.mark.parametrize(
    ("spec", "error", "words"),
    [
        (0, ValueError, "at least 1"),
        (4, ValueError, "has 3 GPU"),
        ([0, 0], ValueError, "listed twice"),
        ([5], ValueError, "no GPU 5"),
        ([], ValueError, "empty"),
        (True, TypeError, "gpus must be"),
        (2.5, TypeError, "gpus must be"),
    ],
)
def test_resolve_rejects_bad_requests_naming_the_argument(spec, error, words):
    with pytest.raises(error, match=words) as info:
        resolve(spec, available=["0", "1", "2"])
    assert "gpus" in str(info.value)


def test_resolve_all_without_gpus_says_so():
    with pytest.raises(ValueError, match="found no GPU"):
        resolve("all", available=[])


def test_discover_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setattr(gpus_module, "_driver_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpus_module.discover() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,2")  # CUDA stops at the first invalid entry
    assert gpus_module.discover() == ["1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus_module.discover() == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus_module.discover() == ["0", "1", "2", "3"]


def test_bad_engine_and_address_without_ray():
    with pytest.raises(ValueError, match="engine must be one of local, ray"):
        run_chunks(square, [1], gpus=["0"], engine="dask")
    with pytest.raises(ValueError, match="needs engine='ray'"):
        run_chunks(square, [1], gpus=["0"], address="auto")


def test_fn_must_be_importable_by_the_workers():
    with pytest.raises(TypeError, match="fn must be a module-level function"):
        run_chunks(lambda chunk: chunk, [1], gpus=["0"])


def test_ray_missing_names_the_install_command(monkeypatch):
    monkeypatch.setattr(ray_engine, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'oasr\[scaleout\]'"):
        run_chunks(square, [1], gpus=1, engine="ray")


# ---------------------------------------------------------------------------
# The local engine
# ---------------------------------------------------------------------------


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two fake GPUs "0" and "1" for resolve(); workers get them as CUDA_VISIBLE_DEVICES."""
    monkeypatch.setattr(gpus_module, "discover", lambda: ["0", "1"])
    return ["0", "1"]


def test_local_engine_spreads_chunks_over_gpus_in_order(fake_gpus):
    seen = []
    run = run_chunks(slow_square, list(range(6)), gpus="all", on_result=lambda i, r, a: seen.append(i))
    assert run.ok and sorted(seen) == list(range(6))
    assert [r["value"] for r in run.results] == [i * i for i in range(6)]
    used = {r["gpu"] for r in run.results}
    assert used == {"0", "1"}, "both workers took chunks"
    assert all(r["gpu"] == r["visible"] for r in run.results), "each worker sees only its GPU"
    assert all(run.placement(i).gpu == run.results[i]["gpu"] for i in range(6))
    assert "6 of 6 chunks done on 2 GPU(s)" in run.summary()


def test_local_engine_worker_killed_mid_sweep_loses_only_its_chunk(fake_gpus, tmp_path):
    marker = tmp_path / "killed"
    chunks = [(i, str(marker)) for i in range(8)]
    run = run_chunks(die_once, chunks, gpus="all")
    assert run.ok, run.summary()
    assert [r["value"] for r in run.results] == [i * i for i in range(8)], "nothing finished was lost"
    lost = [a for a in run.attempts if a.outcome == LOST]
    assert [a.chunk for a in lost] == [3]
    died_on = marker.read_text()
    assert lost[0].gpu == died_on
    redone = run.placement(3)
    assert redone is not None and redone.gpu != died_on, "the lost chunk was redone on the other GPU"
    assert sum(a.outcome == OK for a in run.attempts) == 8
    assert "chunk 3 lost on" in run.summary() and "redone on" in run.summary()


def test_local_engine_gives_up_after_max_attempts(fake_gpus):
    run = run_chunks(always_die, [0, 1, 2], gpus="all", max_attempts=2)
    assert not run.ok and set(run.errors) == {1}
    assert "lost 2 times" in run.errors[1]
    assert run.results[0]["value"] == 0 and run.results[2]["value"] == 4
    assert "chunk 1 FAILED" in run.summary()


def test_local_engine_reports_a_raising_chunk_without_retrying(fake_gpus):
    run = run_chunks(raise_on_two, [1, 2, 3], gpus=["1"])
    assert set(run.errors) == {1} and "ValueError: chunk two is bad" in run.errors[1]  # chunk index 1 is 2
    assert [a.chunk for a in run.attempts].count(1) == 1
    assert run.results[0]["gpu"] == "1" and run.results[2]["value"] == 9


def test_local_engine_time_limit(fake_gpus):
    start = time.perf_counter()
    run = run_chunks(slow_square, list(range(200)), gpus=["0"], timeout_s=15.0)  # 60 s of work
    assert time.perf_counter() - start < 45, "the busy worker was interrupted, not waited for"
    assert run.errors and all("time limit" in e for e in run.errors.values())
    done = [i for i, r in enumerate(run.results) if r is not None]
    assert done and not set(done) & set(run.errors), "what finished before the limit is kept"


def test_pool_keeps_warm_workers_across_runs_and_leaves_no_process(fake_gpus, monkeypatch):
    with WorkerPool() as pool:
        first = run_local(env_of_worker, ["X"] * 4, ["0", "1"], pool=pool)
        monkeypatch.setenv("OASR_TEST_VALUE", "set after the workers started")
        second = run_local(env_of_worker, ["OASR_TEST_VALUE"] * 4, ["0", "1"], pool=pool)
        assert first.ok and second.ok
        pids = {r["pid"] for r in first.results}
        assert len(pids) == 2 and {r["pid"] for r in second.results} == pids, "the same two workers, kept warm"
        assert {r["value"] for r in second.results} == {"set after the workers started"}, "the driver's environment"
        assert set(first.ready_s) == {"0", "1"} and set(second.ready_s) == {"0", "1"}
        assert all(v == 0.0 for v in second.ready_s.values()), "warm workers need no start-up"
        assert sorted(pool.pids()) == sorted(pids)
        assert pids <= descendants(os.getpid()), "workers are this process's (via its forkserver)"
    assert_no_workers_left(sorted(pids))
    with pytest.raises(RuntimeError, match="shut down"):
        pool.lease("0")


def test_pool_worker_killed_mid_sweep_is_replaced_and_nothing_leaks(fake_gpus, tmp_path):
    marker = tmp_path / "killed"
    with WorkerPool() as pool:
        run = run_local(die_once, [(i, str(marker)) for i in range(8)], ["0", "1"], pool=pool)
        assert run.ok and [r["value"] for r in run.results] == [i * i for i in range(8)]
        lost = [a for a in run.attempts if a.outcome == LOST]
        assert [a.chunk for a in lost] == [3] and run.placement(3).gpu != lost[0].gpu
        held = pool.pids()
        assert len(held) == 2, "the dead worker left the pool and a new one took its GPU"
        again = run_local(square, [1, 2], ["0", "1"], pool=pool)
        assert again.ok and sorted(pool.pids()) == sorted(held)
    assert_no_workers_left(held)


def test_run_startup_rows(fake_gpus):
    with WorkerPool() as pool:
        run = run_local(slow_square, list(range(6)), ["0", "1"], pool=pool)
    rows = {row["gpu"]: row for row in run.startup()}
    assert set(rows) == {"0", "1"} and sum(r["chunks"] for r in rows.values()) == 6
    for row in rows.values():
        assert row["first_result_s"] >= row["first_chunk_s"] >= 0.3 and row["median_chunk_s"] >= 0.3
        assert 0 <= row["ready_s"] <= row["first_result_s"]


def test_shared_pool_is_shut_down_on_request(fake_gpus):
    run = run_chunks(square, [1, 2, 3], gpus="all")
    assert run.ok
    held = shared_pool().pids()
    assert held
    shutdown_shared_pool()
    assert_no_workers_left(held)
    assert run_chunks(square, [4], gpus="all").ok, "a new session pool starts on the next sweep"
    shutdown_shared_pool()


def test_start_workers_ahead_of_the_first_sweep(fake_gpus):
    shutdown_shared_pool()
    start_workers("all").join()
    warm = shared_pool().pids()
    assert len(warm) == 2
    run = run_chunks(env_of_worker, ["X", "X"], gpus="all")
    assert {r["pid"] for r in run.results} <= set(warm), "the sweep used the workers started ahead"
    shutdown_shared_pool()
    assert_no_workers_left(warm)


# ---------------------------------------------------------------------------
# The driver-thread engine (one subprocess per GPU, started by the driver)
# ---------------------------------------------------------------------------


def sleeper(chunk: tuple[int, str], gpu: str, stop: threading.Event) -> dict:
    """Run a child process on ``gpu`` for a chunk; it is killed the first time chunk 2 runs (ChunkLost)."""
    value, marker = chunk
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, time; time.sleep(0.3); print(os.environ['CUDA_VISIBLE_DEVICES'])"],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    if value == 2 and not Path(marker).exists():
        Path(marker).write_text(gpu)
        child.kill()
    while child.poll() is None:
        if stop.wait(0.02):
            child.kill()
            child.wait()
            return {"value": value, "partial": True, "gpu": gpu, "parent": os.getpid()}
    if child.returncode != 0:
        raise ChunkLost(f"its process died (exit status {child.returncode})")
    return {"value": value, "seen": child.stdout.read().strip(), "gpu": gpu, "parent": os.getpid()}


def failing_sleeper(chunk: int, gpu: str, stop: threading.Event) -> dict:
    if chunk == 1:
        raise ChunkLost("its ncu died")
    if chunk == 2:
        raise ValueError("chunk two is bad")
    return {"value": chunk, "gpu": gpu}


def test_thread_engine_runs_one_process_per_gpu_from_the_driver(tmp_path):
    arrived = []
    marker = tmp_path / "killed"
    run = run_threads(sleeper, [(i, str(marker)) for i in range(6)], ["0", "1"],
                      on_result=lambda i, r, a: arrived.append((i, threading.current_thread().name)))  # fmt: skip
    assert run.ok, run.summary()
    assert [r["value"] for r in run.results] == list(range(6))
    assert all(r["seen"] == r["gpu"] == run.placement(i).gpu for i, r in enumerate(run.results))
    assert {r["parent"] for r in run.results} == {os.getpid()}, "no worker process in between"
    assert {name for _, name in arrived} == {threading.current_thread().name}, "results are handled in the caller"
    lost = [a for a in run.attempts if a.outcome == LOST]
    assert [a.chunk for a in lost] == [2] and run.placement(2).gpu != marker.read_text(), "redone on the other GPU"
    assert "chunk 2 lost on" in run.summary() and "redone on" in run.summary()
    assert {row["gpu"] for row in run.startup()} == {"0", "1"}


def test_thread_engine_errors_losses_and_retired_gpus():
    run = run_threads(failing_sleeper, [0, 1, 2, 3], ["0", "1"], max_attempts=2)
    assert set(run.errors) == {1, 2}
    assert "lost 2 times" in run.errors[1] and "ValueError: chunk two is bad" in run.errors[2]
    assert run.results[0]["value"] == 0 and run.results[3]["value"] == 3
    retired = run_threads(failing_sleeper, [1, 1, 1, 0], ["0"], max_attempts=3, max_deaths_per_gpu=2)
    assert set(retired.errors) >= {0, 1} and "retired" in " ".join(retired.errors.values())


def test_thread_engine_time_limit_keeps_what_the_chunks_return(tmp_path):
    start = time.perf_counter()
    run = run_threads(slow_child, list(range(10)), ["0", "1"], timeout_s=1.0)
    assert time.perf_counter() - start < 10, "the running chunks were stopped"
    stopped = [r for r in run.results if r is not None and r["partial"]]
    assert len(stopped) == 2, "each GPU's running chunk returned what it had"
    assert {i for i, r in enumerate(run.results) if r is None} == set(run.errors)
    assert all("time limit" in e for e in run.errors.values())


def slow_child(chunk: int, gpu: str, stop: threading.Event) -> dict:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stopped = stop.wait(30)
    child.kill()
    child.wait()
    return {"value": chunk, "partial": stopped}


# ---------------------------------------------------------------------------
# The Ray engine (a local Ray with two GPUs faked as resources)
# ---------------------------------------------------------------------------


RAY = pytest.mark.slow  # a local Ray cluster takes ~25 s to start: the full tier


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    path = os.pathsep.join([str(Path(TESTS).parent), TESTS, os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2,
        num_gpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield ray
    ray.shutdown()


@RAY
def test_ray_engine_runs_each_chunk_on_one_gpu(local_ray):
    seen = []
    run = run_chunks(slow_square, list(range(6)), gpus="all", engine="ray", timeout_s=120,
                     on_result=lambda i, r, a: seen.append(i))  # fmt: skip
    assert run.ok, run.summary()
    assert sorted(seen) == list(range(6))
    assert [r["value"] for r in run.results] == [i * i for i in range(6)]
    assert {r["visible"] for r in run.results} <= {"0", "1"}, "Ray pinned each task to one GPU"
    assert all(run.placement(i).gpu == run.results[i]["visible"] for i in range(6))
    assert "ray engine: 6 of 6 chunks done" in run.summary()


@RAY
def test_ray_engine_worker_killed_mid_sweep_loses_only_its_chunk(local_ray, tmp_path):
    marker = tmp_path / "killed"
    run = run_chunks(die_once, [(i, str(marker)) for i in range(6)], gpus=2, engine="ray", timeout_s=120)
    assert run.ok, run.summary()
    assert [r["value"] for r in run.results] == [i * i for i in range(6)], "nothing finished was lost"
    lost = [a for a in run.attempts if a.outcome == LOST]
    assert [a.chunk for a in lost] == [3] and marker.exists()
    assert run.placement(3) is not None
    assert "chunk 3 lost" in run.summary()


@RAY
def test_ray_engine_rejects_more_gpus_than_the_cluster_has(local_ray):
    with pytest.raises(ValueError, match="gpus=3, but the Ray cluster has 2"):
        run_chunks(square, [1], gpus=3, engine="ray")
    with pytest.raises(ValueError, match="'all' or a count"):
        run_chunks(square, [1], gpus=[0, 1], engine="ray")


# ---------------------------------------------------------------------------
# profile_sweep spread over fake GPUs, with a fake ncu (see tests/test_store.py)
# ---------------------------------------------------------------------------

KILLS_ITSELF_ONCE = (
    """
if any(c["n"] == 8192 for c in spec["configs"]) and not os.path.exists(os.environ["KILL_MARKER"]):
    open(os.environ["KILL_MARKER"], "w").write(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    ev("start", pid=os.getpid(), total=len(cases))
    os.kill(os.getpid(), signal.SIGKILL)  # this ncu dies with its chunk half-way
"""
    + GOOD
)


@pytest.fixture
def live(tmp_path, monkeypatch, fake_gpus):
    return LiveEnv(tmp_path, monkeypatch)


def test_profile_sweep_on_two_gpus_matches_one_process(live):
    single = live.profile()
    spread = profile_sweep("scale", configs=CONFIGS, reports_dir=live.tmp_path / "spread", gpus="all")
    assert spread.source == "live" and len(live.calls()) == 3, "one ncu for the single run, one per GPU"
    assert sorted([d["n"] for d in c["configs"]] for c in live.calls()[1:]) == [[2048, 32768], [8192]]
    key = ["backend", "dtype", "n"]
    same = ["backend", "dtype", "n", "kernel"]
    pd.testing.assert_frame_equal(
        single.launches.sort_values(key)[same].reset_index(drop=True),
        spread.launches.sort_values(key)[same].reset_index(drop=True),
    )
    assert set(spread.launches["gpu_device"]) == {"0", "1"}, "each launch carries the GPU it ran on"
    assert spread.launches.groupby("n")["gpu_device"].nunique().max() == 1
    assert len(spread.report_paths) == 2 and "2 of 2 chunks done on 2 GPU(s)" in spread.placement
    assert all(p["engine"] == "local" and p["chunks"] == 2 for p in spread.provenance)
    assert "local engine" in spread.summary()
    again = profile_sweep("scale", configs=CONFIGS, reports_dir=live.tmp_path / "spread", gpus="all")
    assert again.source == "cache" and len(live.calls()) == 3


def test_profile_sweep_worker_killed_mid_sweep_redoes_its_chunk_elsewhere(live, monkeypatch):
    marker = live.tmp_path / "killed"
    monkeypatch.setenv("KILL_MARKER", str(marker))
    live.use(KILLS_ITSELF_ONCE)
    result = live.profile(gpus=["0", "1"])
    assert marker.exists() and len(result.launches) == 6 and not result.missing
    died_on = marker.read_text()
    ran_on = result.launches.loc[result.launches["n"] == 8192, "gpu_device"].unique().tolist()
    assert ran_on != [died_on] and len(ran_on) == 1, "the lost chunk was profiled on the other GPU"
    assert "lost on" in result.placement and "redone on" in result.placement


LOGS_ITS_PLACE = (
    """
open(os.path.join("/tmp", "oasr-test-" + os.environ["CUDA_VISIBLE_DEVICES"]), "w").write("made by ncu")
with open(os.environ["PLACE_LOG"], "a") as place:
    place.write(json.dumps({"ppid": os.getppid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "tmpdir": os.environ.get("TMPDIR"), "tmp": sorted(os.listdir("/tmp"))}) + "\\n")
"""
    + GOOD
)


def _places(live, monkeypatch, **kwargs) -> list[dict]:
    log = live.tmp_path / "places.jsonl"
    monkeypatch.setenv("PLACE_LOG", str(log))
    live.use(LOGS_ITS_PLACE)
    result = live.profile(gpus=["0", "1"], **kwargs)
    assert len(result.launches) == 6 and set(result.launches["gpu_device"]) == {"0", "1"}
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_profile_sweep_driver_starts_one_ncu_per_gpu_with_its_own_tmpdir(live, monkeypatch):
    places = _places(live, monkeypatch)
    assert sorted(p["gpu"] for p in places) == ["0", "1"]
    assert {p["ppid"] for p in places} == {os.getpid()}, "ncu is the driver's child: no worker process in between"
    tmpdirs = [p["tmpdir"] for p in places]
    assert len(set(tmpdirs)) == 2 and all("oasr-chunk-" in t for t in tmpdirs), "a private TMPDIR per ncu"
    assert not any(Path(t).exists() for t in tmpdirs), "removed after the run"
    for gpu in ("0", "1"):
        Path("/tmp", f"oasr-test-{gpu}").unlink()  # a shared /tmp by default


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a private /tmp needs root and unshare")
def test_profile_sweep_private_tmp_hides_the_hosts_tmp(monkeypatch, fake_gpus):
    mine = Path(tempfile.mkstemp(prefix="oasr-test-visible-")[1])
    outside = Path(tempfile.mkdtemp(prefix="oasr-test-", dir="/var/tmp"))  # the fake ncu must not sit in /tmp
    try:
        places = _places(LiveEnv(outside, monkeypatch), monkeypatch, private_tmp=True)
    finally:
        mine.unlink()
        shutil.rmtree(outside)
    assert sorted(p["gpu"] for p in places) == ["0", "1"]
    assert all(mine.name not in p["tmp"] for p in places), "each ncu saw an empty /tmp of its own"
    assert not Path("/tmp/oasr-test-0").exists() and not Path("/tmp/oasr-test-1").exists()


def test_private_tmp_without_root_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    spec = SweepSpec(op="scale", configs=[{"n": 2048}], dtypes=["float16"])
    with pytest.raises(ValueError, match=r"private_tmp=True .* needs root"):
        runner.run_sweep(spec, tmp_path / "out.ncu-rep", private_tmp=True, ncu="ncu")


def test_runner_stop_event_interrupts_and_keeps_the_partial_report(tmp_path, monkeypatch):
    child = tmp_path / "child_worker.py"
    child.write_text(CHILD_WORKER)
    monkeypatch.setenv("CHILD_WORKER", str(child))
    monkeypatch.setenv("PIDS_FILE", str(tmp_path / "pids"))
    fake_ncu(tmp_path, monkeypatch, HANG_THEN_SAVE)
    stop = threading.Event()
    threading.Timer(2.0, stop.set).start()
    spec = SweepSpec(op="scale", configs=[{"n": 2048}, {"n": 8192}, {"n": 32768}], dtypes=["float16"])
    with pytest.raises(runner.SweepInterruptedError) as info:
        runner.run_sweep(spec, tmp_path / "out.ncu-rep", preset_args=[], stop=stop, kill_grace_s=5.0,
                         env={"CUDA_VISIBLE_DEVICES": "7"})  # fmt: skip
    assert len(info.value.finished) == 2 and info.value.report.read_text() == "partial report"
    assert_gone([int(p) for p in (tmp_path / "pids").read_text().split()])


def test_profile_sweep_a_failure_of_its_own_is_not_retried(live):
    live.use('print("==ERROR== ERR_NVGPUCTRPERM - no permission", flush=True)\nsys.exit(1)\n')
    with pytest.raises(runner.NcuFailedError, match="2 problem") as info:
        live.profile(gpus=["0", "1"])
    assert len(live.calls()) == 2, "one ncu per chunk: a refused permission would fail again elsewhere"
    assert "CountersNotPermittedError" in str(info.value) or "ERR_NVGPUCTRPERM" in str(info.value)


def test_profile_sweep_bad_engine_names_the_argument(live):
    with pytest.raises(ValueError, match="engine must be one of"):
        live.profile(gpus="all", engine="slurm")


# ---------------------------------------------------------------------------
# The timing sweep's assembly (the engines are tested above; measure needs a GPU)
# ---------------------------------------------------------------------------


def fake_measure(op, configs, dtypes, backends, **options):
    (config,) = configs
    (dtype,) = dtypes
    if config["n"] == 666:
        raise RuntimeError("no such size")
    rows = [
        {"op": op.name, "backend": b, "n": config["n"], "dtype": dtype, "seconds": 1e-6 * config["n"]} for b in backends
    ]
    return pd.DataFrame(rows)


def in_process_engine(fn, chunks, *, gpus, engine, address, on_result):
    """run_chunks' contract, in this process, chunks dealt to fake GPUs "0" and "1" in turn, last first."""
    run = ChunkRun(engine, ["0", "1"], [None] * len(chunks))
    for index in reversed(range(len(chunks))):
        outcome, value, seconds = call(fn, chunks[index])
        attempt = Attempt(index, str(index % 2), "hostA", seconds, outcome, "" if outcome == OK else value)
        run.attempts.append(attempt)
        if outcome == OK:
            run.results[index] = value
            on_result(index, value, attempt)
        else:
            run.errors[index] = value
    return run


@pytest.fixture
def fake_timing(monkeypatch):
    built: list[list[str]] = []
    monkeypatch.setattr(scaleout_timing, "measure", fake_measure)
    monkeypatch.setattr(scaleout_timing, "run_chunks", in_process_engine)
    monkeypatch.setattr(scaleout_timing, "prebuild", built.append)
    return built


def test_measure_sweep_keeps_the_sweep_order_and_says_where_each_row_ran(fake_timing):
    arrived = []
    frame = measure_sweep(get_op("scale"), [{"n": 1}, {"n": 2}, {"n": 3}], ["fp16", "float32"], gpus="all",
                          on_rows=arrived.append)  # fmt: skip
    assert fake_timing == [["scale"] * 6], "the driver built the kernels while the workers started"
    assert frame[["n", "dtype"]].drop_duplicates().values.tolist() == [
        [1, "float16"], [1, "float32"], [2, "float16"], [2, "float32"], [3, "float16"], [3, "float32"],
    ]  # fmt: skip
    assert frame["gpu_device"].tolist() == [str(i // 2 % 2) for i in range(12)] and set(frame["host"]) == {"hostA"}
    assert [batch[0]["n"] for batch in arrived] == [3, 3, 2, 2, 1, 1], "rows are passed on as they arrive"
    assert all("gpu_device" in row for batch in arrived for row in batch)
    assert list(frame.columns[-2:]) == ["gpu_device", "host"]


def test_each_sweep_loads_the_kernels_afresh_in_a_kept_worker(monkeypatch):
    forgotten = []
    monkeypatch.setattr(scaleout_timing, "measure", fake_measure)
    monkeypatch.setattr(scaleout_timing, "forget_loaded_modules", lambda: forgotten.append(1))
    for _ in range(2):  # two sweeps in one worker: a kernel edited in between is rebuilt
        cases = scaleout_timing.plan(get_op("scale"), [{"n": 1}, {"n": 2}], ["fp16", "bf16"])
        assert len({case.sweep for case in cases}) == 1
        rows = [row for case in cases for row in scaleout_timing.measure_case(case)]
        assert [r["n"] for r in rows] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert len(forgotten) == 2, "once per sweep, not per case"


def test_measure_sweep_failure_keeps_what_finished(fake_timing):
    with pytest.raises(SweepFailedError, match="1 of 3 cases of scale failed") as info:
        measure_sweep(get_op("scale"), [{"n": 1}, {"n": 666}, {"n": 3}], ["fp16"], gpus="all")
    assert info.value.rows["n"].tolist() == [1, 1, 3, 3]
    assert "RuntimeError: no such size" in str(info.value)


def test_measure_sweep_checks_arguments_before_running(fake_timing):
    with pytest.raises(ValueError, match="backends: op 'scale' has no backend cutlass"):
        measure_sweep(get_op("scale"), [{"n": 1}], ["fp16"], ["cutlass"], gpus="all")
    with pytest.raises(ValueError, match="engine must be one of"):
        measure_sweep(get_op("scale"), [{"n": 1}], ["fp16"], gpus="all", engine="mpi")
    with pytest.raises(ValueError, match="dtype"):
        measure_sweep(get_op("scale"), [{"n": 1}], ["int7"], gpus="all")


# ---------------------------------------------------------------------------
# The panel on several GPUs, the benchmark CLI's flags
# ---------------------------------------------------------------------------


def test_panel_times_on_one_gpu_while_it_profiles_on_another(tmp_path, monkeypatch, fake_gpus):
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    calls: list[tuple] = []
    profiling_started = threading.Event()

    def fake_measure_sweep(op, configs, dtypes, backends, *, gpus, engine):
        assert profiling_started.wait(10), "the timing waited for the profile: they did not overlap"
        calls.append(("measure", gpus, engine))
        rows = [
            {"backend": b, "config": op.config_label(c), "dtype": d, "seconds": 1e-6, "bandwidth_bytes_per_s": 1e12}
            | {"pct_of_copy": 25.0, "gpu_device": gpus[0]}
            for c in configs
            for d in dtypes
            for b in backends
        ]
        return pd.DataFrame(rows)

    def fake_profile_sweep(op, *, configs, dtypes, backends, preset, live, gpus, engine):
        profiling_started.set()
        calls.append(("profile", gpus, engine))
        launches = pd.DataFrame({"backend": backends, "kernel": [f"K_{b}" for b in backends], "duration_s": 1e-6})
        return SimpleNamespace(launches=launches)

    monkeypatch.setattr(panel_module, "measure_sweep", fake_measure_sweep)
    monkeypatch.setattr(panel_module, "profile_sweep", fake_profile_sweep)
    panel = SweepPanel(Workbench(SCALE), gpus="all")
    panel.preset.value = "timing"
    panel.run.click()
    assert not panel.error, panel.error
    assert sorted(calls) == [("measure", ["0"], "local"), ("profile", ["1"], "local")]
    table = panel.comparison()
    assert table["gpu_device"].tolist() == ["0", "0"] and table["kernel"].tolist() == ["K_oasr", "K_torch"]


def test_panel_rejects_a_bad_engine():
    with pytest.raises(ValueError, match="engine must be one of"):
        SweepPanel(Workbench(SCALE), gpus="all", engine="mpi")


def test_benchmark_cli_scaleout_flags(capsys):
    assert benchmark.main(["--routine", "scale", "--gpus", "2", "--engine", "ray", "--dry_run"]) == 0
    assert benchmark.main(["--routine", "scale", "--engine", "dask"]) == 2
    assert "--engine: invalid choice: 'dask'" in capsys.readouterr().err
    assert benchmark.main(["--routine", "scale", "--address", "auto"]) == 2
    assert "--address joins a Ray cluster: it needs --engine ray" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# The main command: one notebook per GPU
# ---------------------------------------------------------------------------

STAMP = """import json, os, time, pathlib
start = time.time(); time.sleep(3)
pathlib.Path({path!r}).write_text(json.dumps([os.environ.get("CUDA_VISIBLE_DEVICES"), start, time.time()]))"""


def test_notebooks_run_in_parallel_one_per_gpu(tmp_path, reports_dir):
    stamps = {name: tmp_path / f"{name}.json" for name in ("01_a", "02_b", "03_c")}
    paths = [_notebook(tmp_path / f"{name}.ipynb", STAMP.format(path=str(stamp))) for name, stamp in stamps.items()]
    runs = publish.run_notebooks(paths, reports_dir / "testgpu", gpus=["0", "1"])
    assert [run.notebook for run in runs] == paths and all(run.ok for run in runs), [r.error for r in runs]
    seen = {name: json.loads(stamp.read_text()) for name, stamp in stamps.items()}
    assert {run.gpu for run in runs} == {"0", "1"}
    assert all(seen[run.notebook.stem][0] == run.gpu for run in runs), "each kernel saw only its GPU"
    (_, a0, a1), (_, b0, b1) = seen["01_a"], seen["02_b"]
    assert a0 < b1 and b0 < a1, "the first two notebooks ran at the same time"
    assert (reports_dir / "testgpu" / "03_c.html").is_file()


def test_replay_runs_jobs_notebooks_at_a_time(tmp_path, reports_dir):
    stamps = {name: tmp_path / f"{name}.json" for name in ("01_a", "02_b", "03_c")}
    paths = [_notebook(tmp_path / f"{name}.ipynb", STAMP.format(path=str(stamp))) for name, stamp in stamps.items()]
    runs = publish.run_notebooks(paths, reports_dir / "replay" / "h200", jobs=2)
    assert [run.notebook for run in runs] == paths and all(run.ok for run in runs), [r.error for r in runs]
    seen = {name: json.loads(stamp.read_text()) for name, stamp in stamps.items()}
    (_, a0, a1), (_, b0, b1) = seen["01_a"], seen["02_b"]
    assert a0 < b1 and b0 < a1, "the first two notebooks ran at the same time"
    assert all(run.gpu is None for run in runs) and (reports_dir / "replay" / "h200" / "03_c.html").is_file()


def test_main_command_jobs_must_be_positive(tmp_path, reports_dir, capsys):
    with pytest.raises(SystemExit):
        publish.main(["--jobs", "0", str(_notebook(tmp_path / "01_x.ipynb", "1"))])
    assert "argument --jobs: must be at least 1" in capsys.readouterr().err


def test_main_command_gpus_flag_needs_live(tmp_path, reports_dir, capsys):
    with pytest.raises(SystemExit):
        publish.main(["--gpus", "2", str(_notebook(tmp_path / "01_x.ipynb", "1"))])
    assert "notebooks run on GPUs only live" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Live, on the GPUs of this machine
# ---------------------------------------------------------------------------

LIVE_CONFIGS = [{"b": 8, "t": 250, "c": 512}, {"b": 16, "t": 500, "c": 512}, {"b": 33, "t": 77, "c": 384}]


def _same_up_to_noise(base: pd.DataFrame, other: pd.DataFrame, column: str, low: float, high: float) -> None:
    key = ["backend", "config", "dtype"]
    merged = base[[*key, column]].merge(other[[*key, column]], on=key, suffixes=("_1", "_n"))
    assert len(merged) == len(base) == len(other), "the same rows"
    ratio = merged[f"{column}_n"] / merged[f"{column}_1"]
    assert ratio.between(low, high).all(), merged.assign(ratio=ratio)


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_live_timing_sweep_on_all_gpus_matches_one_process(engine):
    if engine == "ray":
        pytest.importorskip("ray")
    op = get_op("rms_norm")
    single = measure_sweep(op, LIVE_CONFIGS, ["float16", "bfloat16"], check=True)
    spread = measure_sweep(op, LIVE_CONFIGS, ["float16", "bfloat16"], check=True, gpus="all", engine=engine)
    assert (single["refcheck"] == "pass").all() and (spread["refcheck"] == "pass").all()
    assert spread["gpu_device"].nunique() == min(len(gpus_module.discover()), len(spread) // 2)
    _same_up_to_noise(single, spread, "seconds", 0.6, 1.6)  # a few microseconds each: graph timing noise
    assert list(spread.columns) == list(single.columns)


@pytest.mark.gpu
def test_live_ncu_sweep_on_all_gpus_matches_one_process(tmp_path):
    if not runner.ncu_available():
        pytest.skip("needs Nsight Compute's ncu")
    configs = [{"n": 65536}, {"n": 1 << 20}, {"n": 1 << 22}]
    kwargs = dict(configs=configs, preset="timing", live=True)
    single = profile_sweep("scale", reports_dir=tmp_path / "one", **kwargs)
    spread = profile_sweep("scale", reports_dir=tmp_path / "all", gpus="all", **kwargs)
    single = single.launches.assign(config="n=" + single.launches["n"].astype(str))
    launches = spread.launches.assign(config="n=" + spread.launches["n"].astype(str))
    assert sorted(single["kernel"]) == sorted(launches["kernel"])
    _same_up_to_noise(single, launches, "duration_s", 0.5, 2.0)
    assert launches["gpu_device"].nunique() == min(len(gpus_module.discover()), len(configs))


def test_profile_cli_takes_gpus_and_engine(live, capsys, monkeypatch):
    monkeypatch.setenv("OASR_REPORTS_DIR", str(live.reports))
    assert sweep_cli.main(["--op", "scale", "--config", "n=2048", "--config", "n=8192", "--gpus", "all"]) == 0
    out = capsys.readouterr().out
    assert "local engine: 2 of 2 chunks done on 2 GPU(s)" in out and len(live.calls()) == 2
    with pytest.raises(SystemExit):
        sweep_cli.main(["--op", "scale", "--address", "auto"])
    assert "needs --engine ray" in capsys.readouterr().err
