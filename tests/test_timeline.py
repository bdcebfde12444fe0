"""The kernel timeline of a traced region (profiling.analysis.timeline): kernel events read from a Chrome trace,
idle gaps from merged intervals, the plot, and the no-kernels message of a trace taken on a CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from test_plots import _by_gid, overlapping_texts

from oasr.jit.families import FAMILIES
from profiling.analysis import plots, timeline
from profiling.harness.timing import NoGPUError
from profiling.workbench.notebook import Workbench

T0 = 1_700_000_000_000.0
"""Chrome traces count microseconds from an arbitrary origin."""


def _kernel(name: str, stream: int, start_us: float, dur_us: float) -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": T0 + start_us, "dur": dur_us,
        "args": {"device": 0, "stream": stream, "correlation": int(start_us)},
    }  # fmt: skip


def _trace(region_us: float | None = 40.0) -> dict:
    """Stream 7: a at 0-10 and c at 25-30 µs; stream 9: b at 8-20 (overlapping a), d at 12-14 (inside b).
    Busy 0-20 and 25-30: 25 µs of a 30 µs span, one 5 µs gap; the CPU range lasts ``region_us``."""
    events = [
        _kernel("c", 7, 25, 5), _kernel("a", 7, 0, 10), _kernel("b", 9, 8, 12), _kernel("d", 9, 12, 2),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": T0 - 5, "dur": 3},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": T0 + 21, "dur": 2},
    ]  # fmt: skip
    if region_us is not None:
        events.append({"ph": "X", "cat": "user_annotation", "name": timeline.REGION, "ts": T0 - 6, "dur": region_us})
    return {"schemaVersion": 1, "traceEvents": events}


def test_kernels_and_gaps_of_overlapping_streams() -> None:
    traced = timeline.summarize(_trace())
    assert list(traced.kernels["name"]) == ["a", "b", "d", "c"] and list(traced.kernels["stream"]) == [7, 9, 9, 7]
    assert traced.kernels["start_s"].iloc[0] == 0 and traced.span_s == pytest.approx(30e-6)
    assert traced.gaps.to_dict("list") == {"start_s": [pytest.approx(20e-6)], "duration_s": [pytest.approx(5e-6)]}
    assert traced.busy_s == pytest.approx(25e-6) and traced.gap_s >= 0  # overlaps merged, never negative
    assert traced.region_s == pytest.approx(40e-6) and traced.gap_share == pytest.approx(5 / 40)
    row = traced.summary().iloc[0]
    assert row["kernels"] == 4 and row["streams"] == 2 and row["kernel_sum_seconds"] == pytest.approx(29e-6)
    assert row["gap_pct"] == pytest.approx(12.5)


def test_without_a_range_or_with_one_shorter_than_the_kernels_the_span_is_the_region() -> None:
    assert timeline.summarize(_trace(None)).region_s == pytest.approx(30e-6)
    assert timeline.summarize(_trace(10.0)).region_s == pytest.approx(30e-6)  # ended before its kernels did


def test_back_to_back_kernels_leave_no_gap() -> None:
    trace = {"traceEvents": [_kernel("a", 7, 0, 10), _kernel("b", 7, 10, 10)]}
    traced = timeline.summarize(trace)
    assert traced.gaps.empty and traced.gap_s == 0 and traced.busy_s == pytest.approx(20e-6)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_a_saved_trace_reads_back(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"region{suffix}"
    text = json.dumps(_trace()).encode()
    path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    traced = timeline.summarize(path)
    assert traced.source == str(path) and traced.gap_share == pytest.approx(5 / 40)


def test_a_cpu_trace_holds_no_kernels_and_says_so(tmp_path: Path) -> None:
    """torch.profiler's real export on this CPU: CPU ops and the range, no kernel."""
    x = torch.randn(64, 64)
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=cpu) as profiler, torch.profiler.record_function(timeline.REGION):
        x @ x
    path = tmp_path / "cpu.json"
    profiler.export_chrome_trace(str(path))
    with pytest.raises(timeline.NoKernelsError, match=r"cpu.json holds no kernel events: .* only with CUDA"):
        timeline.summarize(path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_record_without_cuda_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NoGPUError, match=r"^no CUDA GPU: a kernel timeline \(torch.profiler on a CPU records no"):
        timeline.record(lambda: None, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_bad_traces_name_themselves(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="trace must be a trace dict or a path, not int"):
        timeline.summarize(5)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match=r"broken.json is not a Chrome trace \(JSONDecodeError"):
        timeline.summarize(tmp_path / "broken.json")
    with pytest.raises(ValueError, match="a trace dict is not a Chrome trace: it has no 'traceEvents' list"):
        timeline.summarize({"events": []})
    with pytest.raises(TypeError, match="fn must be a zero-argument callable"):
        timeline.record("fn", tmp_path / "t.json")


def test_the_timeline_plot_holds_each_stream_and_the_gaps() -> None:
    fig = plots.timeline_plot(timeline.summarize(_trace()), title="layer")
    fig.canvas.draw()
    drawn = _by_gid(fig)
    assert len(drawn["kernels:7"].get_paths()) == 2 and len(drawn["kernels:9"].get_paths()) == 2
    assert len(drawn["gaps"].get_paths()) == 1
    assert "4 kernels" in fig.axes[0].get_title() and "12% of the region's 40.0 µs" in fig.axes[0].get_title()
    assert overlapping_texts(fig) == []


def test_the_workbench_replays_a_saved_trace_and_names_a_missing_one(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    wb = Workbench(FAMILIES[0])
    assert "No saved trace of `layer`" in wb.timeline(None, "layer").data and wb.timeline_plot("layer") is None
    path = wb.trace_path("layer")
    assert path == tmp_path / "h200" / f"{wb.notebook}.layer.trace.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(json.dumps(_trace()).encode()))
    table = wb.timeline(None, "layer")
    assert table["kernels"].iloc[0] == 4 and "layer.trace.json.gz" in table._repr_html_()
    assert wb.timeline_plot("layer") is not None
    with pytest.raises(ValueError, match="name must be letters, digits"):
        wb.trace_path("../x")


@pytest.mark.gpu
def test_a_traced_eager_region_on_a_gpu(tmp_path: Path) -> None:
    """Three torch kernels with host work between them (written without a GPU: first run on the H200 pending)."""
    x = torch.randn(1024, 1024, device="cuda")

    def region() -> None:
        y = x @ x
        torch.cuda._sleep(1000)  # a kernel that spins: one more, of known length
        (y + 1).sum()

    path = timeline.record(region, tmp_path / "region.json.gz")
    traced = timeline.summarize(path)
    assert len(traced.kernels) >= 3 and traced.gap_s >= 0 and traced.region_s >= traced.span_s > 0
    assert traced.busy_s <= traced.span_s and 0 <= traced.gap_share < 1


def test_the_encoder_notebook_shows_each_layers_saved_trace_or_says_none_is_saved(monkeypatch, tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    from profiling.workbench import model

    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    shown: list[object] = []
    monkeypatch.setattr(model, "display", lambda *items: shown.extend(items))
    wb = model.ModelWorkbench("wenet")
    wb.layer_timeline()
    notes = [item.data for item in shown if hasattr(item, "data") and "No saved trace" in item.data]
    assert len(notes) == 2 and not [item for item in shown if isinstance(item, Figure)]
    path = tmp_path / "h200" / f"{wb.notebook}.conformer_layer_torch.trace.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(json.dumps(_trace()).encode()))
    shown.clear()
    wb.layer_timeline()
    tables = [item for item in shown if hasattr(item, "columns")]
    assert len(tables) == 1 and tables[0]["kernels"].iloc[0] == 4
    assert len([item for item in shown if isinstance(item, Figure)]) == 1
