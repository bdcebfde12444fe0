"""Roofline numbers: ceilings from peaks x clocks (profiling.nsight.presets), scale against hand
computation, measured ceilings (profiling.analysis.roofline)."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import RECORDINGS as ALL_RECORDINGS

from profiling.analysis import roofline as RL
from profiling.nsight import packing
from profiling.nsight.presets import CEILING_COLUMNS, counter_ceilings
from profiling.nsight.reader import ReportTables, read_report

LARGE_BYTES = 16 * 2**20
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
# Per-cycle peaks of the whole H200, as measured in shared/notes/ncu-hopper.md.
H200_PER_CYCLE = {"dram": 1504, "l2": 9024, "l1": 67584, "fp32": 16896, "fp16": 16896}
H200_TENSOR_PER_SM = {"tensor_bf16": 4096, "tensor_fp16": 4096, "tensor_tf32": 2048, "tensor_bf16_mma": 8192 / 3}


RECORDINGS = ALL_RECORDINGS / "scale"
"""The scale recordings: these tests check counters against scale's hand count."""


@cache
def _roofline_reports() -> tuple[ReportTables, ...]:
    tables = [read_report(packing.readable(p)) for p in packing.stored(RECORDINGS)]
    return tuple(t for t in tables if t.launches[["l2_bytes", "flop"]].notna().all(axis=None))


@pytest.fixture(scope="module")
def reports() -> tuple[ReportTables, ...]:
    found = _roofline_reports()
    assert found, f"no roofline-preset report under {RECORDINGS}"
    return found


def _value(ceilings: pd.DataFrame, name: str) -> float:
    return float(ceilings.loc[ceilings["name"] == name, "value"].iloc[0])


# ----------------------------------------------------------------- ceilings


def test_counter_ceilings_are_peak_times_clock(reports: tuple[ReportTables, ...]) -> None:
    for tables in reports:
        device, clocks = tables.device, tables.device["clocks_hz"]
        ceilings = counter_ceilings(device)
        assert list(ceilings.columns) == list(CEILING_COLUMNS)
        assert set(ceilings["source"]) == {"counters"}
        sm = clocks["sm"]
        hand = {
            "dram": H200_PER_CYCLE["dram"] * clocks["dram"],
            "l2": H200_PER_CYCLE["l2"] * clocks["l2"],
            "l1": H200_PER_CYCLE["l1"] * clocks["l1"],
            "fp32": H200_PER_CYCLE["fp32"] * 2 * sm,  # 2 FLOP per FFMA
            "fp16": H200_PER_CYCLE["fp16"] * 4 * sm,  # 4 FLOP per HFMA2 instruction as counted
            **{name: per_sm * device["sm_count"] * sm for name, per_sm in H200_TENSOR_PER_SM.items()},
        }
        for name, value in hand.items():
            assert _value(ceilings, name) == pytest.approx(value, rel=1e-6), name
        # Sanity against the data sheet: 4.8 TB/s HBM3e; ~989 TFLOP/s dense BF16 at 1.83 GHz.
        assert 4.6e12 < _value(ceilings, "dram") < 5.0e12
        assert _value(ceilings, "tensor_bf16") / sm * 1.83e9 == pytest.approx(989.5e12, rel=0.01)
        units = dict(zip(ceilings["name"], ceilings["unit"], strict=True))
        assert units["dram"] == "byte/s" and units["fp32"] == "FLOP/s"
        assert ceilings["formula"].str.contains("peak_sustained").all()


def test_measured_ceilings_round_trip(tmp_path: Path) -> None:
    assert RL.load_measured_ceilings("h200", root=tmp_path) is None
    prov = {"gpu": "NVIDIA H200", "git_commit": "abc"}
    path = RL.save_measured_ceilings("h200", 4.3e12, 7.9e14, prov, root=tmp_path)
    assert path == tmp_path / "h200" / "ceilings.json"
    assert [p.name for p in path.parent.iterdir()] == ["ceilings.json"]  # no temp file left behind
    data = RL.load_measured_ceilings("h200", root=tmp_path)
    assert data["copy_bytes_per_s"] == 4.3e12 and data["cublas_flop_per_s"] == 7.9e14
    assert data["provenance"] == prov and data["gpu_slug"] == "h200" and data["saved_at"]
    RL.save_measured_ceilings("h200", 4.4e12, 8.0e14, prov, root=tmp_path)  # replaces atomically
    assert json.loads(path.read_text())["copy_bytes_per_s"] == 4.4e12
    rows = RL.measured_ceilings(RL.load_measured_ceilings("h200", root=tmp_path))
    assert rows[["name", "kind", "source", "applies_to"]].values.tolist() == [
        ["copy", "memory", "measured", "dram"],
        ["cublas_bf16", "compute", "measured", "tensor_bf16"],
    ]
    device = {"gpu_slug": "h200", "peaks_per_cycle": {}, "clocks_hz": {}}
    assert set(RL.ceilings(device, root=tmp_path)["name"]) >= {"dram", "copy", "cublas_bf16"}
    assert "copy" not in set(RL.ceilings(device, root=tmp_path, measured=False)["name"])


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "4e12"])
def test_save_measured_ceilings_rejects_bad_values(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="copy_bytes_per_s"):
        RL.save_measured_ceilings("h200", bad, 7.9e14, {}, root=tmp_path)  # type: ignore[arg-type]
    assert not (tmp_path / "h200" / "ceilings.json").exists()


def test_load_rejects_incomplete_file(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "ceilings.json").write_text('{"copy_bytes_per_s": 1}')
    with pytest.raises(ValueError, match="cublas_flop_per_s"):
        RL.load_measured_ceilings("x", root=tmp_path)


# ----------------------------------------------------------------- scale against hand computation


def test_scale_expected_work_is_the_hand_count(reports: tuple[ReportTables, ...]) -> None:
    for tables in reports:
        df = RL.expected_work(tables.launches)
        for row in df.itertuples():
            n, itemsize = int(row.n), ITEMSIZE[row.dtype]
            assert row.expected_bytes == 2 * n * itemsize and row.expected_flop == n == row.expected_flop_fp32
            assert row.effective_bw_bytes_per_s == pytest.approx(2 * n * itemsize / row.duration_s)
            assert row.bytes_vs_expected_pct == pytest.approx(100 * (row.dram_bytes / (2 * n * itemsize) - 1))
            assert row.flop_fp32_vs_expected_pct == pytest.approx(0.0, abs=2.0)  # fp32 FLOP = n
            # fp16->fp32 conversions land in the hadd counter; bf16's are integer shifts.
            if row.dtype == "float16":
                assert row.flop_note.startswith("fp16 counters include half<->float conversions")
            if row.bytes_vs_expected_pct < -RL.NOTE_TOLERANCE_PCT:
                assert "writes still in L2" in row.bytes_note


def test_scale_roofline_numbers_match_hand_computation(reports: tuple[ReportTables, ...]) -> None:
    """bytes = 2*n*itemsize, FLOP = n: the roofline quantities by hand vs the module, large sizes."""
    checked = 0
    for tables in reports:
        ceilings = counter_ceilings(tables.device)
        dram, fp32 = _value(ceilings, "dram"), _value(ceilings, "fp32")
        l2_size = tables.device["l2_cache_bytes"]
        df = RL.classify(RL.expected_work(tables.launches), ceilings)
        for row in df.itertuples():
            n, itemsize = int(row.n), ITEMSIZE[row.dtype]
            if n * itemsize < LARGE_BYTES:
                continue
            checked += 1
            hand_bytes, hand_flop = 2 * n * itemsize, n
            hand_ai = hand_flop / hand_bytes
            hand_bw = hand_bytes / row.duration_s
            # Counters vs hand: FLOP and DRAM reads within 2%; DRAM writes short by at most the L2.
            assert row.flop_fp32 == pytest.approx(hand_flop, rel=0.02)
            assert row.dram_read_bytes == pytest.approx(hand_bytes / 2, rel=0.02)
            assert -(100 * l2_size / hand_bytes) - 2 <= row.bytes_vs_expected_pct <= 2
            assert row.flop_fp32 / row.dram_bytes == pytest.approx(hand_ai, rel=0.02 + l2_size / hand_bytes)
            # The module's roofline arithmetic vs the same by hand from its counters.
            assert row.ai_dram_flop_per_byte == pytest.approx(row.flop / row.dram_bytes, rel=1e-12)
            assert row.ai_l2_flop_per_byte == pytest.approx(row.flop / row.l2_bytes, rel=1e-12)
            assert row.ai_l1_flop_per_byte == pytest.approx(row.flop / row.l1_bytes, rel=1e-12)
            assert row.bound == "memory" and hand_ai < fp32 / dram  # scale is far left of the knee
            assert row.memory_peak_bytes_per_s == dram
            assert row.roof_flop_per_s == pytest.approx(row.ai_dram_flop_per_byte * dram, rel=1e-9)
            assert row.pct_of_roof == pytest.approx(100 * row.dram_bytes / row.duration_s / dram, rel=1e-9)
            assert row.pct_of_roof == pytest.approx(row.pct_dram_peak, rel=1e-9)
            # The hand roofline (expected work) agrees with the counter one up to the L2 write trap.
            hand_pct = 100 * hand_bw / dram
            assert row.pct_of_roof == pytest.approx(hand_pct, rel=0.02 + l2_size / hand_bytes)
            # ncu's own DRAM throughput (per-launch clock) agrees with ours (the report's mean clock).
            assert row.pct_dram_peak == pytest.approx(row.ncu_sol_dram_pct, rel=0.02)
    assert checked, "no large-size launch in the roofline recordings"


# ----------------------------------------------------------------- classification, synthetic


def _synthetic(**columns: list[float]) -> pd.DataFrame:
    base = {
        "op": ["x"],
        "dtype": ["float16"],
        "duration_s": [1e-3],
        "dram_bytes": [1e9],
        "l2_bytes": [2e9],
        "l1_bytes": [4e9],
        **{f"flop_{k}": [0.0] for k in ("fp32", "fp16", "tensor_bf16", "tensor_fp16", "tensor_tf32")},
    }
    df = pd.DataFrame({**base, **columns})
    kinds = ["flop_fp32", "flop_fp16", "flop_tensor_bf16", "flop_tensor_fp16", "flop_tensor_tf32"]
    df["flop"] = df[kinds].sum(axis=1)
    return df


CEILINGS = pd.DataFrame(
    [
        ("dram", "memory", 4e12, "byte/s", "counters", "dram", "", ""),
        ("l2", "memory", 1.2e13, "byte/s", "counters", "l2", "", ""),
        ("l1", "memory", 1e14, "byte/s", "counters", "l1", "", ""),
        ("fp32", "compute", 6e13, "FLOP/s", "counters", "fp32", "", ""),
        ("fp16", "compute", 1.2e14, "FLOP/s", "counters", "fp16", "", ""),
        ("tensor_bf16", "compute", 1e15, "FLOP/s", "counters", "tensor_bf16", "", ""),
        ("copy", "memory", 3e12, "byte/s", "measured", "dram", "", ""),
    ],
    columns=list(CEILING_COLUMNS),
)


def test_compute_bound_kernel() -> None:
    df = RL.classify(_synthetic(flop_tensor_bf16=[5e11]), CEILINGS)
    row = df.iloc[0]
    assert row["ai_dram_flop_per_byte"] == 500 and row["knee_flop_per_byte"] == pytest.approx(250)
    assert row["bound"] == "compute" and row["roof_flop_per_s"] == 1e15
    assert row["pct_of_roof"] == pytest.approx(100 * 5e14 / 1e15)


def test_mixed_kinds_use_each_kinds_peak_in_turn() -> None:
    row = RL.classify(_synthetic(flop_fp32=[6e10], flop_fp16=[1.2e11]), CEILINGS).iloc[0]
    # 6e10 / 6e13 + 1.2e11 / 1.2e14 = 2 ms of compute -> 1.8e11 FLOP / 2e-3 s = 9e13 FLOP/s
    assert row["compute_peak_flop_per_s"] == pytest.approx(9e13)
    assert row["bound"] == "compute" and row["pct_of_roof"] == pytest.approx(200.0)  # measured 1 ms < roof time


def test_kernel_without_flop_gets_its_bandwidth_fraction() -> None:
    row = RL.classify(_synthetic(), CEILINGS).iloc[0]
    assert row["bound"] == "memory" and row["ai_dram_flop_per_byte"] == 0
    assert row["pct_of_roof"] == pytest.approx(100 * (1e9 / 1e-3) / 4e12)
    assert RL.classify(_synthetic(), CEILINGS, memory="copy").iloc[0]["pct_of_roof"] == pytest.approx(100 / 3)
    l2 = RL.classify(_synthetic(), CEILINGS, memory="l2").iloc[0]
    assert l2["pct_of_roof"] == pytest.approx(100 * (2e9 / 1e-3) / 1.2e13)


def test_classify_rejects_a_compute_ceiling_as_memory() -> None:
    with pytest.raises(ValueError, match="compute ceiling"):
        RL.classify(_synthetic(), CEILINGS, memory="fp32")
    with pytest.raises(ValueError, match="no ceiling 'hbm'"):
        RL.classify(_synthetic(), CEILINGS, memory="hbm")


def test_missing_counters_leave_classification_empty() -> None:
    df = _synthetic()
    df[["dram_bytes", "flop"]] = np.nan
    row = RL.classify(df, CEILINGS).iloc[0]
    assert pd.isna(row["bound"]) and math.isnan(row["pct_of_roof"])


def test_expected_work_unknown_op_is_nan() -> None:
    df = RL.expected_work(_synthetic())
    assert df[["expected_bytes", "expected_flop", "bytes_vs_expected_pct"]].isna().all(axis=None)
    assert df.loc[0, "bytes_note"] == "" and df.loc[0, "flop_note"] == ""
