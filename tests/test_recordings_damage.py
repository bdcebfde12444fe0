"""Damaged profiles and tampered sidecars (issue 21, classes 4 and 7), on CPU.

Every case works on temp copies of the committed H200 recording of ``scale``
(``reports/h200/profiles/scale/``), read with NVIDIA's real ``ncu_report`` reader:

* a garbage or truncated ``.ncu-rep`` that ncu "wrote" (a fake ``ncu`` on PATH copies
  it into place) is never stored as a complete profile;
* a stored report that no longer matches the size/hash its sidecar records, or that
  cannot back the entries its sidecar claims, is reported as damaged (one warning
  naming the file) and profiled again (live) or left out (replay);
* a sidecar that is a JSON list, lacks a field or holds a string where a number
  belongs is skipped with a warning naming it, and the rest replays.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from profiling.harness.ops import get_op
from profiling.nsight import packing, sweep
from profiling.nsight import recordings as store
from profiling.nsight.reader import import_ncu_report
from profiling.nsight.recordings import DamagedRecordingWarning
from profiling.nsight.runner import NcuFailedError
from profiling.nsight.sweep import MissingRecordingWarning, NoRecordingError, profile_sweep
from profiling.nsight.worker import EVENT_PREFIX
from profiling.provenance import REPO_ROOT

COMMITTED = REPO_ROOT / "reports" / "h200" / "profiles" / "scale"
SIZES = [dict(c) for c in get_op("scale").default_sweep]


def committed_report() -> Path:
    found = packing.stored(COMMITTED, "roofline-*")
    if not found:
        pytest.skip(f"no committed recording of scale in {COMMITTED}")
    pytest.importorskip("ncu_report", reason="NVIDIA's ncu_report reader (pip install ncu-report) is needed")
    return packing.readable(found[0])


def entries(configs=SIZES, backends=("oasr", "torch"), dtype="float16"):
    return [store.make_entry(b, c, dtype) for c in configs for b in backends]


def truncated(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def garbage(target: Path) -> Path:
    target.write_bytes(bytes(range(256)) * 8)
    return target


def damaged_warnings(caught, path: Path) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, DamagedRecordingWarning) and str(path) in str(w.message)
    ]


# ---------------------------------------------------------------------------
# Live: a fake ncu that "writes" a given report, the real reader
# ---------------------------------------------------------------------------

FAKE_NCU = f"""#!{sys.executable}
import json, os, shutil, sys
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0 (build 1) (public-release)")
    sys.exit(0)
out = argv[argv.index("-o") + 1]
spec = json.load(open(argv[-1]))
with open(os.environ["NCU_LOG"], "a") as log:
    log.write(json.dumps(spec) + "\\n")
cases = [(c, d) for c in spec["configs"] for d in spec["dtypes"]]
def ev(event, **fields):
    print({EVENT_PREFIX!r} + json.dumps(dict(event=event, **fields)), flush=True)
ev("start", pid=os.getpid(), total=len(cases))
k = 0
for i, (c, d) in enumerate(cases):
    for b in spec["backends"]:
        print(f'==PROF== Profiling "K_{{b}}" - {{k}}: 0%....50%....100% - 14 passes', flush=True)
        k += 1
    ev("done", index=i + 1, total=len(cases), config=c, dtype=d)
ev("end", total=len(cases))
shutil.copyfile(os.environ["NCU_WRITES"], out)
"""


class Live:
    """A pretend GPU machine whose ncu writes the file ``NCU_WRITES`` names as its report."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.source = committed_report()
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.reports = tmp_path / "reports"
        self.log = tmp_path / "ncu-calls.jsonl"
        folder = tmp_path / "fakebin"
        folder.mkdir()
        exe = folder / "ncu"
        exe.write_text(textwrap.dedent(FAKE_NCU))
        exe.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv("OASR_NCU", raising=False)
        monkeypatch.setenv("NCU_LOG", str(self.log))
        monkeypatch.setattr(sweep, "gpu_available", lambda: True)
        monkeypatch.setattr(sweep, "gpu_name", lambda: "NVIDIA H200")
        monkeypatch.setattr(store, "source_hash", lambda op: "src1")
        self.writes(self.source)

    def writes(self, path: Path) -> None:
        self.monkeypatch.setenv("NCU_WRITES", str(path))

    def calls(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def profile(self):
        return profile_sweep("scale", configs=SIZES, reports_dir=self.reports)

    def store(self) -> store.ProfileStore:
        return store.ProfileStore("h200", "scale", self.reports)


@pytest.fixture
def live(tmp_path, monkeypatch):
    return Live(tmp_path, monkeypatch)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_damaged_report_from_ncu_is_never_cached(live, damage):
    bad = live.tmp_path / f"{damage}.ncu-rep"
    if damage == "garbage":
        garbage(bad)
    elif damage == "truncated":
        truncated(live.source, bad)
    else:
        bad.write_bytes(b"")
    live.writes(bad)
    with pytest.raises(NcuFailedError, match="damaged") as info:
        live.profile()
    assert "Nothing was stored" in str(info.value)
    assert live.store().profiles() == []  # not stored as complete, nor at all
    with pytest.raises(NcuFailedError, match="damaged"):
        live.profile()
    assert live.calls() == 2  # the second call profiled again: no cache hit

    live.writes(live.source)  # ncu works again
    result = live.profile()
    assert result.source == "live" and len(result.launches) == 2 * len(SIZES)


def test_a_report_cut_short_is_damaged_though_it_holds_the_launches_asked_for(live):
    """A third of the committed report still holds the first sizes' launches: its own structure says it is cut."""
    data = live.source.read_bytes()
    third = live.tmp_path / "third.ncu-rep"
    third.write_bytes(data[: len(data) // 3])
    live.writes(third)
    asked = SIZES[:2]
    kept = import_ncu_report().load_report(str(third))  # NVIDIA's reader takes the whole blocks it finds
    assert sum(len(kept.range_by_idx(i)) for i in range(kept.num_ranges())) >= 2 * len(asked)
    with pytest.raises(NcuFailedError, match="damaged: it is cut short") as info:
        profile_sweep("scale", configs=asked, reports_dir=live.reports)
    assert "Nothing was stored" in str(info.value)
    assert live.store().profiles() == []


def test_a_stored_profile_records_its_size_and_hash(live):
    result = live.profile()
    report = result.report_paths[0]
    sidecar = json.loads(report.with_suffix(".json").read_text())
    assert sidecar["report_bytes"] == report.stat().st_size == live.source.stat().st_size
    assert sidecar["report_sha256"] == store.file_digest(report)[1]
    assert sidecar["complete"] is True


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "garbage", "deleted"])
def test_a_damaged_stored_report_is_profiled_again(live, damage):
    first = live.profile()
    assert first.source == "live" and live.calls() == 1
    report = first.report_paths[0]
    if damage == "truncated":
        truncated(live.source, report)
    elif damage == "one byte changed":  # same size: only the hash tells
        data = bytearray(report.read_bytes())
        data[len(data) // 2] ^= 0xFF
        report.write_bytes(bytes(data))
    elif damage == "garbage":
        garbage(report)
    else:
        report.unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = live.profile()
    named = [str(w.message) for w in caught if issubclass(w.category, DamagedRecordingWarning)]
    assert len(named) == 1 and "damaged" in named[0] and report.name in named[0], named
    assert again.source == "live" and live.calls() == 2  # not a cache hit on the damaged file
    assert len(again.launches) == 2 * len(SIZES) and (again.launches["duration_s"] > 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert live.profile().source == "cache"  # healed: the next call is a clean hit


# ---------------------------------------------------------------------------
# Replay: damaged recordings are left out, with one warning naming them
# ---------------------------------------------------------------------------


@pytest.fixture
def two_recordings(tmp_path, monkeypatch):
    """Two profiles of scale in <tmp>/h200: the small configs in one, the large in the other (real reports)."""
    source = committed_report()
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    provenance = {"gpu": "NVIDIA H200", "date": "2026-11-20T09:30:00+00:00", "git_commit": "abc123"}
    saved = []
    for part, src in ((SIZES[:5], "small"), (SIZES[5:], "large")):
        staged = profiles.temp_report_path()
        shutil.copyfile(source, staged)
        saved.append(profiles.save(staged, entries(part), preset="roofline", source_hash=src, provenance=provenance))
    return tmp_path, saved


@pytest.mark.parametrize("damage", ["truncated", "garbage", "one byte changed"])
def test_replay_leaves_a_damaged_recording_out_and_says_so(two_recordings, damage):
    root, (small, large) = two_recordings
    if damage == "truncated":
        truncated(large.report, large.report)
    elif damage == "garbage":
        garbage(large.report)
    else:
        data = bytearray(large.report.read_bytes())
        data[-100] ^= 0x01
        large.report.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = profile_sweep("scale", configs=SIZES, reports_dir=root)
    assert len(damaged_warnings(caught, large.report)) == 1
    assert any(issubclass(w.category, MissingRecordingWarning) for w in caught)
    assert result.replayed and len(result.launches) == 2 * 5  # the intact recording, whole
    assert set(result.launches["n"]) == {c["n"] for c in SIZES[:5]}
    assert (result.launches["duration_s"] > 0).all()
    assert result.report_paths == [small.report]
    assert len(result.missing) == 2 * 5


def test_replay_of_an_old_sidecar_without_a_hash_checks_the_launches(tmp_path, monkeypatch):
    """A committed-style sidecar (no size or hash) over a truncated report: damaged, not a partial replay."""
    source = committed_report()
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    folder = tmp_path / "h200" / "profiles" / "scale"
    folder.mkdir(parents=True)
    sidecar = next(COMMITTED.glob("roofline-*.json"))
    shutil.copyfile(sidecar, folder / sidecar.name)
    report = truncated(source, folder / source.name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NoRecordingError, match="damaged"):
            profile_sweep("scale", configs=SIZES, reports_dir=tmp_path)
    (message,) = damaged_warnings(caught, report)
    assert "it is cut short" in message


def test_replay_of_a_recording_holding_no_launch_raises_no_keyerror(tmp_path, monkeypatch):
    """A garbage report reads as 0 launches: that used to fail later with KeyError: 'duration_s'."""
    committed_report()
    monkeypatch.setattr(sweep, "gpu_available", lambda: False)
    profiles = store.ProfileStore("h200", "scale", tmp_path)
    staged = garbage(profiles.temp_report_path())
    saved = profiles.save(staged, entries(SIZES[:2]), preset="roofline", source_hash="x", provenance={})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NoRecordingError):
            profile_sweep("scale", configs=SIZES[:2], reports_dir=tmp_path)
    assert len(damaged_warnings(caught, saved.report)) == 1


# ---------------------------------------------------------------------------
# Tampered or odd sidecars (class 7)
# ---------------------------------------------------------------------------


def _drop(key):
    def edit(meta):
        del meta[key]
        return meta

    return edit


def _entry(**changes):
    def edit(meta):
        meta["entries"][0].update(changes)
        return meta

    return edit


def _without_backend(meta):
    del meta["entries"][0]["backend"]
    return meta


TAMPERED = {
    "a JSON list": lambda meta: [meta],
    "a JSON string": lambda meta: "roofline",
    "no entries": _drop("entries"),
    "no report": _drop("report"),
    "no preset": _drop("preset"),
    "an entry without a backend": _without_backend,
    "a config value that is a string": _entry(config={"n": "2048"}),
    "a config that is a list": _entry(config=[2048]),
    "an entry that is a number": lambda meta: meta | {"entries": [7]},
    "created_ns as a string": lambda meta: meta | {"created_ns": "yesterday"},
    "settings as a list": lambda meta: meta | {"settings": ["none", "all"]},
    "report_bytes as a string": lambda meta: meta | {"report_bytes": "big"},
    "a report outside its folder": lambda meta: meta | {"report": "../../elsewhere.ncu-rep"},
    "a report that is not a string": lambda meta: meta | {"report": 12},
    "provenance as a list": lambda meta: meta | {"provenance": []},
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_sidecar_is_skipped_with_a_warning(two_recordings, case):
    root, (small, large) = two_recordings
    meta = json.loads(large.sidecar.read_text())
    large.sidecar.write_text(json.dumps(TAMPERED[case](meta)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = profile_sweep("scale", configs=SIZES[:5], reports_dir=root)
        listed = store.ProfileStore("h200", "scale", root).profiles()
    assert result.replayed and len(result.launches) == 2 * 5 and result.missing == []
    assert [p.name for p in listed] == [small.name]
    assert len(damaged_warnings(caught, large.sidecar)) == 2  # once per call, naming the sidecar


DEEP = 1000
"""Nesting past Python's recursion limit (json's parser and repr recurse per level)."""
NESTED_TEXT = {
    "the whole sidecar nested": lambda meta: "[" * DEEP + "]" * DEEP,
    "its settings nested": lambda meta: json.dumps(meta | {"settings": "DEEP"}).replace(
        '"DEEP"', "[" * 900 + "]" * 900
    ),
    "its provenance nested": lambda meta: json.dumps(meta | {"provenance": {"date": "DEEP"}}).replace(
        '"DEEP"', "[" * 900 + "]" * 900
    ),
    "an entry's config nested": lambda meta: json.dumps(meta | {"entries": "DEEP"}).replace(
        '"DEEP"', '[{"backend": "oasr", "dtype": "float16", "config": ' + '{"n": ' * 900 + "1" + "}" * 901 + "]"
    ),
}


@pytest.mark.parametrize("case", list(NESTED_TEXT))
def test_a_deeply_nested_sidecar_is_skipped_with_a_warning(two_recordings, case):
    root, (_, large) = two_recordings
    large.sidecar.write_text(NESTED_TEXT[case](json.loads(large.sidecar.read_text())))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = profile_sweep("scale", configs=SIZES[:5], reports_dir=root)
    assert result.replayed and len(result.launches) == 2 * 5 and result.missing == []
    (message,) = damaged_warnings(caught, large.sidecar)
    assert len(message) < 1000, message  # the value is shown cut short, not whole


def test_a_tampered_sidecar_does_not_stop_live_profiling(live):
    live.profile()
    (saved,) = live.store().profiles()
    saved.sidecar.write_text(json.dumps([json.loads(saved.sidecar.read_text())]))
    with pytest.warns(DamagedRecordingWarning, match="JSON list"):
        result = live.profile()
    assert result.source == "live" and live.calls() == 2 and len(result.launches) == 2 * len(SIZES)
