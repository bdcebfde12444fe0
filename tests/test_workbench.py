"""The workbench on a machine without a GPU: everything comes from the committed H200
recordings and says so. Runs against a copy of reports/ so the repository is untouched."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from conftest import RECORDINGS

from oasr.jit.families import BMM, FAMILIES, GEMM, NORM, SCALE
from profiling.harness.ops import ops_of
from profiling.workbench import headline, notebook
from profiling.workbench.notebook import Workbench
from profiling.workbench.pages import page_of
from profiling.workbench.tables import load_table, report_gpu_slug, save_table, workbench_mode

REPORTS = RECORDINGS.parent.parent


@pytest.fixture
def reports(tmp_path, monkeypatch):
    copy = tmp_path / "reports"
    shutil.copytree(REPORTS, copy)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(copy))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    return copy


@pytest.fixture
def bench(reports) -> Workbench:
    return Workbench(SCALE)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_workbench_is_made_from_its_family(reports, family):
    bench = Workbench(family)
    page = page_of(family)
    assert bench.family is family and bench.notebook == page.notebook and bench.title == page.title
    assert bench.ops == ops_of(family) and bench.op_names and all(op.family is family for op in bench.ops)


def test_mode_follows_the_environment(monkeypatch):
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    assert workbench_mode() == "live"
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    assert workbench_mode() == "replay" and report_gpu_slug() == "h200"  # the committed recordings' GPU
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "sideways")
    with pytest.raises(ValueError, match="OASR_WORKBENCH_MODE"):
        workbench_mode()


def test_replay_is_announced_with_provenance(bench):
    assert bench.replayed and bench.gpu_slug == "h200"
    banner = bench.banner().data
    assert "Replayed" in banner and "NVIDIA H200" in banner and "driver" in banner
    environment = bench.environment()["value"]
    assert environment["mode"] == "replay" and environment["target archs"] == "sm_90a"


def test_recorded_correctness_covers_every_dtype_and_passes(bench):
    table = bench.correctness()
    assert set(table["dtype"]) == {"float32", "float16", "bfloat16"}
    assert set(table["backend"]) == {"oasr", "torch"}
    assert table["passed"].all() and (table["max_abs_err"] > 0).any()


def test_recorded_timing_speedups_and_headlines(bench):
    table = bench.timing()
    speedups = bench.speedup_table(table)
    row = speedups.iloc[0]
    assert row["speedup"] == pytest.approx(row["torch_seconds"] / row["oasr_seconds"])  # base units kept
    assert len(bench.headlines) == 3 and all("% of copy bandwidth" in line for line in bench.headlines)
    figure = bench.bandwidth_plot(table)
    assert "replayed" in figure._suptitle.get_text()


def test_a_headline_names_the_ceiling_that_bounds_the_case_and_flags_one_above_it():
    gemm, scale = ops_of(GEMM)[0], ops_of(SCALE)[0]
    rows = pd.DataFrame(
        {
            "backend": ["oasr", "torch", "oasr", "torch"],
            "config": ["m=8000,n=256,k=256", "m=8000,n=256,k=256", "m=24000,n=2048,k=512", "m=24000,n=2048,k=512"],
            "m": [8000, 8000, 24000, 24000], "n": [256, 256, 2048, 2048], "k": [256, 256, 512, 512],
            "flop": [1.0e9, 1.0e9, 5.0e10, 5.0e10],
            "flop_per_s": [2.0e14, 1.6e14, 5.6e14, 5.6e14],
            "seconds": [5e-6, 4e-6, 9e-5, 9.09e-5],
            "bytes": [9e6, 9e6, 7e7, 7e7],
            "pct_of_copy": [5.0, 4.0, 19.0, 19.0],
        }
    )  # fmt: skip
    ceilings = headline.Ceilings(copy_bytes_per_s=4.2e12, cublas_flop_per_s=7.0e14)
    assert headline.op_headline(gemm, "bfloat16", rows, ceilings) == (
        "gemm bfloat16: 560 TFLOP/s at m=24000,n=2048,k=512 (80% of cuBLAS's measured 700 TFLOP/s); "
        "speedup over torch 0.80x to 1.01x"
    )
    above = headline.op_headline(gemm, "bfloat16", rows, headline.Ceilings(4.2e12, 5.5e14))
    assert "(102% of cuBLAS's measured 550 TFLOP/s: above that measured rate)" in above
    memory = headline.op_headline(scale, "float16", rows.assign(n=[9e6 / 4] * 4, pct_of_copy=101.0), ceilings)
    assert memory.startswith("scale float16: 101% of copy bandwidth at 66.8 MiB (above the measured copy bandwidth)")
    # bmm's largest case moves more bytes at the copy bandwidth than its FLOP take at cuBLAS's rate: memory-bound
    assert all("% of copy bandwidth at 206 MiB" in line for line in headline.headlines(ops_of(BMM), "h200"))


def test_live_and_replayed_headlines_come_from_the_recording_alike(reports, monkeypatch):
    """The live path stores its timing tables and makes its headlines from them, as a replay of those tables does:
    the committed index and a replayed one agree."""
    recorded = {op.name: load_table("h200", op.name, "timing") for op in ops_of(GEMM)}
    cublas = json.loads((reports / "h200" / "ceilings.json").read_text())["cublas_flop_per_s"]
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setattr(notebook, "measure", lambda op, *a, **k: recorded[op.name][0])
    monkeypatch.setattr(notebook.timing, "measure_cublas_tflops", lambda: cublas / 1e12)
    live = Workbench(GEMM)
    live.timing()
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    replayed = Workbench(GEMM)
    replayed.timing()
    assert live.headlines == headline.headlines(live.ops, live.gpu_slug) == replayed.headlines
    assert replayed.headlines[0].startswith("gemm float16: 428 TFLOP/s at m=16000,n=2048,k=256 (63% of cuBLAS's")


def test_replayed_profile_roofline_and_advice(bench):
    result = bench.profile("scale")
    assert result.replayed and result.source == "recording"
    launches = bench.launch_table(result)
    assert {"oasr", "torch"} == set(launches["backend"])
    assert {"expected_bytes", "bytes_vs_expected_pct", "pct_of_roof"} <= set(launches.columns)
    figure = bench.roofline_plot(result)
    assert "Replayed" in figure.axes[0].get_title()
    assert bench.hierarchical_plot(result).axes
    advice = bench.advice(result).data
    assert set(advice["backend"]) == {"oasr", "torch"} and advice["message"].str.len().min() > 20


def test_summary_for_the_index(bench, reports):
    bench.timing()
    path = bench.write_summary()
    summary = json.loads(path.read_text())
    assert path == reports / "replay" / "h200" / "01_scale.summary.json"
    assert summary["mode"] == "replay" and summary["provenance"]["gpu"] == "NVIDIA H200"
    assert summary["headline"] == bench.headlines


def test_tables_round_trip_with_provenance(reports):
    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, 0.25]})
    save_table(frame, "testgpu", "scale", "timing", {"gpu": "Test GPU"})
    loaded, meta = load_table("testgpu", "scale", "timing")
    pd.testing.assert_frame_equal(loaded, frame)
    assert meta == {"gpu": "Test GPU"}
    with pytest.raises(FileNotFoundError, match="run this notebook on a GPU machine"):
        load_table("testgpu", "scale", "correctness")


@pytest.mark.slow  # builds the norm module in a private cache: the full tier
def test_build_builds_the_familys_one_module(reports, tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    norms = Workbench(NORM)
    assert len(norms.ops) == 4  # four ops, one module
    table = norms.build()
    assert list(table["module"]) == ["norm"] and table["key"].iloc[0] == NORM.jit_spec().key


def test_kernel_source_shows_the_family_headers(bench):
    text = bench.kernel_source().data
    headers = page_of(SCALE).headers
    assert "oasr/scale.cuh" in headers and text.count("```cpp") == len(headers)
    assert all(f"`include/{header}`" in text for header in headers)
    assert "ScaleOp" in text and "MapKernel" in text


@pytest.mark.slow  # builds the scale module in a private cache: the full tier
def test_build_reports_cache_state(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    first, second = bench.build(), bench.build()
    assert first["cache"].iloc[0].startswith("miss") and second["cache"].iloc[0] == "hit"
    assert "-gencode=arch=compute_90a" in second["nvcc flags"].iloc[0]
