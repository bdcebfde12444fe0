"""The model page's workbench (profiling/workbench/model.py) on a machine without a GPU: the tables that
benchmarks/encoder.py records, read back with their provenance; the one sentence said where nothing is recorded; the
replayed speed table, breakdown, panel and summary. Every number here is made up in the test (``SYNTHETIC``) and lives
in a temporary reports folder: no encoder figure is measured or committed by these tests."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from matplotlib.figure import Figure

from benchmarks import encoder as bench
from profiling.harness import encoder as harness
from profiling.provenance import collect
from profiling.workbench import model, publish
from profiling.workbench.model import EncoderPanel, ModelWorkbench
from profiling.workbench.pages import CONFORMER_PAGE

BACKENDS = {
    "oasr eager": "events", "oasr graphed()": "events", "torch eager": "events",
    "torch.compile default eager": "events", "oasr graph": "graph", "torch graph": "graph",
    "torch.compile default graph": "graph",
}  # fmt: skip
SYNTHETIC = {backend: 1e-3 * (index + 1) for index, backend in enumerate(BACKENDS)}
"""Made-up seconds per backend (1 ms, 2 ms, ...): the tests' own, not a measurement."""


def speed_rows(config: str, workload: str = "64x2.5s") -> list[dict]:
    chosen = harness.WORKLOADS[workload]
    return [
        {
            "config": config, "workload": chosen.name, "backend": backend, "method": method,
            "batch": len(chosen.frames), "frames": max(chosen.frames), "audio_seconds": chosen.audio_seconds,
            "seconds": SYNTHETIC[backend], "p10_seconds": SYNTHETIC[backend], "p90_seconds": SYNTHETIC[backend],
            "iqr_rel": 0.0, "rtfx": chosen.audio_seconds / SYNTHETIC[backend],
            "speedup_vs_torch_eager": SYNTHETIC["torch eager"] / SYNTHETIC[backend],
            "speedup_vs_torch_graph": SYNTHETIC["torch graph"] / SYNTHETIC[backend],
            "speedup_vs_torch_compile": SYNTHETIC[f"torch.compile default {'graph' if method == 'graph' else 'eager'}"]
            / SYNTHETIC[backend],
        }
        for backend, method in BACKENDS.items()
    ]  # fmt: skip


def breakdown_rows(config: str, workload: str = "64x2.5s") -> pd.DataFrame:
    ops = [("add_layer_norm", 1e-6), ("gemm", 3e-6), ("gemm", 2e-6), ("depthwise_conv1d", 1e-6)]
    table = pd.DataFrame({"op": [op for op, _ in ops], "arguments": "64x62x256", "seconds": [s for _, s in ops]})
    table["share"] = table["seconds"] / table["seconds"].sum()
    return table.assign(config=config, workload=workload, layer_seconds=6e-6)[list(harness.BREAKDOWN_COLUMNS)]


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """An empty reports folder, replaying (the H200's recordings are what replay reads: here, none yet)."""
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    return tmp_path / "reports"


def record(config: str = "wenet", gpu: str = "h200") -> dict:
    meta = {**collect(), "gpu": "Test GPU <b>", "gpu_slug": gpu}
    bench.record(config, speed_rows(config), [breakdown_rows(config)], meta)
    return meta


def test_the_benchmark_records_each_configuration_with_its_provenance(reports):
    meta = record("wenet", gpu="testgpu")
    folder = reports / "testgpu" / "encoder"
    assert sorted(p.name for p in folder.iterdir()) == [
        "wenet.breakdown.csv", "wenet.breakdown.json", "wenet.speed.csv", "wenet.speed.json",
    ]  # fmt: skip
    speed, recorded_meta = model.recorded_table(harness.SPEED, "testgpu")
    pd.testing.assert_frame_equal(speed, pd.DataFrame(speed_rows("wenet"), columns=list(harness.SPEED_COLUMNS)))
    assert recorded_meta == json.loads(json.dumps(meta))
    assert {"gpu", "git_commit", "torch_version", "date"} <= set(recorded_meta)
    breakdown, _ = model.recorded_table(harness.BREAKDOWN, "testgpu")
    pd.testing.assert_frame_equal(breakdown, breakdown_rows("wenet"))
    bench.record("conformer-l", speed_rows("conformer-l"), [], meta)  # a run of the other configuration alone
    both, _ = model.recorded_table(harness.SPEED, "testgpu")
    assert list(dict.fromkeys(both["config"])) == ["wenet", "conformer-l"]  # the first's files left as they were
    assert (folder / "wenet.breakdown.csv").is_file() and not (folder / "conformer-l.breakdown.csv").exists()
    with pytest.raises(ValueError, match="`kind`"):
        model.recorded_table("timing", "testgpu")


def test_without_a_recording_each_step_says_so_in_one_sentence_naming_the_command(reports):
    sentence = (
        "No encoder speed table is recorded in reports/h200/encoder/ yet: `bash scripts/h200_session.sh encoder` "
        "on the H200 records it."
    )
    assert model.missing(harness.SPEED, "h200") == sentence
    wb = ModelWorkbench("wenet")
    assert wb.replayed and wb.notebook == CONFORMER_PAGE.notebook == "10_conformer"
    banner = wb.banner().data
    assert "Replayed" in banner and "no recording was found in reports/h200/encoder" in banner
    assert wb.speed_table().data == f"*{sentence}*"
    assert wb.breakdown_table().data == f"*{sentence.replace('speed table', 'per-op breakdown')}*"
    assert wb.breakdown_plot() is None
    panel = EncoderPanel(wb)
    assert panel.run.disabled and "h200_session.sh encoder" in panel.widget.children[0].value
    assert panel.execute() is None and panel.note == sentence
    summary = json.loads(wb.write_summary().read_text())
    assert summary["headline"] == [sentence] and summary["mode"] == "replay"
    assert summary["notebook"] == "10_conformer" and set(summary["provenance"]) == {"git_commit", "date"}
    assert (reports / "replay" / "h200" / "10_conformer.summary.json").is_file()


def test_replay_shows_the_recorded_speed_breakdown_and_headlines(reports):
    meta = record("wenet")
    wb = ModelWorkbench("conformer-l")  # replay shows every recorded configuration, whichever is chosen
    assert "Test GPU &lt;b&gt;" in wb.banner().data  # provenance is data: escaped
    assert "not recorded" in wb.environment()["value"]["GPU state, timing"]  # a recording made without the state
    speed = wb.speed_table()
    assert list(speed.columns) == list(model.SPEED_SHOWN) and len(speed) == len(BACKENDS)
    (line,) = wb.headlines
    assert line.startswith("wenet 64x2.5s: oasr in a CUDA graph 5,000 µs, RTFx 32,000, 0.60x torch eager")
    assert line.endswith("1.40x torch.compile in a graph")
    table = wb.breakdown_table()
    assert list(table["op"]) == ["gemm", "add_layer_norm", "depthwise_conv1d"]  # summed per op, largest first
    assert list(table["calls"]) == [2, 1, 1] and table["share_pct"].sum() == pytest.approx(100)
    assert table.attrs["notes"] == ["wenet 64x2.5s: the ops' sum 7.00 µs, the layer in one CUDA graph 6.00 µs"]
    figure = wb.breakdown_plot()
    assert isinstance(figure, Figure) and len(figure.axes[0].patches) == 3
    summary = json.loads(wb.write_summary().read_text())
    assert summary["headline"] == [line] and summary["provenance"]["git_commit"] == meta["git_commit"]


def test_the_panel_offers_the_recorded_settings_and_names_them_for_another(reports):
    record("wenet")
    panel = EncoderPanel(ModelWorkbench("wenet"))
    assert list(panel.config.options) == ["wenet"] and list(panel.batch.options) == [64]
    assert [value for _, value in panel.seconds.options] == [2.5] and panel.compile.disabled
    panel.run.click()
    assert not panel.note and len(panel.history) == 1 and list(panel.history[0]["run"].unique()) == [1]
    panel.batch.options = [64, 1]  # a setting that was not recorded
    panel.batch.value = 1
    assert panel.execute() is None
    assert panel.note == "wenet, 1 x 2.5 s is not recorded; recorded: wenet 64 x 2.5 s"


def test_recorded_text_reaches_the_html_escaped(reports):
    rows = speed_rows("wenet")
    for row in rows:
        row["workload"] = "<script>alert(1)</script>"
    bench.record("wenet", rows, [], {**collect(), "gpu_slug": "h200"})
    html = ModelWorkbench().speed_table()._repr_html_()
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="`config` 'nope'"):
        ModelWorkbench("nope")
    with pytest.raises(TypeError, match="`config` must be"):
        ModelWorkbench(3)
    with pytest.raises(ValueError, match="`batch`"):
        harness.Workload.uniform(0, 2.5)
    with pytest.raises(ValueError, match="`seconds`"):
        harness.Workload.uniform(2, 0.01)
    assert harness.Workload.uniform(4, 2.5) == harness.Workload("4x2.5s", (250,) * 4)
    with pytest.raises(ValueError, match="`compile_modes`"):
        harness.time_workload("wenet", harness.Workload.uniform(1, 1.0), (None, None), ("fast",))


def test_the_main_command_titles_the_model_report_from_its_page():
    notebook = publish.NOTEBOOKS_DIR / f"{CONFORMER_PAGE.notebook}.ipynb"
    assert notebook.is_file() and publish.report_title(notebook) == CONFORMER_PAGE.title
