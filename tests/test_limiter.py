"""What limits a kernel (profiling.analysis.limiter): pinned on the committed H200 recordings, and
each branch of the rule on hand-made rows."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from profiling.analysis import limiter
from profiling.nsight.sweep import profile_sweep


def _replayed(op: str, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = profile_sweep(op, live=False, **kwargs)
    return result, limiter.limiters(result.launches)


def _row(table: pd.DataFrame, backend: str, config: str) -> pd.Series:
    rows = table[(table["backend"] == backend) & (table["config"] == config)]
    assert len(rows) == 1, (backend, config, table[["backend", "config"]])
    return rows.iloc[0]


def test_scale_at_a_gibibyte_is_dram_bound() -> None:
    _, table = _replayed("scale")
    row = _row(table, "oasr", "n=536870912")
    assert row["limiter"] == "DRAM" and row["figure"] > 80
    assert row["sentence"].startswith("DRAM-bound: DRAM at 88% of its peak (L2 43%")


def test_small_scale_is_launch_bound() -> None:
    _, table = _replayed("scale")
    row = _row(table, "oasr", "n=2048")
    assert row["limiter"] == "launch" and row["figure"] < limiter.LAUNCH_S
    assert "no unit above 0% of its peak" in row["sentence"]


def test_norms_dram_bound_when_large_latency_bound_when_small() -> None:
    # the counters: rms_norm at 16x1500x1024 moves DRAM at 63% of its peak (L2 40%);
    # at 64x250x512 (10 us) DRAM is at 35% and occupancy 47%: nothing saturated, warps wait
    _, table = _replayed("rms_norm")
    large = _row(table, "oasr", "b=16,c=1024,t=1500")
    assert large["limiter"] == "DRAM" and large["figure"] == pytest.approx(63.0, abs=1)
    small = _row(table, "oasr", "b=64,c=512,t=250")
    assert small["limiter"] == "latency/occupancy"
    assert "no unit above 35% of its peak (DRAM); achieved occupancy 47%" in small["sentence"]


def test_large_gemm_is_tensor_pipe_bound_against_the_dense_peak() -> None:
    _, table = _replayed("gemm")
    # the 1947458 recording (fp16 bias + SiLU): 28.3 us at 62% and DRAM 51%, where 51be08a's took 29.7 at 59% and 49%
    row = _row(table, "oasr", "k=2048,m=16000,n=256")
    assert row["limiter"] == "tensor-pipe"
    assert row["sentence"].startswith("tensor-pipe-bound: tensor pipe at 62% of its dense peak (DRAM 51%")


def test_advice_sits_beside_each_sentence() -> None:
    result, table = _replayed("gemm")
    both = limiter.with_advice(table, result.advice)
    assert len(both) == len(table) and "ncu_advice" in both
    assert (both["ncu_advice"] != "").any() and both["ncu_advice"].str.contains("Small Grid").any()


BASE = {"duration_s": 20e-6, "pct_dram_peak": 10.0, "pct_l2_peak": 12.0, "pct_l1_peak": 5.0, "pct_fp32_peak": 3.0,
        "grid_size": 1000, "achieved_occupancy_pct": 30.0, "theoretical_occupancy_pct": 50.0}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "kind", "text"),
    [
        ({"pct_l2_peak": 71.0}, "L2", "L2-bound: L2 at 71% of its peak (DRAM 10%, L1/shared 5%)"),
        ({"pct_l1_peak": 55.0}, "L1/shared", "L1/shared-bound: L1/shared at 55%"),
        ({"pct_fp16_peak": 80.0}, "FMA", "FMA-bound: FMA pipe at 80%"),
        ({"issue_active_pct": 92.0}, "issue", "issue-bound: issue slots at 92%"),
        (
            {"ncu_sol_sm_pct": 75.0},
            "SM-pipe",
            "SM-pipe-bound: ncu's SM throughput at 75% of peak while no unit above 12%",
        ),
        ({"duration_s": 2e-6}, "launch", "launch-bound: 2.0 µs, a grid of 1000 blocks"),
        ({}, "latency/occupancy", "achieved occupancy 30% of a theoretical 50%"),
    ],
)
def test_each_branch(change: dict, kind: str, text: str) -> None:
    verdict = limiter.limit({**BASE, **change})
    assert verdict.kind == kind and text in verdict.sentence


def test_stall_shares_name_the_largest_reason() -> None:
    lines = pd.DataFrame(
        {"launch": [0, 0], "samples": [80.0, 20.0], "stall_gmma": [22.0, 0.0], "stall_wait": [5.0, 3.0],
         "stall_selected": [40.0, 0.0]}
    )  # fmt: skip
    shares = limiter.stall_shares(lines)
    assert list(shares) == ["gmma", "wait"] and shares["gmma"] == pytest.approx(22.0)
    verdict = limiter.limit({**BASE, "pct_tensor_bf16_peak": 71.0}, shares)
    assert verdict.sentence == (
        "tensor-pipe-bound: tensor pipe at 71% of its dense peak (L2 12%, DRAM 10%); "
        "22% of warp samples stalled on gmma"
    )
    table = limiter.limiters(pd.DataFrame([{**BASE, "launch": 0, "pct_tensor_bf16_peak": 71.0}]), lines)
    assert table.loc[0, "sentence"].endswith("stalled on gmma")
