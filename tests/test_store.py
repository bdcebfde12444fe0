"""The recordings store and cache (profiling.nsight.recordings) and the sweep API (profiling.nsight.sweep), on CPU.

Pure-logic tests use small stand-in reports: a fake ``ncu`` on PATH writes a JSON
list of the launches it "profiled", and ``sweep.read_tables`` is replaced by a
reader of that JSON. Tests of real ``.ncu-rep`` files use the committed H200
recordings (``reports/h200/profiles/scale/``) and the dev samples in
``.dev/sample-reports/``, and are skipped, saying why, where those are absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from oasr.jit.families import FAMILIES, NORM, SCALE
from profiling import files
from profiling.harness.ops import OPS, get_op
from profiling.nsight import packing, sweep
from profiling.nsight import recordings as store
from profiling.nsight.runner import NcuTimeoutError, NoGpuError
from profiling.nsight.sweep import MissingRecordingWarning, NoRecordingError, profile_sweep
from profiling.nsight.worker import EVENT_PREFIX
from profiling.provenance import REPO_ROOT

CONFIGS = [{"n": 2048}, {"n": 8192}, {"n": 32768}]
PROVENANCE_KEYS = {
    "gpu", "driver", "cuda_runtime", "nvcc", "ncu_version", "clock_control", "cache_control", "git_commit",
    "date", "op", "backends", "configs", "dtypes", "preset", "source_hash",
}  # fmt: skip


def entries(configs=CONFIGS, backends=("oasr", "torch"), dtype="float16"):
    return [store.make_entry(b, c, dtype) for c in configs for b in backends]


def dummy_report(folder: Path, text: str = "report") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"src-{time.time_ns()}.ncu-rep"
    path.write_text(text)
    return path


def save(profiles: store.ProfileStore, tmp_path: Path, items, preset="roofline", src="src1", **provenance):
    report = dummy_report(tmp_path / "incoming")
    return profiles.save(report, items, preset=preset, source_hash=src, provenance=provenance)


# ---------------------------------------------------------------------------
# The store on its own
# ---------------------------------------------------------------------------


def test_entry_helpers():
    entry = store.make_entry("oasr", {"n": 65536}, "float16")
    assert entry == ("oasr", (("n", 65536),), "float16")
    assert store.entry_label(entry) == "oasr n=65536,dtype=float16"


def test_cache_hits_and_misses(tmp_path):
    profiles = store.ProfileStore("h200", "scale", tmp_path / "reports")
    saved = save(profiles, tmp_path, entries())
    assert saved.report.parent == tmp_path / "reports" / "h200" / "profiles" / "scale"
    assert saved.report.suffix == ".ncu-rep" and saved.sidecar.suffix == ".json"
    hits, missing = profiles.lookup(entries(), "roofline", "src1")
    assert missing == [] and set(hits) == set(entries())
    assert profiles.lookup(entries(), "timing", "src1")[1] == entries()  # other preset
    assert profiles.lookup(entries(), "roofline", "src2")[1] == entries()  # sources changed
    more = entries([*CONFIGS, {"n": 131072}])
    hits, missing = profiles.lookup(more, "roofline", "src1")  # one new config
    assert missing == entries([{"n": 131072}]) and len(hits) == 6
    assert profiles.lookup(entries(dtype="bfloat16"), "roofline", "src1")[1] == entries(dtype="bfloat16")
    assert profiles.lookup(entries(), "roofline", None)[1] == []  # replay ignores the source hash


def test_newest_wins_and_superseded_profiles_are_pruned(tmp_path):
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    small = save(profiles, tmp_path, entries(CONFIGS[:1]))
    other = save(profiles, tmp_path, entries(CONFIGS[1:2]), preset="timing")
    newer = save(profiles, tmp_path, entries(), src="src2")  # covers `small` entirely
    assert not small.report.exists() and not small.sidecar.exists()
    assert other.report.exists()  # other preset: kept
    hits, _ = profiles.lookup(entries(CONFIGS[:1]), "roofline", None)
    assert {p.name for p in hits.values()} == {newer.name}
    partial = save(profiles, tmp_path, entries(CONFIGS[:1]), src="src3")  # newer, smaller: both kept
    hits, _ = profiles.lookup(entries(), "roofline", None)
    assert hits[entries(CONFIGS[:1])[0]].name == partial.name and hits[entries()[-1]].name == newer.name
    assert newer.report.exists()


def test_same_request_replaces_its_own_files(tmp_path):
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    first = save(profiles, tmp_path, entries())
    second = save(profiles, tmp_path, entries())
    assert first.report == second.report and len(profiles.profiles()) == 1


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "meta.json"
    files.atomic_write_text(target, "old")
    assert target.read_text() == "old"

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        files.atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]  # no temp file left behind


def test_half_written_profiles_are_ignored(tmp_path):
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    good = save(profiles, tmp_path, entries())
    folder = profiles.directory
    (folder / ".tmp-123.json").write_text(good.sidecar.read_text())  # a sidecar being written
    orphan = json.loads(good.sidecar.read_text()) | {"report": "gone.ncu-rep"}
    (folder / "orphan.json").write_text(json.dumps(orphan))  # its report never arrived
    (folder / "broken.json").write_text("{")
    with pytest.warns(store.DamagedRecordingWarning) as caught:
        assert [p.name for p in profiles.profiles()] == [good.name]
    named = sorted(str(w.message).split(":")[0] for w in caught)  # one warning per file, naming it
    assert named == [f"damaged recording {folder / 'broken.json'}", f"damaged recording {folder / 'orphan.json'}"]
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-") and p.suffix == ".ncu-rep"]


def test_source_hash_is_the_jit_key():
    try:
        keys = {family.name: family.jit_spec().key for family in FAMILIES}
    except RuntimeError as exc:  # no CUDA toolkit here: no key to compare with
        pytest.skip(f"JIT key not computable here ({exc})")
    assert store.source_hash(get_op("scale")) == keys["scale"] == SCALE.jit_spec().key
    for op in OPS.values():  # every op hashes its family's one module
        assert store.source_hash(op) == keys[op.family.name], op.name
    assert store.source_hash(get_op("layer_norm")) == store.source_hash(get_op("add_rms_norm")) == keys[NORM.name]
    assert len(set(keys.values())) == len(FAMILIES)


# ---------------------------------------------------------------------------
# The sweep with a fake ncu (live on a pretend GPU) and stand-in reports
# ---------------------------------------------------------------------------

PRELUDE = f"""#!{sys.executable}
import json, os, signal, subprocess, sys, time
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0 (build 1) (public-release)")
    sys.exit(0)
out = argv[argv.index("-o") + 1]
spec_path = argv[-1]
spec = json.load(open(spec_path))
with open(os.environ["NCU_LOG"], "a") as log:
    log.write(json.dumps(spec) + "\\n")
cases = [(c, d) for c in spec["configs"] for d in spec["dtypes"]]
def launches(upto):
    return [dict(backend=b, dtype=d, **c) for c, d in cases[:upto] for b in spec["backends"]]
def ev(event, **fields):
    print({EVENT_PREFIX!r} + json.dumps(dict(event=event, **fields)), flush=True)
"""

GOOD = """
ev("start", pid=os.getpid(), total=len(cases))
for i, (c, d) in enumerate(cases):
    for b in spec["backends"]:
        print(f'==PROF== Profiling "K_{b}" - {i}: 0%....50%....100% - 14 passes', flush=True)
    ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
ev("end", total=len(cases))
open(out, "w").write(json.dumps(launches(len(cases))))
"""

CHILD = """
import json, os, sys, time
cases = json.loads(sys.argv[1])
def ev(event, **fields):
    print("@@oasr-worker " + json.dumps(dict(event=event, **fields)), flush=True)
ev("start", pid=os.getpid(), total=len(cases))
for i, (c, d) in enumerate(cases[:2]):
    ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
time.sleep(300)
"""

HANGS_AFTER_TWO = f"""
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}, json.dumps(cases)])
signal.signal(signal.SIGINT, signal.SIG_IGN)
child.wait()  # interrupted: like ncu, write what was profiled
open(out, "w").write(json.dumps(launches(2)))
sys.exit(1)
"""


def fake_read_tables(path):
    rows = json.loads(Path(path).read_text())
    launches = pd.DataFrame(
        [
            dict(launch=i, op="scale", backend=r["backend"], dtype=r["dtype"], config=f"n={r['n']}", n=r["n"])
            | dict(kernel=f"K_{r['backend']}", duration_s=1e-6 * (i + 1))
            for i, r in enumerate(rows)
        ]
    )
    advice = pd.DataFrame({"launch": list(range(len(rows))), "title": "stand-in advice"})
    return launches, advice, {"gpu": "NVIDIA H200"}


class LiveEnv:
    """A pretend GPU machine: fake ncu on PATH, fixed source hash, stand-in report reader."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.reports = tmp_path / "reports"
        self.log = tmp_path / "ncu-calls.jsonl"
        self.src = "src1"
        monkeypatch.setenv("NCU_LOG", str(self.log))
        monkeypatch.delenv("OASR_NCU", raising=False)
        monkeypatch.setattr(sweep, "gpu_available", lambda: True)
        monkeypatch.setattr(sweep, "gpu_name", lambda: "NVIDIA H200")
        monkeypatch.setattr(sweep, "read_tables", fake_read_tables)
        monkeypatch.setattr(store, "source_hash", lambda op: self.src)
        self.use(GOOD)

    def use(self, body: str) -> None:
        folder = self.tmp_path / "fakebin"
        folder.mkdir(exist_ok=True)
        exe = folder / "ncu"
        exe.write_text(PRELUDE + textwrap.dedent(body))
        exe.chmod(0o755)
        self.monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def profile(self, **kwargs):
        kwargs.setdefault("configs", CONFIGS)
        return profile_sweep("scale", reports_dir=self.reports, **kwargs)


@pytest.fixture
def live(tmp_path, monkeypatch):
    return LiveEnv(tmp_path, monkeypatch)


def test_live_then_cache_then_force(live):
    first = live.profile()
    assert first.source == "live" and not first.replayed and len(live.calls()) == 1
    assert len(first.launches) == 6 and sorted(first.launches["n"].unique()) == [2048, 8192, 32768]
    assert first.report_paths[0].parent == live.reports / "h200" / "profiles" / "scale"
    assert len(first.advice) == 6 and first.device["gpu"] == "NVIDIA H200"
    assert first.banner.startswith("Profiled live: NVIDIA H200 on ")

    start = time.perf_counter()
    again = live.profile()
    assert time.perf_counter() - start < 1.0
    assert again.source == "cache" and len(live.calls()) == 1  # ncu not run again
    pd.testing.assert_frame_equal(again.launches, first.launches)
    assert again.banner.startswith("From the profile cache: made on NVIDIA H200")

    forced = live.profile(force=True)
    assert forced.source == "live" and len(live.calls()) == 2


def test_changed_sources_or_configs_profile_again(live):
    live.profile()
    live.src = "src2"  # a kernel source or header changed
    assert live.profile().source == "live" and len(live.calls()) == 2
    result = live.profile(configs=[*CONFIGS, {"n": 131072}])  # one new config
    assert result.source == "live" and len(result.launches) == 8
    assert live.calls()[-1]["configs"] == [{"n": 131072}]  # only the missing one was profiled
    assert live.profile(backends=("torch",)).source == "cache"  # a subset of what is stored
    assert live.profile(preset="timing").source == "live"  # another preset is another key
    assert live.profile(clock_control="base").source == "live"  # so are other ncu settings
    assert live.profile().source == "cache"


def test_provenance_fields(live):
    result = live.profile(dtypes=("float16", "bf16"))
    assert len(result.provenance) == 1
    provenance = result.provenance[0]
    assert set(provenance) >= PROVENANCE_KEYS, PROVENANCE_KEYS - set(provenance)
    assert provenance["clock_control"] == "none" and provenance["cache_control"] == "all"
    assert provenance["ncu_version"] == "2025.3.1.0" and provenance["preset"] == "roofline"
    assert provenance["source_hash"] == "src1" and provenance["dtypes"] == ["float16", "bfloat16"]
    assert provenance["configs"] == CONFIGS and provenance["backends"] == ["oasr", "torch"]
    assert "--nvtx-include" in provenance["ncu_command"]
    sidecar = json.loads(result.report_paths[0].with_suffix(".json").read_text())
    assert sidecar["complete"] is True and sidecar["source_hash"] == "src1" and len(sidecar["entries"]) == 12
    assert sidecar["gpu"] == "h200" and sidecar["op"] == "scale" and sidecar["preset"] == "roofline"
    assert sidecar["settings"] == {"clock_control": "none", "cache_control": "all"}


def test_interrupted_sweep_keeps_finished_configs(live):
    live.use(HANGS_AFTER_TWO)
    with pytest.raises(NcuTimeoutError) as info:
        live.profile(timeout_s=2.0)
    assert "Kept 4 finished launches" in str(info.value)
    (kept,) = store.ProfileStore("h200", "scale", live.reports).profiles()
    assert kept.meta["complete"] is False and kept.provenance["interrupted"] is True
    assert kept.entries == set(entries(CONFIGS[:2]))
    assert not [p for p in kept.report.parent.iterdir() if p.name.startswith(".tmp-")]

    live.use(GOOD)
    result = live.profile()
    assert live.calls()[-1]["configs"] == [{"n": 32768}]  # only the config that did not finish
    assert result.source == "live" and len(result.launches) == 6 and len(result.report_paths) == 2


def test_no_gpu_with_live_true(live, monkeypatch):
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    with pytest.raises(NoGpuError, match="live=False"):
        live.profile(live=True)


# ---------------------------------------------------------------------------
# Replay: no GPU or no ncu
# ---------------------------------------------------------------------------


@pytest.fixture
def recordings(tmp_path, monkeypatch):
    """Stand-in recordings of CONFIGS[:2] in <tmp>/reports/h200, and a machine with no GPU."""
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    monkeypatch.setattr(sweep, "read_tables", fake_read_tables)
    profiles = store.ProfileStore("h200", "scale", tmp_path / "reports")
    items = entries(CONFIGS[:2])
    report = dummy_report(tmp_path / "incoming", json.dumps([dict(backend=b, dtype=d, **dict(c)) for b, c, d in items]))
    provenance = {"gpu": "NVIDIA H200", "date": "2026-11-20T09:30:00+00:00", "git_commit": "abc123def456"}
    profiles.save(report, items, preset="roofline", source_hash="old", provenance=provenance)
    return tmp_path / "reports"


def test_replay_is_labelled(recordings):
    result = profile_sweep("scale", configs=CONFIGS[:2], reports_dir=recordings)
    assert result.replayed is True and result.source == "recording" and result.missing == []
    assert result.banner == "Replayed from recordings made on NVIDIA H200 on 2026-11-20 at commit abc123d."
    assert result.provenance[0]["git_commit"] == "abc123def456"
    assert len(result.launches) == 4 and "Replayed" in repr(result)


def test_replay_names_missing_configs_and_never_invents(recordings):
    with pytest.warns(MissingRecordingWarning, match=r"oasr n=32768,dtype=float16, torch n=32768,dtype=float16"):
        result = profile_sweep("scale", configs=CONFIGS, reports_dir=recordings)
    assert result.replayed and len(result.launches) == 4 and 32768 not in set(result.launches["n"])
    assert result.missing == ["oasr n=32768,dtype=float16", "torch n=32768,dtype=float16"]
    assert "nothing recorded for oasr n=32768" in result.banner
    with pytest.raises(NoRecordingError, match="presets recorded there: roofline"):
        profile_sweep("scale", configs=CONFIGS, preset="timing", reports_dir=recordings)


def test_replay_when_a_gpu_has_no_ncu(recordings, monkeypatch):
    monkeypatch.setattr(sweep, "gpu_available", lambda: True)
    monkeypatch.setattr(sweep.runner, "ncu_available", lambda: False)
    assert profile_sweep("scale", configs=CONFIGS[:1], reports_dir=recordings).replayed


def test_cli_prints_the_table(recordings, monkeypatch, capsys):
    monkeypatch.setenv("OASR_REPORTS_DIR", str(recordings))
    assert sweep.main(["--op", "scale", "--config", "n=2048", "--config", "n=8192", "--replay"]) == 0
    out = capsys.readouterr().out
    assert "Replayed from recordings made on NVIDIA H200" in out and "K_oasr" in out and "8192" in out
    assert sweep.main(["--op", "scale", "--preset", "timing", "--replay"]) == 1


def test_cli_runs_as_python_m_profiling_nsight(recordings):
    env = {**os.environ, "OASR_REPORTS_DIR": str(recordings), "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(
        [sys.executable, "-m", "profiling.nsight", "--op", "scale", "--preset", "timing", "--replay"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "presets recorded there: roofline" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "profiling.nsight", "--help"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert usage.returncode == 0 and usage.stdout.startswith("usage: python -m profiling.nsight")


# ---------------------------------------------------------------------------
# The committed H200 recordings
# ---------------------------------------------------------------------------

COMMITTED = REPO_ROOT / "reports" / "h200" / "profiles" / "scale"


def test_committed_recordings_replay(monkeypatch):
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingRecordingWarning)
        result = profile_sweep("scale")
    assert result.replayed is True and result.source == "recording"
    assert result.banner.startswith("Replayed from recordings made on NVIDIA H200 on ")
    assert len(result.launches) == 2 * len(get_op("scale").default_sweep)
    assert set(result.launches["backend"]) == {"oasr", "torch"}
    assert (result.launches["duration_s"] > 0).all()
    for provenance in result.provenance:
        assert set(provenance) >= PROVENANCE_KEYS
        assert provenance["clock_control"] == "none"


def test_real_report_through_store_and_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    staged = profiles.temp_report_path()
    (recording,) = packing.stored(COMMITTED, "roofline-*")
    shutil.copyfile(packing.readable(recording), staged)
    sizes = list(get_op("scale").default_sweep)
    profiles.save(staged, entries(sizes), preset="roofline", source_hash="dev", provenance={"gpu": "NVIDIA H200"})
    result = profile_sweep("scale", configs=sizes[1:3], reports_dir=tmp_path)  # a subset of the report
    assert result.replayed and len(result.launches) == 4
    assert set(result.launches["n"]) == {sizes[1]["n"], sizes[2]["n"]}
    assert set(result.advice["launch"]) <= set(result.launches["launch"])
    assert result.device["gpu"] == "NVIDIA H200"


def test_a_launch_count_other_than_the_expected_one_is_an_error() -> None:
    """The committed group_gemm recording: oasr launches one kernel on its direct path and two (setup + GEMM) on
    CUTLASS's; torch launches one cuBLAS kernel per group. Expecting one oasr kernel names the entries with two."""
    with pytest.raises(sweep.LaunchCountError) as error:
        profile_sweep("group_gemm", live=False, expected_launches={"oasr": 1})
    message = str(error.value)
    assert message.startswith("group_gemm (roofline): expected oasr 1 kernel launch(es) per entry, but ")
    assert "oasr g=64,k=2048,m=16000,n=512,spread=4,dtype=float16: 2" in message
    assert "torch g=" not in message  # torch was given no count: any number is fine
    layer_norm = profile_sweep("layer_norm", live=False, expected_launches=1)  # one kernel a backend, as recorded
    assert layer_norm.launches.groupby(["backend", "config"]).size().eq(1).all()


@pytest.mark.parametrize(
    ("expected", "error", "text"),
    [
        ("1", TypeError, "expected_launches must be an int or a mapping"),
        (True, TypeError, "expected_launches must be an int or a mapping"),
        ({"oasr": 0}, ValueError, r"expected_launches\['oasr'\] must be an int >= 1, not 0"),
        ({"cublas": 1}, ValueError, "expected_launches names 'cublas', which is not profiled"),
    ],
)
def test_expected_launches_is_checked(expected: object, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        profile_sweep("layer_norm", live=False, expected_launches=expected)


def test_the_cli_says_a_launch_count_error_in_one_line(capsys) -> None:
    assert sweep.main(["--op", "group_gemm", "--replay", "--expect-launches", "oasr=1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: group_gemm (roofline): expected oasr 1 kernel launch(es) per entry, but 2 entries")
    assert sweep.main(["--op", "layer_norm", "--replay", "--expect-launches", "oasr=1,torch=1"]) == 0
    assert "flagged (implausible)" in capsys.readouterr().out
