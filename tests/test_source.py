"""Per-source-line hotspots (profiling.nsight.source): the per-PC reader on stand-in actions,
the committed source-preset recordings (line counts sum to the kernel's), the heat-bar HTML
(escaped), the replayable .lines.csv, and -lineinfo leaving every SASS instruction as it was."""

from __future__ import annotations

import glob
import io
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pandas as pd
import pytest

from oasr.jit.core import find_cuda_home
from oasr.jit.families import NORM, SCALE, Family
from profiling.nsight import source
from profiling.nsight.sweep import profile_sweep
from profiling.provenance import REPO_ROOT
from profiling.workbench import notebook
from profiling.workbench.notebook import Workbench

HOSTILE = "<script>alert('x')</script> & \"q\""


class _Ids:
    def __init__(self, pcs: list[int]) -> None:
        self.pcs = pcs

    def as_uint64(self, i: int) -> int:
        return self.pcs[i]


class _Metric:
    """An instanced metric keyed by PC (or a plain one with ``value``)."""

    def __init__(self, by_pc: dict[int, float] | None = None, value: float = 0.0) -> None:
        self.by_pc = by_pc or {}
        self.total = value

    def has_correlation_ids(self) -> bool:
        return bool(self.by_pc)

    def correlation_ids(self) -> _Ids:
        return _Ids(list(self.by_pc))

    def num_instances(self) -> int:
        return len(self.by_pc)

    def as_double(self, i: int | None = None) -> float:
        return self.total if i is None else list(self.by_pc.values())[i]


class _Info:
    def __init__(self, file: str, line: int) -> None:
        self.file, self.number = file, line

    def file_name(self) -> str:
        return self.file

    def line(self) -> int:
        return self.number


class _SwigMap:
    """What ``ncu_report``'s ``source_files()`` returns: a SWIG ``map_string_string`` (items, indexing, no ``get``)."""

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items

    def items(self) -> list[tuple[str, str]]:
        return list(self._items.items())

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __len__(self) -> int:
        return len(self._items)


class _Action:
    """ncu_report's action interface for a kernel of 6 PCs: lines 3, 3, 5 and 9 of k.cuh, two PCs with no line."""

    FILE = "/src/include/oasr/k.cuh"
    LINES: ClassVar[dict[int, int]] = {0x10: 3, 0x20: 3, 0x30: 5, 0x40: 9}
    TEXT = "\n".join(["// k", "#include <x>", "float a = x[i];", "", f"y = a; // {HOSTILE}", "", "", "", "return;"])

    def __init__(self) -> None:
        pcs = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
        inst = dict(zip(pcs, [100.0, 50.0, 400.0, 10.0, 7.0, 3.0], strict=True))
        self.metrics = {
            "inst_executed": _Metric(inst),
            "smsp__pcsamp_sample_count": _Metric(dict(zip(pcs, [20.0, 0.0, 70.0, 5.0, 4.0, 1.0], strict=True))),
            "smsp__pcsamp_warps_issue_stalled_long_scoreboard": _Metric({0x10: 15.0, 0x30: 50.0}),
            "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued": _Metric({0x10: 14.0}),
            "smsp__pcsamp_warps_issue_stalled_wait": _Metric({0x30: 10.0, 0x40: 5.0}),
            "smsp__pcsamp_warps_issue_stalled_selected": _Metric({0x30: 10.0, 0x10: 5.0}),
            "derived__memory_l2_theoretical_sectors_global_excessive": _Metric({0x10: 8.0}),
            # keyed by opcode index, not by PC: must not land on a source line
            "sass__inst_executed_per_opcode": _Metric({0: 1e6, 1: 2e6}),
            "smsp__inst_executed.sum": _Metric(value=sum(inst.values())),
        }

    def name(self, *_: Any) -> str:
        return "KernelK"

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def metric_by_name(self, name: str) -> _Metric | None:
        return self.metrics.get(name)

    def source_info(self, pc: int) -> _Info | None:
        return _Info(self.FILE, self.LINES[pc]) if pc in self.LINES else None

    def sass_by_pc(self, pc: int) -> str:
        return f"INST_{pc:#x} R0, R1 ;"

    def source_files(self) -> _SwigMap:
        return _SwigMap({self.FILE: self.TEXT})


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    monkeypatch.setattr(source, "actions_of", lambda report: [_Action(), _Action()])
    return source.parse_lines("stand-in.ncu-rep")


def test_lines_sum_to_the_kernel_and_no_pc_is_lost(lines: pd.DataFrame) -> None:
    action = _Action()
    assert sorted(set(lines["launch"])) == [0, 1]
    for _, launch in lines.groupby("launch"):
        assert launch["inst_executed"].sum() == source.kernel_instructions(action) == 570.0
        assert launch["pcs"].sum() == 6
        assert launch["samples"].sum() == 100.0
    first = lines[lines["launch"] == 0].set_index("line")
    assert first.loc[3, "inst_executed"] == 150.0 and first.loc[3, "pcs"] == 2
    assert first.loc[3, "source"] == "float a = x[i];"
    assert first.loc[3, "sass"] == "INST_0x10 R0, R1 ;\nINST_0x20 R0, R1 ;"
    assert first.loc[0, "file"] == "" and first.loc[0, "source"] == source.NO_LINE and first.loc[0, "pcs"] == 2


def test_only_pc_keyed_metrics_are_read(lines: pd.DataFrame) -> None:
    assert "stall_long_scoreboard" in lines and "stall_wait" in lines
    assert not any(c.endswith("_not_issued") or "opcode" in c for c in lines.columns)
    assert lines["l2_excess_sectors"].sum() == 16.0  # 8 per launch, on line 3
    assert lines["inst_executed"].max() < 1e6


def test_context_lines_carry_text_and_no_counts(lines: pd.DataFrame) -> None:
    first = lines[(lines["launch"] == 0) & (lines["file"] == _Action.FILE)].set_index("line")
    assert list(first.index) == list(range(1, 10))  # 3, 5, 9 and three lines around each, within the file
    assert first.loc[2, "source"] == "#include <x>" and first.loc[2, "pcs"] == 0 and first.loc[2, "inst_executed"] == 0


def test_top_lines_rank_by_samples_with_their_stall_reasons(lines: pd.DataFrame) -> None:
    top = source.top_lines(lines[lines["launch"] == 0], count=3)
    assert list(top["line"]) == [5, 3, 9]
    assert top.loc[0, "pct_samples"] == pytest.approx(70.0)
    assert top.loc[0, "top_stalls"] == "long_scoreboard 71%, wait 14%"  # "selected" (issuing) is no stall
    with pytest.raises(ValueError, match="by='nope'"):
        source.top_lines(lines, by="nope")


def test_annotated_source_is_escaped_with_a_heat_bar(lines: pd.DataFrame) -> None:
    page = source.annotated_source_html(lines[lines["launch"] == 0])
    assert HOSTILE not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp;" in page
    assert "width:100.0%" in page and "width:0.0%" in page  # line 5 is the hottest; context lines are empty
    assert source.hottest_file(lines) == _Action.FILE
    with pytest.raises(ValueError, match="-lineinfo"):
        source.hottest_file(lines[lines["file"] == ""])


def test_lines_csv_replays_and_is_reparsed_when_stale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    report = tmp_path / "source-1.ncu-rep"
    report.write_bytes(b"a report")
    monkeypatch.setattr(source, "actions_of", lambda report: [_Action()])
    path = source.ensure_lines(report)
    assert path == tmp_path / "source-1.lines.csv" and path.read_text().startswith("# report_sha256=")
    parsed = source.parse_lines(report)
    monkeypatch.setattr(source, "actions_of", lambda report: pytest.fail("a fresh .lines.csv is read, not parsed"))
    replayed = source.read_lines(report)
    pd.testing.assert_frame_equal(replayed, parsed, check_dtype=False)
    report.write_bytes(b"another report")
    monkeypatch.setattr(source, "actions_of", lambda report: [])
    assert source.read_lines(report).empty  # stale: parsed again (and this stand-in report has no launches)


# ----------------------------------------------------------------- committed source-preset recordings

PROFILES = REPO_ROOT / "reports" / "h200" / "profiles"
RECORDED = sorted({p.removesuffix(".gz") for p in glob.glob(str(PROFILES / "*" / "source-*.ncu-rep*"))})  # or packed


def _spins(lines: pd.DataFrame) -> bool:
    """The launch waits on mbarriers in a loop (CUTLASS's pipelines: ``cutlass/arch/barrier.h``; oasr's TMA kernels:
    ``oasr/common/mbarrier.cuh``). Its spin iterations depend on timing, and ncu counts the per-line instructions and
    the kernel's total in different replay passes: the two differ by the spins (28% on the grouped GEMM, 1.7% on the
    direct kernel's gemm_glu recording at 1947458, whose inlined waits count mostly on their callers' lines), so only
    spin-free kernels must add up."""
    waits = ("cutlass/arch/barrier.h", "oasr/common/mbarrier.cuh")
    return bool(lines.loc[lines["pcs"] > 0, "file"].str.endswith(waits).any())


@pytest.mark.skipif(not RECORDED, reason="no source-preset recording committed yet (made on the H200)")
@pytest.mark.parametrize("report", RECORDED, ids=lambda p: Path(p).parent.name)
def test_recorded_lines_sum_to_each_kernels_instructions(report: str) -> None:
    table = source.read_lines(report)
    actions = source.actions_of(report)
    assert len(actions) and set(table["launch"]) <= set(range(len(actions)))
    for launch, action in enumerate(actions):
        lines = table[table["launch"] == launch]
        total = source.kernel_instructions(action)
        assert total > 0 and lines["inst_executed"].sum() > 0, (launch, action.name())
        if not _spins(lines):
            assert lines["inst_executed"].sum() == pytest.approx(total, rel=0.01), (launch, action.name())
    executed = table[table["pcs"] > 0]
    assert ((executed["file"] != "") & (executed["source"] != "")).any()  # -lineinfo and --import-source worked


# ----------------------------------------------------------------- -lineinfo changes no instruction


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump") or str(find_cuda_home() / "bin" / "cuobjdump")
    if Path(found).is_file():
        return found
    wheels = glob.glob(
        str(Path(sys.prefix) / "lib" / "python3*" / "site-packages" / "nvidia" / "*" / "bin" / "cuobjdump")
    )
    return wheels[0] if wheels else None


def _sass(family: Family, flags: list[str], out: Path) -> list[str]:
    nvcc = str(find_cuda_home() / "bin" / "nvcc")
    src = family.jit_spec().sources[0]
    subprocess.run([nvcc, *flags, "-c", str(src), "-o", str(out)], check=True, capture_output=True, text=True)
    dump = subprocess.run([_cuobjdump(), "-sass", str(out)], check=True, capture_output=True, text=True).stdout
    return [line for line in dump.splitlines() if line.strip().startswith("/*")]  # instructions, not headers


@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump not found (CUDA toolkit bin/ or the nvidia wheels)")
@pytest.mark.parametrize("family", [SCALE, NORM], ids=lambda f: f.name)
def test_lineinfo_changes_no_instruction(family: Family, tmp_path: Path) -> None:
    flags = list(family.jit_spec().nvcc_flags)
    assert "-lineinfo" in flags
    without = [f for f in flags if f != "-lineinfo"]
    with_lines = _sass(family, flags, tmp_path / "with.o")
    assert len(with_lines) > 100
    assert with_lines == _sass(family, without, tmp_path / "without.o")


@pytest.mark.gpu
def test_live_source_profile_of_scale(tmp_path: Path) -> None:
    """On a GPU with ncu: the source preset profiles scale, stores its .lines.csv, and the lines add up."""
    config = {"n": 2**22}
    result = profile_sweep("scale", [config], backends=("oasr",), preset="source", reports_dir=tmp_path, live=True)
    (report,) = result.report_paths
    assert source.lines_path(report).is_file()
    table = source.result_lines(result.launches, result.report_paths)
    action = source.actions_of(report)[int(result.launches.loc[0, "launch"])]
    assert table["inst_executed"].sum() == pytest.approx(source.kernel_instructions(action), rel=0.01)
    body = table[table["file"].str.endswith("include/oasr/common/elementwise.cuh")]
    assert not body.empty and (body.loc[body["pcs"] > 0, "source"] != "").all()
    top = source.top_lines(table, count=3)
    assert len(top) == 3 and top["top_stalls"].str.len().gt(0).any()


# ----------------------------------------------------------------- the notebook's cells


def test_hotspots_cell_shows_limit_top_lines_and_escaped_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lines: pd.DataFrame
) -> None:
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    report = tmp_path / "source-x.ncu-rep"
    launches = pd.DataFrame(
        [{"profile": "source-x", "launch": 0, "config": "n=536870912", "dtype": "float16", "kernel": "KernelK",
          "duration_s": 7e-4, "pct_dram_peak": 88.0, "pct_l2_peak": 43.0}]
    )  # fmt: skip
    fake = SimpleNamespace(launches=launches, report_paths=[report], banner="Replayed from recordings <h200>.")
    monkeypatch.setattr(notebook, "profile_sweep", lambda *a, **k: fake)
    monkeypatch.setattr(source, "read_lines", lambda path: lines if path == report else pytest.fail(str(path)))
    page = Workbench(SCALE).hotspots("scale").data
    assert "DRAM-bound: DRAM at 88% of its peak (L2 43%); 65% of warp samples stalled on long_scoreboard" in page
    assert "&lt;h200&gt;" in page and HOSTILE not in page and "&lt;script&gt;" in page
    assert page.count("<tr>") > 10 and "width:100.0%" in page  # the top-lines table and the heat bars


def test_hotspots_and_compare_without_recordings_say_how_to_make_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    wb = Workbench(SCALE)
    note = wb.hotspots().data
    assert "No `source`-preset recording of `scale`" in note and "--preset source" in note
    assert "n=536870912" in note
    compared = wb.compare(base="HEAD").data
    assert compared.startswith("*No comparison of `scale`: ")  # no recording (or, in a copy without .git, no HEAD)


def test_limits_cell_on_the_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    wb = Workbench(SCALE)
    table = wb.limits(wb.profile())
    assert list(table.columns) == ["backend", "config", "dtype", "kernel", "sentence", "ncu_advice"]
    assert table["sentence"].str.startswith("DRAM-bound").any() and table["sentence"].str.startswith("launch").any()


IMAGE = "<img src=x onerror=alert(1)>"


def _tampered_norm_recording(tmp_path: Path) -> Path:
    """A copy of the committed layer_norm recordings whose line table gains a row, the hottest of its own file,
    whose line is markup (the report's SHA-256 header is kept: it binds the table to a report, not to an author)."""
    folder = tmp_path / "h200" / "profiles" / "layer_norm"
    shutil.copytree(PROFILES / "layer_norm", folder)
    (table_path,) = folder.glob("source-*.lines.csv")
    head, _, body = table_path.read_text().partition("\n")
    table = pd.read_csv(io.StringIO(body), keep_default_na=False, dtype=str)
    row = table.loc[pd.to_numeric(table["samples"]).idxmax()].copy()
    row["file"], row["line"], row["samples"] = "/src/x.cuh", IMAGE, "1e12"
    table = pd.concat([table, row.to_frame().T], ignore_index=True)
    table_path.write_text(head + "\n" + table.to_csv(index=False))
    return table_path


def test_a_recorded_line_that_is_markup_reaches_no_html(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 57's stored injection, in replay on the committed norm recording: the line column is parsed as the
    integer it must be, so the table is refused in one sentence and no handler reaches the notebook's HTML."""
    table_path = _tampered_norm_recording(tmp_path)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    page = Workbench(NORM).hotspots("layer_norm").data
    assert "<img" not in page
    assert "is damaged" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    with pytest.raises(ValueError, match=r"column 'line' holds '<img src=x onerror=alert\(1\)>', not an integer"):
        source.read_lines(table_path.with_name(table_path.name.replace(".lines.csv", ".ncu-rep")))


def test_annotated_source_formats_every_count_as_a_number(lines: pd.DataFrame) -> None:
    hostile = lines.astype({"line": object})
    hostile.loc[hostile.index[0], ["file", "line"]] = ["/src/x.cuh", IMAGE]
    with pytest.raises(ValueError):
        source.annotated_source_html(hostile, file="/src/x.cuh")
