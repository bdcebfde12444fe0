"""The sweep panel driven without a browser: set widget values, click Run, read the state."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import RECORDINGS

from oasr.jit import families
from oasr.jit.families import SCALE
from profiling.harness.ops import get_op
from profiling.workbench import panel as panel_module
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


def test_controls_offer_the_recorded_sweep(panel):
    labels = [label for label, _ in panel.size.options]
    assert len(labels) == 10 and labels[0].startswith("n=2048") and "MiB" in labels[-1]
    assert panel.dtype.options == ("float32", "float16", "bfloat16") and panel.dtype.value == "float16"
    assert set(panel.backends.value) == {"oasr", "torch"}
    assert panel.preset.options == ("timing", "roofline", "full")
    assert "replaying recordings" in panel.widget.children[0].value


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


def test_runs_accumulate_for_comparison(panel):
    panel.run.click()
    panel.size.value = 5
    panel.dtype.value = "bfloat16"
    panel.backends.value = ("oasr",)
    panel.run.click()
    table = panel.comparison()
    assert list(table["run"]) == [1, 1, 2]
    assert table.iloc[-1]["backend"] == "oasr" and table.iloc[-1]["dtype"] == "bfloat16"


def test_unrecorded_preset_says_so_and_keeps_timing(panel):
    panel.preset.value = "full"
    panel.run.click()
    assert panel.note.startswith("No profile:")
    assert panel.comparison()["seconds"].notna().all()
    assert "No profile" in _outputs(panel)[0]["data"]["text/html"]


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
    SCALE.use_module(object())  # a module loaded before the run
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
