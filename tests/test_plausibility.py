"""Guards against impossible numbers (profiling.nsight.plausibility) on the committed H200 recordings and on a
launch changed inside the test: a figure past a counter ceiling, or past 95% of a measured one, is flagged."""

from __future__ import annotations

import warnings
from functools import cache

import pandas as pd
import pytest
from conftest import RECORDINGS

from oasr.jit.families import FAMILIES
from profiling.analysis import roofline
from profiling.nsight import packing, plausibility
from profiling.nsight.reader import ReportTables, read_report
from profiling.workbench.display import to_html
from profiling.workbench.notebook import Workbench
from profiling.workbench.tables import load_table

OPS = ("scale", "layer_norm", "group_gemm")
"""A streaming op at copy speed, a norm, and a GEMM whose torch backend launches 64 cuBLAS kernels."""


@cache
def _reports(op: str) -> tuple[ReportTables, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(read_report(path) for path in packing.stored(RECORDINGS / op))


@pytest.mark.parametrize("op", OPS)
def test_no_recorded_launch_passes_a_counter_ceiling(op: str) -> None:
    """What the H200 counters say: no figure above its peak at the recorded clock (the reader's flags, drawn
    against the counter ceilings alone, are all empty)."""
    for tables in _reports(op):
        assert (tables.launches["flagged"] == "").all(), tables.launches["flagged"].unique()


def test_the_recordings_flagged_against_the_measured_ceilings() -> None:
    """Against reports/h200/ceilings.json (copy 4.24 TB/s, cuBLAS 681 TFLOP/s), as the H200 recorded them:
    scale's three largest sizes stream at 95-100% of the copy; 99 of torch's 200 group_gemm kernels (cuBLAS alone
    under ncu) pass 95% of the cuBLAS rate measured sustained; no layer_norm launch is flagged (its largest: 92% of
    the copy)."""
    flagged = {}
    for op in OPS:
        launches = pd.concat([roofline.analyze(t).assign(report=t.device["report"]) for t in _reports(op)])
        flagged[op] = launches[launches["flagged"] != ""]
        assert len(flagged[op]) < len(launches) / 2, op  # mostly unflagged
    scale = flagged["scale"]
    assert set(scale["n"]) == {33554432, 134217728, 536870912}
    torch_gemms = flagged["group_gemm"].query("backend == 'torch'")
    assert len(torch_gemms) == 99 and set(torch_gemms["flagged"]) == {"tensor FLOP/s > 95% of cuBLAS"}
    assert flagged["layer_norm"].empty


def _planted(factor: float) -> pd.DataFrame:
    """layer_norm's largest oasr launch as recorded, its duration divided by ``factor`` (``factor`` x the bytes
    per second, as a persisting-L2 window gives a kernel that reads what the L2 still holds)."""
    tables = max(_reports("layer_norm"), key=lambda t: len(t.launches))
    launches = roofline.analyze(tables)
    row = launches[launches["backend"] == "oasr"].sort_values("dram_bytes").tail(1).copy()
    row["duration_s"] /= factor
    return row


def test_a_launch_at_four_times_hbm_is_flagged_with_the_persisting_l2_cause() -> None:
    row = _planted(4.0)
    limits = roofline.ceilings(_reports("layer_norm")[0].device)
    flagged = plausibility.flag(row, limits).iloc[0]
    assert "effective bandwidth > HBM peak" in flagged["flagged"]
    assert "DRAM bandwidth > peak" in flagged["flagged"]
    assert "persisting-L2 window" in flagged["flag_cause"] and "llm.c #851" in flagged["flag_cause"]


def test_flags_reach_the_table_and_its_html_escaped() -> None:
    row = _planted(4.0).assign(kernel="<script>alert(1)</script>")
    limits = roofline.ceilings(_reports("layer_norm")[0].device)
    flagged = plausibility.flag(row, limits)
    shown = flagged[["kernel", "duration_s", "flagged"]].copy()
    shown.attrs["notes"] = plausibility.notes(flagged)
    page = to_html(shown)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "effective bandwidth &gt; HBM peak" in page and "llm.c #851" in page


def test_a_rule_without_its_ceiling_or_figure_does_not_fire() -> None:
    row = _planted(4.0)
    counters = roofline.ceilings(_reports("layer_norm")[0].device, measured=False)
    compute_only = counters[counters["kind"] == "compute"]
    flagged = plausibility.flag(row.drop(columns="expected_bytes"), compute_only).iloc[0]
    assert flagged["flagged"] == ""  # 4x HBM, but no memory ceiling to hold it against


def test_bad_arguments_name_themselves() -> None:
    row = _planted(1.0)
    with pytest.raises(TypeError, match="launches must be a DataFrame"):
        plausibility.flag(row.to_dict(), pd.DataFrame(columns=["name", "value"]))
    with pytest.raises(ValueError, match="ceilings needs the columns name and value"):
        plausibility.flag(row, pd.DataFrame({"value": [1.0]}))


def test_timing_rows_past_95_percent_of_their_copy_are_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed H200 timing tables: 16 of scale's 60 rows (its largest sizes, which are copies) and 6 of the
    activations' 72 pass 95% of the copy timed with them; the flag is exactly ``pct_of_copy > 95``."""
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    for family, count in ((FAMILIES[0], 16), (FAMILIES[1], 6)):
        table = Workbench(family).timing()
        assert ((table["flagged"] != "") == (table["pct_of_copy"] > 95)).all()
        assert (table["flagged"] != "").sum() == count and "flag_cause" not in table
        assert any(note.startswith("flagged, bandwidth > 95% of copy") for note in table.attrs["notes"])
    row = load_table("h200", "layer_norm", "timing")[0].head(1)
    planted = row.assign(seconds=row["seconds"] / 4, bandwidth_bytes_per_s=row["bandwidth_bytes_per_s"] * 4)
    assert plausibility.flag_timing(planted)["flagged"].iloc[0] == "bandwidth > 95% of copy"
    assert plausibility.flag_timing(row)["flagged"].iloc[0] == ""
