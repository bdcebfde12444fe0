"""The sweep panel driven without a browser: set widget values, click Run, read the state."""

from __future__ import annotations

import shutil

import pytest
from conftest import RECORDINGS

from profiling.workbench import Workbench


@pytest.fixture
def panel(tmp_path, monkeypatch):
    copy = tmp_path / "reports"
    shutil.copytree(RECORDINGS.parent.parent, copy)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(copy))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    return Workbench("01_scale", ops=["scale"], title="01 · scale").panel()


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
