"""Region profiles (profiling/nsight/region.py, profiling/analysis/region.py) on the CPU.

The tidy table, the plots and the long metrics frame are built from the committed H200 recordings (a sweep's report
holds dozens of launches of two backends, as a region's does); a region recording is replayed from a copy of one of
them stored in a temporary folder. ncu itself is a fake on PATH that runs the real region worker, which finds no GPU.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import sys
import threading
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from profiling.analysis import region as A
from profiling.files import REPLAY_GPU
from profiling.harness import regions
from profiling.nsight import packing, recordings, runner
from profiling.nsight import region as R
from profiling.nsight.reader import load_actions
from profiling.nsight.sweep import NoRecordingError

matplotlib.use("Agg")

COMMITTED = Path(__file__).resolve().parent.parent / "reports"


def committed(op: str, preset: str = "roofline") -> recordings.StoredProfile:
    """The committed H200 profile of ``op`` with ``preset`` (a real report of many launches)."""
    found = [p for p in recordings.ProfileStore(REPLAY_GPU, op, COMMITTED).profiles() if p.meta["preset"] == preset]
    assert found, f"no committed {preset} recording of {op}"
    return found[0]


@pytest.fixture(scope="module")
def attention() -> R.RegionProfile:
    """The attention sweep's 42 launches (oasr's kernel, torch's SDPA and its mask kernels) read as one region."""
    return R._result(committed("attention"), replayed=True, source="recording")


def module_level(x: int = 1) -> int:
    return x


# ---------------------------------------------------------------------------
# The call by reference, the name, the command
# ---------------------------------------------------------------------------


def test_importable_calls_pickle_by_reference() -> None:
    data, label = R.portable_call(regions.region_call("conformer_layer_oasr"))
    call = pickle.loads(R.base64.b64decode(data))
    assert call.func is regions.conformer_layer and call.args == ("oasr",) and call.keywords == regions.CONFORMER_SHAPE
    assert label == "profiling.harness.regions:conformer_layer('oasr', d=256, b=64, t=250, k=15)"
    reference = "profiling.harness.regions:conformer_layer"
    assert R.portable_call(reference)[1] == reference
    assert R.portable_call(module_level)[1] == "test_region:module_level"


def closure() -> object:
    def inner() -> None:
        return None

    return inner


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (lambda: None, "not importable by reference"),
        (closure(), "not importable by reference"),
        ("no_colon_here", "not of the form 'module:qualname'"),
        ("os:no_such_function", "cannot be imported"),
        ("math:pi", "names a float, not a callable"),
        (functools.partial(module_level, threading.Lock()), "cannot be pickled"),
        (functools.partial(lambda x: x, 1), "not importable by reference"),
        (3, "of type int is not importable by reference"),
    ],
)
def test_a_call_that_cannot_travel_is_a_type_error_naming_fn(fn: object, says: str) -> None:
    with pytest.raises(TypeError, match=r"`fn`") as info:
        R.portable_call(fn)
    assert says in str(info.value) and "module:qualname" in str(info.value)  # the fix


def test_profile_region_checks_before_profiling() -> None:
    with pytest.raises(TypeError, match="`fn`"):
        R.profile_region(lambda: None, "x", live=False)
    for name in ("", "a/b", "x@y", "top]", 7):
        with pytest.raises(ValueError, match="`name`"):
            R.profile_region(module_level, name, live=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown metric preset"):
        R.profile_region(module_level, "x", preset="most", live=False)
    with pytest.raises(ValueError, match="`repeats`"):
        R.profile_region(module_level, "x", repeats=0, live=False)
    with pytest.raises(ValueError, match="`config`"):
        R.profile_region(module_level, "x", config={"b": 1.5}, live=False)  # type: ignore[dict-item]


def test_ncu_command_selects_the_region_and_runs_its_worker() -> None:
    command = R.build_command("ncu", "spec.json", "r.ncu-rep", "conformer_layer_oasr", "roofline")
    assert command[command.index("--nvtx-include") + 1] == "oasr@region:conformer_layer_oasr/"
    assert "--nvtx" in command and command[-3:] == ["-m", "profiling.nsight.region_worker", "spec.json"]
    sweep = runner.build_command("ncu", "spec.json", "r.ncu-rep")  # the sweep's own command is unchanged
    assert sweep[sweep.index("--nvtx-include") + 1] == "oasr@sweep/" and "profiling.nsight.worker" in sweep
    full = R.build_command("ncu", "spec.json", "r.ncu-rep", "layer", "full")
    assert full[full.index("--set") + 1] == "full"


def test_region_spec_round_trips_and_is_a_worker_spec() -> None:
    call, label = R.portable_call(module_level)
    spec = R.RegionSpec("layer", call, label, {"b": 2}, "bfloat16", timing_path="/tmp/t.json")
    assert R.RegionSpec.from_json(spec.to_json()) == spec
    assert spec.op == "layer" and spec.cases == [({"b": 2}, "bfloat16")]


# ---------------------------------------------------------------------------
# Without a GPU or ncu: the runner's errors
# ---------------------------------------------------------------------------


def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str = "") -> Path:
    """An ``ncu`` on PATH that records its arguments in ``argv.json``, runs the application, then prints ``tail``."""
    folder = tmp_path / "fakebin"
    folder.mkdir()
    exe = folder / "ncu"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import json, subprocess, sys\n"
        "argv = sys.argv[1:]\n"
        "if argv == ['--version']:\n    print('Version 2025.3.1.0'); sys.exit(0)\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(argv))\n"
        "status = subprocess.run(argv[argv.index('-f') + 1:]).returncode\n"
        f"print({tail!r}, flush=True)\n"
        "sys.exit(status)\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("OASR_NCU", raising=False)
    return exe


def spec_for(tmp_path: Path) -> R.RegionSpec:
    call, label = R.portable_call(module_level)
    return R.RegionSpec("layer", call, label, timing_path=str(tmp_path / "timing.json"))


@pytest.mark.skipif(R.gpu_available(), reason="checks the worker on a machine without a GPU")
def test_the_real_region_worker_without_a_gpu_is_no_gpu_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ncu(tmp_path, monkeypatch)
    with pytest.raises(runner.NoGpuError, match="no CUDA GPU"):
        runner.run_sweep(
            spec_for(tmp_path), tmp_path / "r.ncu-rep", preset_args=[], env={"OASR_NVTX": "1"},
            nvtx_include=R.nvtx_include("layer"), worker=R.WORKER,
        )  # fmt: skip
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--nvtx-include") + 1] == "oasr@region:layer/" and "profiling.nsight.region_worker" in argv


def test_nothing_profiled_names_the_region_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker is a stand-in that finishes cleanly without a kernel, as a region that launched none would.
    fake_ncu(tmp_path, monkeypatch, tail="==WARNING== No kernels were profiled.")
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(
        "import json, os, sys\nfrom profiling.nsight.worker import emit\n"
        "emit('start', pid=os.getpid(), total=1)\nemit('done', index=1, total=1, config={}, dtype='any')\n"
        "emit('end', total=1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with pytest.raises(runner.NothingProfiledError, match="oasr@region:layer/"):
        runner.run_sweep(
            spec_for(tmp_path), tmp_path / "r.ncu-rep", preset_args=[], nvtx_include=R.nvtx_include("layer"),
            worker="stand_in",
        )  # fmt: skip


def test_live_without_gpu_or_ncu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "gpu_available", lambda: False)
    with pytest.raises(runner.NoGpuError, match="live=False"):
        R.profile_region(module_level, "x", live=True)
    monkeypatch.setattr(R, "gpu_available", lambda: True)
    monkeypatch.setattr(runner, "ncu_candidates", lambda: [])
    with pytest.raises(runner.NcuNotFoundError, match="OASR_NCU"):
        R.profile_region(module_level, "x", live=True)


# ---------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------


def test_replay_without_a_recording_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(NoRecordingError) as info:
        R.profile_builtin("conformer_layer_torch", live=False, reports_dir=tmp_path)
    message = str(info.value)
    assert "python -m profiling.nsight.region conformer_layer_torch --live" in message
    assert "nothing is recorded there" in message and str(tmp_path / "h200" / "regions") in message
    with pytest.raises(NoRecordingError, match="--shape d=512,b=16,t=375,k=31"):
        R.profile_builtin(
            "conformer_layer_oasr", {"b": 16, "d": 512, "k": 31, "t": 375}, live=False, reports_dir=tmp_path
        )
    with pytest.raises(NoRecordingError, match="--fn test_region:module_level --name mine --live"):
        R.profile_region("test_region:module_level", "mine", live=False, reports_dir=tmp_path)


def test_a_stored_region_replays_labelled(tmp_path: Path) -> None:
    source = committed("depthwise_conv1d")
    plain = packing.readable(source.report, source.meta["report_bytes"])
    store = recordings.ProfileStore(REPLAY_GPU, "conformer_layer_oasr", tmp_path, kind=R.KIND)
    shape = regions.region_shape("conformer_layer_oasr")
    store.save(
        plain, [recordings.make_entry(R.BACKEND, shape, "bfloat16")], preset="roofline", source_hash="test",
        provenance={**source.provenance, "region_wall_s": 1e-3, "call": "copied from a sweep"},
    )  # fmt: skip
    assert (tmp_path / "h200" / "regions" / "conformer_layer_oasr").is_dir()
    assert not (tmp_path / "h200" / "profiles").exists()  # regions stay out of the op folders
    result = R.profile_builtin("conformer_layer_oasr", live=False, reports_dir=tmp_path)
    assert result.replayed and result.source == "recording" and result.banner.startswith("Replayed from recordings")
    assert result.region_wall_s == 1e-3 and result.metrics is None and len(result.launches) > 10
    with pytest.raises(NoRecordingError, match="recorded there: region b=64,d=256"):
        R.profile_builtin("conformer_layer_oasr", live=False, preset="full", reports_dir=tmp_path)


# ---------------------------------------------------------------------------
# The tidy table, the summary and the plots, from a real report
# ---------------------------------------------------------------------------


def test_each_launch_is_named_after_its_innermost_op(attention: R.RegionProfile) -> None:
    ops = attention.launches["region_op"]
    assert set(ops) == {"attention:oasr", "attention:torch"}
    actions = load_actions(attention.report_paths[0])
    assert [R.launch_op(a) for a in actions] == list(ops)


class _Domain:
    def __init__(self, name: str, ranges: list[str]) -> None:
        self._name, self._ranges = name, ranges

    def name(self) -> str:
        return self._name

    def push_pop_ranges(self) -> list[str]:
        return self._ranges


class _Action:
    """The NVTX part of an ncu_report action, as a region profile's launches carry it."""

    def __init__(self, **domains: list[str]) -> None:
        self._domains = [_Domain(n.replace("default", "<default domain>"), r) for n, r in domains.items()]

    def nvtx_state(self) -> _Action:
        return self

    def domains(self) -> range:
        return range(len(self._domains))

    def domain_by_id(self, i: int) -> _Domain:
        return self._domains[i]


def test_op_names_of_oasr_and_torch_ranges() -> None:
    assert R.launch_op(_Action(oasr=["region:l", "oasr.gemm"], default=["aten::empty, seq = 1"])) == "oasr.gemm"
    assert R.launch_op(_Action(oasr=["region:l"], default=["aten::linear, seq = 3", "aten::addmm, seq = 4"])) == (
        "aten::addmm"
    )
    assert R.launch_op(_Action(oasr=["region:l"], default=[])) is None


def test_tidy_table_from_a_committed_recording(attention: R.RegionProfile) -> None:
    table = A.region_table(attention)
    assert tuple(table.columns) == A.REGION_COLUMNS and len(table) == len(attention.launches) == 42
    assert table["share"].sum() == pytest.approx(1.0) and table["share"].gt(0).all()
    assert table.attrs["kernel_time_s"] == pytest.approx(table["duration_s"].sum())
    # Units: seconds (a few µs to tens of µs per kernel), bytes, FLOP, percent.
    assert table["duration_s"].between(5e-7, 1e-3).all() and table["dram_bytes"].ge(0).all()
    oasr = table[table["op"] == "attention:oasr"]
    assert (oasr["kernel"] == "AttentionKernel").all() and oasr["flop_tensor"].gt(1e8).all()
    assert oasr["flop_tensor"].le(oasr["flop"]).all() and oasr["pct_peak"].between(0, 100).all()
    assert not table["kernel"].str.contains("<").any()  # short names, no template arguments
    assert table["sentence"].str.len().gt(10).all() and set(table["bound"].dropna()) <= {"memory", "compute"}
    assert table.attrs["replayed"] and table.attrs["banner"].startswith("Replayed")
    assert A.by(table, "op").sum() == pytest.approx(table["duration_s"].sum())


def test_summary_side_by_side(attention: R.RegionProfile) -> None:
    table = A.region_table(attention)
    tables = {b: table[table["op"] == f"attention:{b}"].copy() for b in ("oasr", "torch")}
    for part in tables.values():
        part.attrs.update(table.attrs)
    summary = A.region_summary(tables)
    assert list(summary.index) == ["oasr", "torch"] and tuple(summary.columns) == A.SUMMARY_COLUMNS
    assert summary.loc["oasr", "kernels"] == 12 and summary.loc["torch", "kernels"] == 30
    assert summary.loc["oasr", "top_kernels"].startswith("AttentionKernel 100%")
    tables["oasr"].attrs["banner"] = "<script>x</script>"
    assert "<script>" not in A.summary_caption(tables) and "&lt;script&gt;" in A.summary_caption(tables)


def gids(figure: object) -> set[str]:
    return {str(a.get_gid()) for ax in figure.axes for a in (*ax.patches, *ax.lines, *ax.collections, *ax.texts)}


def test_plots_render(attention: R.RegionProfile) -> None:
    table = A.region_table(attention)
    table.attrs["region_wall_s"] = 2 * table.attrs["kernel_time_s"]
    time = A.time_plot(table)
    assert {"segment:per op:attention:oasr", "segment:per kernel:AttentionKernel", "wall"} <= gids(time)
    roof = A.roofline_points(table)
    assert {"points:region", "ceiling:dram", "key:kernels", "label:1"} <= gids(roof)
    (points,) = [c for c in roof.axes[0].collections if c.get_gid() == "points:region"]
    assert len(points.get_offsets()) == int((table["ai_dram_flop_per_byte"] > 0).sum())
    halves = {b: table[table["op"] == f"attention:{b}"] for b in ("oasr", "torch")}
    compare = A.comparison_plot(halves)
    assert {"total:oasr", "total:torch", "top:oasr", "top:torch"} <= gids(compare)
    for figure in (time, roof, compare):
        figure.savefig(io.BytesIO(), format="png")


def test_a_table_needs_launches(attention: R.RegionProfile) -> None:
    empty = R.RegionProfile(**{**attention.__dict__, "launches": attention.launches.iloc[0:0]})
    with pytest.raises(ValueError, match="no launch"):
        A.region_table(empty)


# ---------------------------------------------------------------------------
# The full preset's long frame
# ---------------------------------------------------------------------------


def test_every_metric_long_format_from_a_committed_report() -> None:
    report = committed("layer_norm", "source").report
    frame = R.report_metrics(report)
    actions = load_actions(report)
    assert tuple(frame.columns) == R.METRIC_COLUMNS
    assert len(frame) == sum(len(a.metric_names()) for a in actions)
    assert frame.groupby("launch")["metric"].nunique().tolist() == [len(a.metric_names()) for a in actions]
    first = frame[frame["launch"] == 0].set_index("metric")
    assert first.loc["gpu__time_duration.sum", "section"] == "SpeedOfLight"
    assert first.loc["launch__grid_size", "section"] == "LaunchStats"
    assert first.loc["dram__bytes_read.sum", "unit"] == "byte" and first.loc["dram__bytes_read.sum", "value"] > 0
    name = first.loc["device__attribute_display_name"]
    assert pd.isna(name["value"]) and name["text"] == "NVIDIA H200"  # a text metric keeps its text
    assert set(frame["region_op"].dropna()) == {"layer_norm:oasr"}


# ---------------------------------------------------------------------------
# The workbench and the command line
# ---------------------------------------------------------------------------


def store_copy(root: Path, name: str, op: str, preset: str, stored_as: str) -> None:
    """Store the committed ``preset`` report of ``op`` as region ``name``'s ``stored_as`` recording under ``root``."""
    source = committed(op, preset)
    store = recordings.ProfileStore(REPLAY_GPU, name, root, kind=R.KIND)
    entry = recordings.make_entry(R.BACKEND, regions.region_shape(name), "bfloat16")
    plain = packing.readable(source.report, source.meta["report_bytes"])
    store.save(plain, [entry], preset=stored_as, source_hash="test", provenance=source.provenance)


def test_workbench_profile_region_in_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oasr.jit.families import SCALE
    from profiling.workbench.notebook import Workbench

    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    bench = Workbench(SCALE)
    store_copy(tmp_path, "conformer_layer_oasr", "gemm_glu", "roofline", "roofline")
    store_copy(tmp_path, "conformer_layer_torch", "attention", "roofline", "roofline")
    oasr = bench.profile_region("conformer_layer_oasr", reports_dir=tmp_path)
    torch_ = bench.profile_region("conformer_layer_torch", reports_dir=tmp_path)
    assert tuple(oasr.columns) == A.REGION_COLUMNS and oasr.attrs["region"] == "conformer_layer_oasr"
    assert oasr.attrs["replayed"] and oasr.attrs["banner"].startswith("Replayed")
    assert "replayed" in bench.region_time_plot(oasr).axes[0].get_title()
    assert {"points:region"} <= gids(bench.region_roofline(oasr)) and gids(bench.region_time_plot(torch_))
    monkeypatch.setattr("profiling.workbench.notebook.display", lambda shown: None)
    assert {"top:oasr", "top:torch"} <= gids(bench.region_compare({"oasr": oasr, "torch": torch_}))
    with pytest.raises(ValueError, match="`name`"):
        bench.profile_region(module_level)
    with pytest.raises(NoRecordingError, match="--live --preset full"):
        bench.profile_region("conformer_layer_oasr", preset="full", reports_dir=tmp_path)
    # The full preset's path, on a real report stored under that preset's name in this test's folder only.
    store_copy(tmp_path, "conformer_layer_oasr", "layer_norm", "source", "full")
    metrics = bench.profile_region("conformer_layer_oasr", preset="full", reports_dir=tmp_path)
    assert tuple(metrics.columns) == R.METRIC_COLUMNS and metrics.attrs["replayed"]
    assert metrics["metric"].nunique() > 500 and (metrics["section"] == "SpeedOfLight").any()


def test_cli_replay_without_recordings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    assert R.main(["conformer_layer_oasr", "--replay"]) == 1
    assert "python -m profiling.nsight.region conformer_layer_oasr --live" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        R.main(["no_such_region"])
    with pytest.raises(SystemExit):
        R.main(["--fn", "test_region:module_level"])  # --fn needs --name


# ---------------------------------------------------------------------------
# The worker's loop and the oasr ops' ranges (no GPU: CUDA's calls stand in)
# ---------------------------------------------------------------------------

CALLS: list[tuple[str, ...]] = []
OPEN: list[str] = []
"""The stand-in NVTX ranges open now, and those open at each call of :func:`recorded_call`."""


def recorded_call() -> None:
    """A region that records the NVTX ranges open when it runs."""
    CALLS.append(tuple(OPEN))


class _Event:
    def record(self) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, other: object) -> float:
        return 2.0  # ms


def test_worker_warms_up_outside_the_range_then_profiles_once_and_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import contextlib

    import torch

    from profiling.nsight import region_worker, worker

    @contextlib.contextmanager
    def opened(name: str):
        OPEN.append(name)
        yield
        OPEN.pop()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stand-in GPU")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "Event", lambda **k: _Event())
    monkeypatch.setattr(torch.autograd.profiler, "emit_nvtx", lambda: opened("emit_nvtx"))
    monkeypatch.setattr(region_worker, "nvtx_range", opened)
    CALLS.clear()
    call, label = R.portable_call(recorded_call)
    spec = R.RegionSpec("layer", call, label, {"b": 2}, "bfloat16", warmup=2, repeats=3,
                        timing_path=str(tmp_path / "timing.json"))  # fmt: skip
    assert region_worker.run(spec) == 0
    assert CALLS == [(), (), ("emit_nvtx", "region:layer"), (), (), ()]  # warm-ups, the profiled call, the timed ones
    assert json.loads((tmp_path / "timing.json").read_text()) == {"region_wall_s": 2e-3, "repeats": 3}
    events = [worker.parse_event(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events] == ["ready", "done", "end"]
    assert events[1] == {"event": "done", "index": 1, "total": 1, "config": {"b": 2}, "dtype": "bfloat16"}


def test_oasr_nvtx_marks_each_op_call() -> None:
    import subprocess

    script = (
        "import contextlib, sys, types\n"
        "calls = []\n"
        "fake = types.ModuleType('nvtx')\n"
        "fake.annotate = lambda name, domain: (calls.append((name, domain)), contextlib.nullcontext())[1]\n"
        "sys.modules['nvtx'] = fake\n"
        "import torch, oasr\n"
        "try:\n    oasr.scale(torch.ones(4), 2.0)\nexcept Exception:\n    pass\n"  # the CPU tensor is refused inside
        "print(calls, hasattr(oasr.scale, '__wrapped__'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OASR_NVTX", "OASR_LOGLEVEL")}
    marked = subprocess.run([sys.executable, "-c", script], env={**env, "OASR_NVTX": "1"}, capture_output=True,
                            text=True, check=True)  # fmt: skip
    assert marked.stdout.strip() == "[('oasr.scale', 'oasr')] True"
    plain = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "[] False"  # unset: the op itself, nothing wrapped


def test_full_metrics_of_one_op_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oasr.jit.families import NORM
    from profiling.workbench.notebook import Workbench

    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    bench = Workbench(NORM)
    config = {"b": 16, "c": 1024, "t": 1500}
    with pytest.raises(NoRecordingError, match="--op layer_norm --preset full --backends oasr --dtypes float16"):
        bench.full_metrics("layer_norm", config)
    with pytest.raises(ValueError, match="`op`"):
        bench.full_metrics("gemm")
    # The committed source-preset report of that config, stored under the full preset's name in this test's folder.
    source = committed("layer_norm", "source")
    store = recordings.ProfileStore(REPLAY_GPU, "layer_norm", tmp_path)
    store.save(
        packing.readable(source.report, source.meta["report_bytes"]), source.entries, preset="full",
        source_hash=source.meta["source_hash"], provenance=source.provenance, settings=source.meta["settings"],
    )  # fmt: skip
    metrics = bench.full_metrics("layer_norm", config)
    assert tuple(metrics.columns) == (*R.METRIC_COLUMNS, "profile") and metrics["launch"].nunique() == 1
    assert metrics.attrs["replayed"] and metrics.attrs["banner"].startswith("Replayed")
    assert metrics.set_index("metric").loc["gpu__time_duration.sum", "section"] == "SpeedOfLight"


def test_the_encoder_notebook_shows_both_layers_or_says_how_to_record_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from profiling.workbench import model

    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    bench = model.ModelWorkbench("wenet")
    missing = bench.layer_profile().data
    assert "conformer_layer_oasr" in missing and "--live" in missing and "<" not in missing.replace("&lt;", "")
    store_copy(tmp_path, "conformer_layer_oasr", "gemm_glu", "roofline", "roofline")
    store_copy(tmp_path, "conformer_layer_torch", "attention", "roofline", "roofline")
    shown: list[object] = []
    monkeypatch.setattr(model, "display", lambda *items: shown.extend(items))
    assert {"top:oasr", "top:torch"} <= gids(bench.layer_profile())
    from matplotlib.figure import Figure

    figures = [item for item in shown if isinstance(item, Figure)]
    assert len(figures) == 4 and all("replayed" in f.axes[0].get_title() for f in figures[::2])
