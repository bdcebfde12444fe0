"""Plots render with Agg and hold the expected points and ceilings (found by artist gid)."""

from __future__ import annotations

import io
import os
from functools import cache
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import RECORDINGS as ALL_RECORDINGS
from IPython.display import Markdown
from matplotlib.figure import Figure

from oasr.jit.families import FAMILIES
from profiling import compare
from profiling.analysis import plots as P
from profiling.analysis import roofline as RL
from profiling.nsight import packing
from profiling.nsight.presets import counter_ceilings
from profiling.nsight.reader import ReportTables, read_report
from profiling.workbench.notebook import Workbench

MEASURED = {"copy_bytes_per_s": 4.3e12, "cublas_flop_per_s": 7.9e14, "provenance": {"gpu": "NVIDIA H200"}}


RECORDINGS = ALL_RECORDINGS / "scale"
"""The scale recordings: these tests check counters against scale's hand count."""


@cache
def _roofline_report() -> ReportTables:
    tables = [read_report(p) for p in packing.stored(RECORDINGS)]
    tables = [t for t in tables if t.launches[["l2_bytes", "flop"]].notna().all(axis=None)]
    assert tables, f"no roofline-preset report under {RECORDINGS}"
    return max(tables, key=lambda t: len(t.launches))


@pytest.fixture(scope="module")
def tables() -> ReportTables:
    return _roofline_report()


@pytest.fixture(scope="module")
def ceilings(tables: ReportTables) -> pd.DataFrame:
    return pd.concat([counter_ceilings(tables.device), RL.measured_ceilings(MEASURED)], ignore_index=True)


def _by_gid(fig: Figure) -> dict[str, Any]:
    artists: dict[str, Any] = {}
    for ax in fig.axes:
        for artist in ax.get_children():
            if artist.get_gid():
                assert artist.get_gid() not in artists, f"duplicate gid {artist.get_gid()}"
                artists[artist.get_gid()] = artist
    return artists


def _renders(fig: Figure) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n" and len(buffer.getvalue()) > 10_000


def _value(ceilings: pd.DataFrame, name: str) -> float:
    return float(ceilings.loc[ceilings["name"] == name, "value"].iloc[0])


def test_roofline_plot_points_and_ceilings(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    launches = RL.analyze(tables)
    fig = P.roofline_plot(launches, ceilings)
    _renders(fig)
    drawn = _by_gid(fig)
    for backend in ("oasr", "torch"):
        rows = launches[launches["backend"] == backend]
        expected = np.column_stack([rows["flop"] / rows["dram_bytes"], rows["flop"] / rows["duration_s"]])
        np.testing.assert_allclose(drawn[f"points:{backend}"].get_offsets(), expected, rtol=1e-12)
        np.testing.assert_allclose(expected[:, 0], rows["ai_dram_flop_per_byte"], rtol=1e-12)
    oasr, torch = drawn["points:oasr"], drawn["points:torch"]
    assert not np.allclose(oasr.get_facecolor(), torch.get_facecolor())  # distinct colours
    assert oasr.get_paths()[0] != torch.get_paths()[0]  # and markers
    # Ceilings: every memory roof (counters and measured), fp32, fp16 (scale's conversions), no tensor.
    assert {g for g in drawn if g.startswith("ceiling:")} == {
        f"ceiling:{n}" for n in ("dram", "l2", "l1", "copy", "fp32", "fp16")
    }
    x, y = drawn["ceiling:dram"].get_data()
    np.testing.assert_allclose(np.asarray(y) / np.asarray(x), _value(ceilings, "dram"), rtol=1e-12)
    np.testing.assert_allclose(drawn["ceiling:fp32"].get_ydata(), _value(ceilings, "fp32"))
    assert drawn["ceiling:copy"].get_linestyle() == "--"
    knee_x, knee_y = drawn["knee:dram:fp32"].get_data()
    assert knee_x[0] == pytest.approx(_value(ceilings, "fp32") / _value(ceilings, "dram"))
    assert knee_y[0] == _value(ceilings, "fp32")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("oasr") for label in labels) and any(label.startswith("torch") for label in labels)
    assert any("DRAM" in label and "TB/s" in label for label in labels)
    assert any("FP32" in label and "TFLOP/s" in label for label in labels)
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_yscale() == "log"


def test_roofline_plot_options(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    launches = tables.launches
    fig = P.roofline_plot(launches, ceilings, level="l1", flop="flop_fp32", compute=["fp32", "tensor_bf16"])
    drawn = _by_gid(fig)
    rows = launches[launches["backend"] == "oasr"]
    np.testing.assert_allclose(drawn["points:oasr"].get_offsets()[:, 0], rows["flop_fp32"] / rows["l1_bytes"])
    assert "ceiling:tensor_bf16" in drawn and "ceiling:fp16" not in drawn
    assert "knee:l1:tensor_bf16" in drawn
    _renders(fig)


def test_launches_without_counters_are_left_out(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    launches = tables.launches.copy()
    launches.loc[launches["backend"] == "torch", ["flop", "dram_bytes"]] = np.nan  # e.g. a timing report
    launches.loc[0, "backend"] = pd.NA  # a launch outside the oasr ranges
    drawn = _by_gid(P.roofline_plot(launches, ceilings))
    assert "points:torch" not in drawn and len(drawn["points:other"].get_offsets()) == 1


def test_hierarchical_roofline(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    launches = tables.launches
    row = launches.loc[launches[launches["backend"] == "oasr"]["dram_bytes"].idxmax()]
    fig = P.hierarchical_roofline(row, ceilings)
    _renders(fig)
    drawn = _by_gid(fig)
    for level in ("dram", "l2", "l1"):
        x, y = drawn[f"point:{level}"].get_data()
        assert x[0] == pytest.approx(row["flop"] / row[f"{level}_bytes"])
        assert y[0] == pytest.approx(row["flop"] / row["duration_s"])
        assert f"ceiling:{level}" in drawn
    assert "ceiling:copy" not in drawn  # counter roofs of the three levels only
    assert "scale:oasr" in fig.axes[0].get_title()


def test_bandwidth_vs_size(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    launches = RL.expected_work(tables.launches)
    fig = P.rate_vs_size(launches, copy_ceiling=4.3e12, dram_ceiling=_value(ceilings, "dram"))
    _renders(fig)
    drawn = _by_gid(fig)
    sizes = sorted(launches["expected_bytes"].unique())
    for (backend, dtype_), rows in launches.groupby(["backend", "dtype"]):
        rows = rows.sort_values("expected_bytes")
        x, y = drawn[f"series:{backend}:{dtype_}"].get_data()
        np.testing.assert_allclose(x, [sizes.index(v) for v in rows["expected_bytes"]])  # one position per config
        np.testing.assert_allclose(y, rows["expected_bytes"] / rows["duration_s"])
    np.testing.assert_allclose(drawn["ceiling:copy"].get_ydata(), 4.3e12)
    np.testing.assert_allclose(drawn["ceiling:dram"].get_ydata(), _value(ceilings, "dram"))
    assert drawn["series:oasr:float16"].get_color() != drawn["series:torch:float16"].get_color()


def test_bandwidth_vs_size_reads_timing_tables() -> None:
    table = pd.DataFrame(
        {
            "op": ["scale"] * 4,
            "backend": ["oasr", "torch"] * 2,
            "dtype": ["bfloat16"] * 4,
            "bytes": [8192, 8192, 2**30, 2**30],
            "bandwidth_bytes_per_s": [1e9, 2e9, 4.1e12, 4.2e12],
        }
    )
    drawn = _by_gid(P.rate_vs_size(table))
    np.testing.assert_allclose(drawn["series:torch:bfloat16"].get_data()[1], [2e9, 4.2e12])
    assert "ceiling:copy" not in drawn
    with pytest.raises(ValueError, match="none of the columns"):
        P.rate_vs_size(table.drop(columns=["bandwidth_bytes_per_s"]))


def test_no_pyplot_figures_and_existing_axes(tables: ReportTables, ceilings: pd.DataFrame) -> None:
    plt.close("all")
    P.roofline_plot(tables.launches, ceilings)
    assert plt.get_fignums() == []  # figures are not registered with pyplot
    fig = Figure()
    ax = fig.add_subplot()
    assert P.rate_vs_size(tables.launches, ax=ax) is fig


def test_roofline_numbers_do_not_collide_and_the_key_names_every_config(
    tables: ReportTables, ceilings: pd.DataFrame
) -> None:
    launches = RL.analyze(tables)
    fig = P.roofline_plot(launches, ceilings)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    drawn = _by_gid(fig)
    numbers = [a for g, a in drawn.items() if g.startswith("label:")]
    assert numbers, "some points are numbered"
    boxes = [a.get_window_extent(renderer) for a in numbers]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), "two point numbers overlap"
    key = drawn["key:configs"].get_text().splitlines()[1:]
    sizes = launches.drop_duplicates("config").sort_values("expected_bytes")["config"].tolist()
    assert [line.split()[1] for line in key] == sizes  # numbered smallest first, every config listed
    assert {a.get_text() for a in numbers} <= {str(i + 1) for i in range(len(sizes))}
    axes_box = fig.axes[0].get_window_extent(renderer)
    assert fig.axes[0].get_legend().get_window_extent(renderer).x0 >= axes_box.x1  # legend outside the data


def _timing_table(ops: tuple[str, ...]) -> pd.DataFrame:
    rows = [
        {"op": op, "backend": b, "dtype": d, "bytes": size, "bandwidth_bytes_per_s": 1e9 * size / 2**20 + k}
        for op in ops
        for k, b in enumerate(("oasr", "torch"))
        for d in ("float32", "float16", "bfloat16")
        for size in (2**20, 2**24, 2**28)
    ]
    return pd.DataFrame(rows)


def test_bandwidth_of_several_ops_one_axes_each_grouped_legend_outside() -> None:
    ops = ("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm")
    fig = P.rate_vs_size(_timing_table(ops), copy_ceiling=4237396824699.987)
    _renders(fig)
    drawn = _by_gid(fig)
    assert len(fig.axes) == 4 and [a.get_title() for a in fig.axes] == list(ops)
    assert len([g for g in drawn if g.startswith("series:")]) == 24
    f16, bf16, f32 = (drawn[f"series:rms_norm:oasr:{d}"] for d in ("float16", "bfloat16", "float32"))
    assert len({str(f16.get_linestyle()), str(bf16.get_linestyle()), str(f32.get_linestyle())}) == 3
    assert len({f16.get_marker(), bf16.get_marker(), f32.get_marker()}) == 3
    assert f16.get_color() == bf16.get_color() != drawn["series:rms_norm:torch:float16"].get_color()  # colour: backend
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert "oasr" in texts and "float16" in texts and "bfloat16" in texts and len(texts) <= 10  # grouped, not 24
    assert "measured copy: 4.24 TB/s" in texts
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    box = legend.get_window_extent(renderer)
    assert all(not box.overlaps(a.get_window_extent(renderer)) for a in fig.axes)  # outside every axes


def test_one_rounding_for_rates() -> None:
    assert P.format_rate(4237396824699.987, "B/s") == "4.24 TB/s"
    assert P.format_rate(4229118791861.813, "B/s") == "4.23 TB/s"
    assert P.format_rate(6.6e14, "FLOP/s") == "660.00 TFLOP/s" and P.format_rate(float("nan"), "B/s") == "? B/s"


# ----------------------------------------------------------------- every figure, read by people


def _texts(fig: Figure) -> list[Any]:
    """Every text drawn on ``fig`` that holds characters (titles, labels, legends, annotations, and the tick
    labels of the ticks within the axes' limits: matplotlib keeps, but does not draw, the others)."""
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels(which="both")}
    drawn = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if lo <= tick.get_loc() <= hi:
                    drawn += [label for label in (tick.label1, tick.label2) if label.get_visible()]
    others = [t for t in fig.findobj(matplotlib.text.Text) if id(t) not in ticks and t.get_visible()]
    return [t for t in [*others, *drawn] if t.get_text().strip()]


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """The pairs of texts on ``fig`` whose boxes overlap, as matplotlib's renderer places them."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer).shrunk(0.98, 0.9)) for t in _texts(fig)]
    return [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1 :] if box.overlaps(other)]


def test_overlap_check_finds_two_texts_on_one_spot() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, "knee 201 FLOP/B")
    assert overlapping_texts(fig) == []
    ax.text(0.52, 0.5, "7")
    assert overlapping_texts(fig) == [("knee 201 FLOP/B", "7")]


@cache
def _family_figures() -> tuple[tuple[str, Figure], ...]:
    """Each family's notebook figures on the committed recordings (replayed, also on a GPU machine): the rate
    plot, and per op the roofline and the hierarchical roofline."""
    previous = os.environ.get("OASR_WORKBENCH_MODE")
    os.environ["OASR_WORKBENCH_MODE"] = "replay"
    try:
        figures = []
        for family in FAMILIES:
            bench = Workbench(family)
            figures.append((f"{family.name} rate", bench.bandwidth_plot(bench.timing())))
            for op in bench.op_names:
                result = bench.profile(op)
                figures.append((f"{op} roofline", bench.roofline_plot(result)))
                figures.append((f"{op} hierarchical", bench.hierarchical_plot(result)))
    finally:
        if previous is None:
            os.environ.pop("OASR_WORKBENCH_MODE")
        else:
            os.environ["OASR_WORKBENCH_MODE"] = previous
    return tuple(figures)


def test_no_text_overlaps_another_on_any_notebook_figure() -> None:
    """Issue 58: point numbers over knee labels (four families' rooflines before), ticks over ticks; every
    figure a notebook shows is checked."""
    found = {name: overlapping_texts(fig) for name, fig in _family_figures()}
    assert not {name: pairs for name, pairs in found.items() if pairs}


def test_figures_read_in_the_families_metric_and_units() -> None:
    figures = dict(_family_figures())
    gemm, scale = figures["gemm rate"], figures["scale rate"]
    assert gemm.axes[0].get_ylabel().startswith("FLOP rate") and "ceiling:cublas" in _by_gid(gemm)
    assert scale.axes[0].get_ylabel().startswith("bandwidth: bytes the op must move")
    for fig in figures.values():
        labels = [t.get_text() for t in _texts(fig)]
        assert not [label for label in labels if "e+" in label or "_bytes_per_s" in label or "_per_s)" in label]
    torch = _by_gid(figures["gemm roofline"])["points:torch"]
    assert "kernels each, summed" in torch.get_label() and len(torch.get_offsets()) == 7  # one point per config


def test_compare_plot_along_the_recorded_sweep_of_gemm() -> None:
    """The committed H200 samples of gemm at 51be08a (the working tree against its commit, two configs): each
    config's point is its ratio, its bar the bootstrap interval, its band 1 +- its threshold; the slower config and
    the same one get their own colour (the tree's kernel is faster at m=16000,n=256,k=2048)."""
    states = [s for s in compare.recorded_states("h200", "gemm") if s["commit"] == "51be08a"]
    assert len(states) == 2, states
    base, head = (next(s for s in states if (s["state"] == compare.WORKTREE) == tree) for tree in (False, True))
    loaded = {s["revision"]: compare.load_samples("h200", "gemm", s["hash"]) for s in (base, head)}
    samples = {key: {name: by_key[key] for name, by_key in loaded.items()} for key in loaded[base["revision"]]}
    table = compare.compare_tables("gemm", base["revision"], head["revision"], samples)
    fig = P.compare_ratios(table, title="gemm")
    fig.canvas.draw()
    drawn = _by_gid(fig)
    for row in table.itertuples():
        band = drawn[f"band:{row.config}"]
        assert band.get_y() == pytest.approx(1 / (1 + row.threshold))
        assert band.get_y() + band.get_height() == pytest.approx(1 + row.threshold)
        line = drawn[f"ratio:{row.verdict}"]
        assert row.ratio in list(line.get_ydata())
    assert set(table["verdict"]) == {"faster", "same"}  # what the H200 samples say
    assert overlapping_texts(fig) == []
    assert set(P.VERDICT_COLOR) == set(compare.VERDICTS)  # every verdict has its colour
    with pytest.raises(ValueError, match=r"table: .* it lacks verdict"):
        P.compare_ratios(table.drop(columns="verdict"))


def test_the_workbench_compare_plot_passes_a_note_by() -> None:
    assert Workbench(FAMILIES[0]).compare_plot(Markdown("*No comparison*")) is None
