"""The sweep panel driven without a browser: set widget values, click Run, read the state."""

from __future__ import annotations

import re
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import RECORDINGS

from oasr.jit import families
from oasr.jit.families import NORM, SCALE
from profiling.analysis.plots import format_rate
from profiling.analysis.roofline import load_measured_ceilings
from profiling.harness.ops import get_op
from profiling.workbench import panel as panel_module
from profiling.workbench.display import Table, people
from profiling.workbench.notebook import Workbench
from profiling.workbench.panel import SweepPanel


@pytest.fixture
def panel(tmp_path, monkeypatch):
    copy = tmp_path / "reports"
    shutil.copytree(RECORDINGS.parent.parent, copy)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(copy))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    return SweepPanel(Workbench(SCALE))


def _outputs(panel) -> list[dict]:
    return list(panel.output.outputs)


def _html(panel) -> str:
    return "".join(o["data"].get("text/html", "") for o in _outputs(panel))


def _images(panel) -> int:
    return sum("image/png" in o["data"] for o in _outputs(panel))


def test_controls_offer_the_recorded_sweep_and_mark_the_rest(panel):
    labels = [label for label, _ in panel.size.options]
    assert len(labels) == 10 and labels[0] == "n=2048" and labels[-1] == "n=536870912"
    # Only float16 was profiled (roofline preset); the others were timed: the labels say so.
    assert panel.dtype.options == (
        ("float32 (timing only, not profiled)", "float32"),
        ("float16", "float16"),
        ("bfloat16 (timing only, not profiled)", "bfloat16"),
    )
    assert panel.dtype.value == "float16"
    assert set(panel.backends.value) == {"oasr", "torch"}
    assert panel.preset.options == (
        ("timing (not recorded)", "timing"),
        ("roofline", "roofline"),
        ("full (not recorded)", "full"),
    )
    panel.preset.value = "full"
    assert all("not profiled" in label for label, _ in panel.dtype.options)
    assert "replaying recordings" in panel.widget.children[0].value


def test_size_readout_shows_the_whole_size_the_dtype_and_whether_it_was_recorded(panel):
    panel.size.value = 9
    assert "n=536870912 · float16 · 2.00 GiB moved · recorded" in panel.size_readout.value
    panel.dtype.value = "float32"
    assert "n=536870912 · float32 · 4.00 GiB moved · timing recorded, not profiled" in panel.size_readout.value
    panel.size.value = 0
    assert "n=2048 · float32 · 16.0 KiB moved" in panel.size_readout.value
    assert not panel.size.readout  # the slider's own readout is cut at ~150 px: the readout beside it is whole


def test_run_shows_a_table_and_a_roofline(panel):
    panel.size.value = 9
    panel.run.click()
    table = panel.comparison()
    assert list(table["backend"]) == ["oasr", "torch"] and (table["run"] == 1).all()
    assert (table["config"] == "n=536870912").all() and (table["mode"] == "replay").all()
    assert table["duration_s"].notna().all() and table["pct_of_copy"].gt(50).all()
    kinds = [set(o["data"]) for o in _outputs(panel)]
    assert "text/html" in kinds[0] and "image/png" in kinds[-1]
    assert panel.progress.value == panel.progress.max and panel.progress.description == "done"
    shown = _html(panel)  # for people: µs, GB/s, integers as integers
    assert "time (µs)" in shown and "bandwidth (GB/s)" in shown and "e+" not in shown and ">21.0<" not in shown


def test_runs_accumulate_for_comparison(panel):
    panel.run.click()
    panel.size.value = 5
    panel.dtype.value = "bfloat16"
    panel.backends.value = ("oasr",)
    panel.run.click()
    table = panel.comparison()
    assert list(table["run"]) == [1, 1, 2]
    assert table.iloc[-1]["backend"] == "oasr" and table.iloc[-1]["dtype"] == "bfloat16"


def test_unrecorded_preset_says_what_is_recorded_and_keeps_timing(panel):
    panel.preset.value = "full"
    panel.run.click()
    assert panel.note.startswith("No full profile") and "only the roofline preset; pick roofline" in panel.note
    assert "presets recorded there" not in panel.note and not panel.error
    assert panel.comparison()["seconds"].notna().all()
    assert "No full profile" in _outputs(panel)[0]["data"]["text/html"] and _images(panel) == 0


def test_unprofiled_dtype_names_the_profiled_one_and_clears_the_previous_figure(panel):
    panel.run.click()
    assert _images(panel) == 1 and panel.figure is not None
    panel.dtype.value = "bfloat16"
    panel.run.click()
    assert panel.note.startswith("No roofline profile in bfloat16: only float16 was profiled for scale; pick float16")
    assert "run live on a GPU" in panel.note and not panel.error
    assert _images(panel) == 0 and panel.figure is None  # no stale roofline under the new note
    last = panel.comparison().query("run == 2")
    assert list(last["dtype"]) == ["bfloat16"] * 2 and last["seconds"].notna().all()
    shown = _html(panel)
    assert "nan" not in shown.lower() and "—" in shown  # missing profile columns read as a dash


def test_no_backend_is_said_before_anything_runs(panel, monkeypatch):
    panel.run.click()
    monkeypatch.setattr(panel_module, "profile_sweep", lambda *a, **k: pytest.fail("nothing may run"))
    monkeypatch.setattr(panel_module, "load_table", lambda *a, **k: pytest.fail("nothing may run"))
    panel.backends.value = ()
    panel.run.click()
    assert panel.error.startswith("No backend selected") and "LookupError" not in _html(panel)
    assert panel.progress.description == "not run" and panel.progress.bar_style == "danger"
    assert "Not run." in _html(panel) and "No backend selected" in _html(panel)
    assert _images(panel) == 0 and panel.figure is None and len(panel.history) == 1  # earlier run kept, shown


def test_unrecorded_timing_names_the_recorded_dtypes(panel, monkeypatch):
    table, meta = panel_module.load_table("h200", "scale", "timing")
    monkeypatch.setattr(panel_module, "load_table", lambda *a: (table[table["dtype"] == "float16"], meta))
    fresh = SweepPanel(panel.workbench)
    assert dict((v, label) for label, v in fresh.dtype.options)["float32"] == "float32 (not recorded)"
    fresh.dtype.value = "float32"
    assert "not recorded" in fresh.size_readout.value
    fresh.run.click()
    assert fresh.error.startswith("Nothing recorded for scale n=2048 in float32")
    assert "hold the timing of float16; pick float16, or run live on a GPU" in fresh.error
    assert fresh.history == [] and _images(fresh) == 0


def test_an_error_inside_a_run_is_shown_in_the_panel(panel, monkeypatch):
    panel.run.click()

    def broken(*args, **kwargs):
        raise RuntimeError("the recordings folder went away")

    monkeypatch.setattr(panel, "_timing", broken)
    panel.run.click()  # does not raise: a callback's exception would only reach JupyterLab's log
    shown = _html(panel)
    assert panel.error == "RuntimeError: the recordings folder went away"
    assert "Run failed." in shown and "traceback" in shown and "the recordings folder went away" in shown
    assert panel.progress.description == "failed" and _images(panel) == 0


def test_live_run_measures_the_chosen_backends_after_forgetting_loaded_modules(tmp_path, monkeypatch):
    """Live: each run reloads the kernels (an edited one is rebuilt), then times and profiles the choice."""
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setattr(families, "_LOADED", {})
    calls: list[tuple] = []

    def fake_measure(op, configs, dtypes, backends):
        calls.append(("measure", op.name, configs, dtypes, backends, "scale" in families._LOADED))
        rows = [
            {"backend": b, "config": op.config_label(c), "dtype": d, "seconds": 1e-6, "bandwidth_bytes_per_s": 1e12}
            | {"pct_of_copy": 25.0}
            for c in configs
            for d in dtypes
            for b in backends
        ]
        return pd.DataFrame(rows)

    def fake_profile_sweep(op, *, configs, dtypes, backends, preset, live):
        calls.append(("profile", op, configs, dtypes, backends, preset, live))
        launches = pd.DataFrame({"backend": backends, "kernel": [f"K_{b}" for b in backends], "duration_s": 1e-6})
        return SimpleNamespace(launches=launches)

    monkeypatch.setattr(panel_module, "measure", fake_measure)
    monkeypatch.setattr(panel_module, "profile_sweep", fake_profile_sweep)
    live = SweepPanel(Workbench(SCALE))
    assert "(live)" in live.widget.children[0].value
    families._LOADED["scale"] = object()  # a module loaded before the run
    live.size.value, live.dtype.value, live.backends.value, live.preset.value = 2, "bfloat16", ("oasr",), "timing"
    live.run.click()
    config = get_op("scale").default_sweep[2]
    assert calls == [
        ("measure", "scale", [config], ["bfloat16"], ["oasr"], False),  # the loaded module was forgotten first
        ("profile", "scale", [config], ["bfloat16"], ["oasr"], "timing", True),
    ]
    table = live.comparison()
    assert list(table["backend"]) == ["oasr"] and (table["mode"] == "live").all()
    assert table["kernel"].iloc[0] == "K_oasr"


# ---------------------------------------------------------------- tables for people (display.py)


def test_tables_keep_base_units_and_display_for_people(panel):
    norms = Workbench(NORM)
    timing = norms.timing()
    assert isinstance(timing, Table) and timing["seconds"].max() < 1e-2  # the DataFrame stays in seconds
    shown = timing[["op", "backend", "config", "dtype", "bytes", "seconds", "bandwidth_bytes_per_s"]]._repr_html_()
    assert "time (µs)" in shown and "bandwidth (GB/s)" in shown and "MiB" in shown
    assert not re.search(r"\de[+-]\d", shown)  # no 3.31e-05, no 4.055e+12
    assert shown.count("<tr") == len(timing) + 1 and "..." not in shown  # every row: header + one per row
    assert "overflow:auto" in shown and "max-height" in shown  # reachable by scrolling, both ways
    correctness = norms.correctness()
    assert correctness._repr_html_().count("<tr") == len(correctness) + 1 and len(correctness) > 60
    speedups = norms.speedup_table(timing)
    assert "oasr_seconds" in speedups and "oasr (µs)" in speedups._repr_html_() and "×" in speedups._repr_html_()

    result = norms.profile("rms_norm")
    launches = norms.launch_table(result)
    assert launches["config"].str.match(r"^b=\d+,t=\d+,c=\d+$").all()  # the op's order, not the stored b,c,t
    html = launches._repr_html_()
    counts = people(launches)[["grid", "block", "registers"]]
    assert counts.stack().str.fullmatch(r"\d+").all()  # 128, not 128.0
    assert "b=16,t=1500,c=1024" in html and ",c=1024,t=" not in html
    ceilings = norms.ceilings(result)._repr_html_()
    assert recorded_copy() in ceilings and "TFLOP/s" in ceilings

    escaped = Table({"kernel": ["void k<float, 4>(x)"], "duration_s": [3.31e-05]})._repr_html_()
    assert "k&lt;float, 4&gt;" in escaped and ">33.1<" in escaped


def recorded_copy() -> str:
    """The recorded copy bandwidth as the plots and tables print it (e.g. ``4.22 TB/s``)."""
    return format_rate(load_measured_ceilings("h200")["copy_bytes_per_s"], "B/s")


def test_the_copy_ceiling_is_one_value_on_every_plot(panel):
    bench = panel.workbench
    bandwidth = bench.bandwidth_plot(bench.timing())
    roof = bench.roofline_plot(bench.profile("scale"))
    copy_labels = [t.get_text() for t in bandwidth.axes[0].get_legend().get_texts() if "copy" in t.get_text()]
    roof_labels = [t.get_text() for t in roof.axes[0].get_legend().get_texts() if "copy" in t.get_text()]
    copy = recorded_copy()  # the one value, from reports/h200/ceilings.json
    assert copy_labels == [f"measured copy: {copy}"] and roof_labels == [f"device copy (measured): {copy}"]


def test_live_without_a_gpu_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))

    def no_gpu(*args, **kwargs):
        raise RuntimeError("no CUDA GPU: measure_copy_bandwidth needs an NVIDIA GPU")

    monkeypatch.setattr(panel_module, "measure", no_gpu)
    monkeypatch.setattr(panel_module.torch.cuda, "is_available", lambda: False)
    live = SweepPanel(Workbench(SCALE))
    live.run.click()
    assert live.error.startswith("RuntimeError: no CUDA GPU") and "unset OASR_WORKBENCH_MODE" in live.error
    assert "Run failed." in _html(live) and live.history == []
