"""Report reader and metric presets, checked against real H200 reports (no GPU, no ncu needed).

The reports are read twice: through :mod:`profiling.nsight.reader`, and directly with
``ncu_report`` by name, so units and sums are checked against the raw metrics.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import RECORDINGS as ALL_RECORDINGS

from profiling.harness.ops import OPS
from profiling.nsight import packing, plausibility
from profiling.nsight import reader as R
from profiling.nsight.presets import PRESETS, ROOFLINE_METRICS, ncu_args
from profiling.nsight.reader import ReportTables, read_report, tables_from_actions

LARGE_BYTES = 16 * 2**20
"""Inputs at least this large count as "large": DRAM reads match the hand count within 2%."""


RECORDINGS = ALL_RECORDINGS / "scale"
"""The scale recordings: these tests check counters against scale's hand count."""


@cache
def _reports() -> dict[Path, ReportTables]:
    return {p: read_report(p) for p in packing.stored(RECORDINGS)}


@pytest.fixture(scope="module")
def reports() -> dict[Path, ReportTables]:
    found = _reports()
    assert found, f"no recording under {RECORDINGS}"
    return found


@pytest.fixture(scope="module")
def roofline_reports(reports: dict[Path, ReportTables]) -> dict[Path, ReportTables]:
    """Reports made with the roofline preset (byte and FLOP counters present)."""
    found = {p: t for p, t in reports.items() if t.launches[["l2_bytes", "flop"]].notna().all(axis=None)}
    assert found, f"no roofline-preset report under {RECORDINGS}"
    return found


def _raw(path: Path) -> list[Any]:
    ncu_report = R.import_ncu_report()
    rep = ncu_report.load_report(str(packing.readable(path)))
    return [
        rep.range_by_idx(i).action_by_idx(j) for i in range(rep.num_ranges()) for j in range(len(rep.range_by_idx(i)))
    ]


def _value(action: Any, name: str) -> float:
    metric = action.metric_by_name(name)
    return math.nan if metric is None else float(metric.value())


# ----------------------------------------------------------------- presets


def test_presets_and_ncu_args() -> None:
    assert set(PRESETS) == {"timing", "roofline", "source", "full"}
    timing = ncu_args("timing")
    assert timing[timing.index("--metrics") + 1].split(",")[0] == "gpu__time_duration.sum"
    assert "launch__registers_per_thread" in timing[timing.index("--metrics") + 1]
    assert timing[-2:] == ["--import-sass", "no"] and "--set" not in timing
    roofline = ncu_args("roofline")
    assert roofline[roofline.index("--metrics") + 1].split(",") == list(ROOFLINE_METRICS)
    assert [roofline[i + 1] for i, a in enumerate(roofline) if a == "--section"] == [
        "SpeedOfLight",
        "LaunchStats",
        "Occupancy",
    ]
    assert roofline[-2:] == ["--import-sass", "no"]
    assert ncu_args("full") == ["--set", "full"]  # SASS kept
    source = ncu_args("source")
    sections = [source[i + 1] for i, a in enumerate(source) if a == "--section"]
    assert sections[-2:] == ["SourceCounters", "WarpStateStats"]
    assert source[-2:] == ["--import-source", "yes"] and "--import-sass" not in source  # SASS kept: lines need it
    assert set(ROOFLINE_METRICS) < set(source[source.index("--metrics") + 1].split(","))


def test_roofline_metric_list_is_the_agreed_one() -> None:
    inst = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
    expected = {
        "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
        "l1tex__t_bytes.sum", *(inst.format(op) for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma")),
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
        "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "dram__bytes.sum.peak_sustained",
        "dram__cycles_elapsed.avg.per_second", "lts__t_bytes.sum.peak_sustained", "lts__cycles_elapsed.avg.per_second",
        "l1tex__t_bytes.sum.peak_sustained", "l1tex__cycles_elapsed.avg.per_second",
        inst.format("ffma") + ".peak_sustained", inst.format("hfma") + ".peak_sustained",
        "sm__cycles_elapsed.avg.per_second",
        "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained",
        "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained",
        "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained",
        "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained",
        "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
    }  # fmt: skip
    assert set(ROOFLINE_METRICS) == expected
    assert len(ROOFLINE_METRICS) == len(expected)


def test_unknown_preset_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="timing, roofline, source, full"):
        ncu_args("detailed")


# ----------------------------------------------------------------- launches from real reports


def test_one_row_per_launch_with_documented_columns(reports: dict[Path, ReportTables]) -> None:
    for path, tables in reports.items():
        df = tables.launches
        assert len(df) == len(_raw(path)), path
        fields = [c for c in df.columns if c not in (*R.BASE_COLUMNS, *R.METRIC_COLUMNS, *plausibility.COLUMNS)]
        assert list(df.columns) == [*R.BASE_COLUMNS, *fields, *R.METRIC_COLUMNS, *plausibility.COLUMNS]
        assert df["launch"].tolist() == list(range(len(df)))
        for column in set(df.columns) - set(fields):
            documented = re.sub(r"^pct_(\w+)_peak$", r"``\1``", column)  # listed under pct_<ceiling>_peak
            assert re.search(rf"(?<![\w.]){re.escape(documented)}(?![\w.])", R.__doc__), f"{column} undocumented"


def test_ranges_parse_into_op_backend_dtype_and_config(reports: dict[Path, ReportTables]) -> None:
    for tables in reports.values():
        df = tables.launches
        assert set(df["op"]) == {"scale"} and set(df["backend"]) <= {"oasr", "torch"}
        assert set(df["dtype"]) <= {"float32", "float16", "bfloat16"}
        assert str(df["n"].dtype) == "Int64"
        for row in df.itertuples():
            assert row.config == f"n={row.n}"
            assert row.nvtx_range == f"scale:{row.backend}:n={row.n},dtype={row.dtype}"
        kernels = dict(zip(df["backend"], df["kernel"], strict=False))
        assert kernels.get("oasr", "MapKernel") == "MapKernel"  # scale runs on the element-wise map


def test_values_and_units_match_the_raw_metrics(reports: dict[Path, ReportTables]) -> None:
    for path, tables in reports.items():
        for action, row in zip(_raw(path), tables.launches.itertuples(), strict=True):
            duration = action.metric_by_name("gpu__time_duration.sum")
            assert duration.unit() in ("ns", "nsecond")
            assert row.duration_s == pytest.approx(float(duration.value()) * 1e-9, rel=1e-12)
            assert 1e-7 < row.duration_s < 1.0
            assert row.grid_size == _value(action, "launch__grid_size")
            assert row.block_size == _value(action, "launch__block_size")
            assert row.registers_per_thread == _value(action, "launch__registers_per_thread")
            read, write = _value(action, "dram__bytes_read.sum"), _value(action, "dram__bytes_write.sum")
            if math.isnan(read):  # timing preset: counters absent -> NaN, not an error
                assert math.isnan(row.dram_bytes) and math.isnan(row.flop) and math.isnan(row.pct_dram_peak)
                continue
            assert action.metric_by_name("dram__bytes_read.sum").unit() == "byte"
            assert (row.dram_read_bytes, row.dram_write_bytes, row.dram_bytes) == (read, write, read + write)
            assert row.dram_bw_bytes_per_s == pytest.approx((read + write) / row.duration_s)


def test_flop_and_bytes_of_roofline_reports(roofline_reports: dict[Path, ReportTables]) -> None:
    inst = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
    for path, tables in roofline_reports.items():
        for action, row in zip(_raw(path), tables.launches.itertuples(), strict=True):
            count = {op: _value(action, inst.format(op)) for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma")}
            assert row.flop_fp32 == count["fadd"] + count["fmul"] + 2 * count["ffma"]
            assert row.flop_fp16 == 2 * count["hadd"] + 2 * count["hmul"] + 4 * count["hfma"]
            assert row.flop_tensor_bf16 == _value(action, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")
            tensor = row.flop_tensor_bf16 + row.flop_tensor_fp16 + row.flop_tensor_tf32
            assert row.flop == row.flop_fp32 + row.flop_fp16 + tensor
            assert row.l2_bytes == _value(action, "lts__t_bytes.sum")
            assert row.l1_bytes == _value(action, "l1tex__t_bytes.sum")
            assert row.flop_per_s == pytest.approx(row.flop / row.duration_s)


def test_scale_counters_against_hand_count(roofline_reports: dict[Path, ReportTables]) -> None:
    """FLOP = n and DRAM reads = n * itemsize within 2% at large sizes; writes miss at most the L2."""
    itemsize = {"float32": 4, "float16": 2, "bfloat16": 2}
    checked = 0
    for tables in roofline_reports.values():
        l2_size = tables.device["l2_cache_bytes"]
        for row in tables.launches.itertuples():
            n, size = int(row.n), int(row.n) * itemsize[row.dtype]
            assert row.flop_fp32 == pytest.approx(n, rel=0.02)  # one fp32 multiply per element
            assert size - l2_size <= row.dram_write_bytes <= 1.02 * size  # writes left in L2 are not counted
            if size >= LARGE_BYTES:
                assert row.dram_read_bytes == pytest.approx(size, rel=0.02)
                assert row.dram_bytes >= 2 * size - l2_size
                checked += 1
    assert checked, "no large-size launch in the roofline recordings"


def test_device_info(roofline_reports: dict[Path, ReportTables]) -> None:
    for tables in roofline_reports.values():
        device = tables.device
        assert device["gpu"] == "NVIDIA H200" and device["gpu_slug"] == "h200"
        assert device["compute_capability"] == "9.0" and device["sm_count"] == 132
        assert device["l2_cache_bytes"] == 60 * 2**20
        assert 1.0e9 < device["clocks_hz"]["sm"] <= device["max_sm_clock_hz"] * 1.1
        assert 3.0e9 < device["clocks_hz"]["dram"] < 3.3e9
        df = tables.launches
        weighted = (df["sm_clock_hz"] * df["duration_s"]).sum() / df["duration_s"].sum()
        assert device["clocks_hz"]["sm"] == pytest.approx(weighted, rel=1e-12)
        peaks = device["peaks_per_cycle"]
        assert peaks["dram__bytes.sum.peak_sustained"] == 1504
        bf16 = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.{}.peak_sustained"
        # .sum is already whole-GPU: 4,096 per SM x 132 SMs (ncu-hopper.md).
        assert peaks[bf16.format("sum")] == 4096 * 132 == peaks[bf16.format("avg")] * device["sm_count"]


def test_advice_table(roofline_reports: dict[Path, ReportTables]) -> None:
    for tables in roofline_reports.values():
        advice, launches = tables.advice, tables.launches
        assert list(advice.columns) == list(R.ADVICE_COLUMNS)
        assert len(advice) > 0, "roofline preset collects sections, so ncu rules give advice"
        assert set(advice["launch"]) <= set(launches["launch"])
        assert set(advice["severity"]) <= {"ok", "optimization", "warning", "error", "none"}
        assert set(advice["section"]) <= {"SpeedOfLight", "LaunchStats", "Occupancy"}
        assert not advice["message"].str.contains("@section:|@url:", regex=True).any()
        assert (advice["title"].str.len() + advice["message"].str.len() > 0).all()
        merged = advice.merge(launches[["launch", "kernel", "config"]], on="launch", suffixes=("", "_launch"))
        assert (merged["kernel"] == merged["kernel_launch"]).all() and (
            merged["config"] == merged["config_launch"]
        ).all()
        small = advice[(advice["rule_id"] == "LaunchConfiguration") & (advice["config"] == "n=2048")]
        assert small.empty or small["title"].eq("Small Grid").all()


# ----------------------------------------------------------------- synthetic actions: missing data


class _Metric:
    def __init__(self, value: Any, unit: str) -> None:
        self._value, self._unit = value, unit

    def value(self) -> Any:
        return self._value

    def unit(self) -> str:
        return self._unit


class _Action:
    """The part of ncu_report's IAction the reader uses."""

    def __init__(self, metrics: dict[str, tuple[Any, str]], ranges: dict[str, list[str]] | None) -> None:
        self._metrics, self._ranges = metrics, ranges

    def name(self, *_: Any) -> str:
        return "k"

    def metric_names(self) -> list[str]:
        return list(self._metrics)

    def metric_by_name(self, name: str) -> _Metric | None:
        return _Metric(*self._metrics[name]) if name in self._metrics else None

    def nvtx_state(self) -> Any:
        if self._ranges is None:
            return None
        names = list(self._ranges)
        domains = {
            i: SimpleNamespace(name=lambda d=d: d, push_pop_ranges=lambda d=d: self._ranges[d])
            for i, d in enumerate(names)
        }
        return SimpleNamespace(domains=lambda: list(domains), domain_by_id=domains.__getitem__)

    def rule_results_as_dicts(self) -> list[dict[str, Any]]:
        return []


def test_missing_metrics_give_nan_and_unknown_ranges_are_kept() -> None:
    timing_only = {"gpu__time_duration.sum": (2.5, "us"), "launch__grid_size": (4, "")}
    actions = [
        _Action(timing_only, {"oasr": ["sweep", "scale:oasr:b=2,t=7,dtype=bfloat16"]}),
        _Action(timing_only, {"oasr": ["sweep", "warmup"]}),
        _Action(timing_only, None),
    ]
    tables = tables_from_actions(actions)
    df = tables.launches
    assert list(df.columns[:7]) == ["launch", "op", "backend", "dtype", "config", "b", "t"]
    assert df.loc[0, "config"] == "b=2,t=7" and df.loc[0, "t"] == 7
    assert df["duration_s"].tolist() == pytest.approx([2.5e-6] * 3)
    for column in ("dram_bytes", "l2_bytes", "flop", "flop_fp32", "dram_bw_bytes_per_s", "pct_dram_peak", "block_size"):
        assert df[column].isna().all(), column
    assert pd.isna(df.loc[1, "op"]) and df.loc[1, "nvtx_range"] == "warmup"
    assert pd.isna(df.loc[2, "op"]) and pd.isna(df.loc[2, "nvtx_range"])
    assert pd.isna(df.loc[1, "b"])
    assert tables.advice.empty and list(tables.advice.columns) == list(R.ADVICE_COLUMNS)
    assert tables.device["gpu"] == "unknown" and math.isnan(tables.device["clocks_hz"]["sm"])


def test_a_partial_flop_kind_is_nan_not_zero() -> None:
    """``--set full`` lacks some instruction counters: a partial sum would read as "no FLOP"."""
    metrics = {"gpu__time_duration.sum": (1000, "ns"), "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": (0, "inst")}
    row = tables_from_actions([_Action(metrics, None)]).launches.iloc[0]
    assert math.isnan(row["flop_fp32"]) and math.isnan(row["flop"])


def test_clean_message() -> None:
    text = "See @section:LaunchStats:Launch Statistics@ and the @url:Guide:https://x.org/a#b@."
    assert R.clean_message(text) == "See Launch Statistics and the Guide (https://x.org/a#b)."


def test_missing_file_and_missing_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no Nsight Compute report"):
        read_report(tmp_path / "absent.ncu-rep")
    monkeypatch.setitem(__import__("sys").modules, "ncu_report", None)  # makes `import ncu_report` fail
    monkeypatch.setattr(R, "NCU_PYTHON_GLOBS", (str(tmp_path / "nsight-compute-*" / "extras" / "python"),))
    with pytest.raises(ImportError, match="pip install ncu-report"):
        R.import_ncu_report()


def test_every_committed_recording_reads_back_for_its_op() -> None:
    folders = sorted(p for p in ALL_RECORDINGS.iterdir() if p.is_dir())
    assert [f.name for f in folders] == sorted(OPS)  # every op of the harness is recorded
    for folder in folders:  # the roofline sweeps (test_source reads the source-preset ones, oasr's alone)
        stored = packing.stored(folder, "roofline-*")
        assert stored, f"no roofline recording in {folder}"
        for path in stored:
            launches = read_report(path).launches
            assert set(launches["op"]) == {folder.name} and set(launches["backend"]) == {"oasr", "torch"}
            assert launches["duration_s"].gt(0).all() and launches["dram_bytes"].gt(0).all()
