"""The main command (profiling.workbench.publish): notebook execution, HTML export, the index, failure reporting."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from profiling.provenance import REPO_ROOT
from profiling.workbench import publish


@pytest.fixture
def reports_dir(tmp_path, monkeypatch):
    root = tmp_path / "reports"
    (root / "assets").mkdir(parents=True)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(root))
    return root


def _notebook(path, *sources: str):
    cells = [nbformat.v4.new_markdown_cell("# a test notebook")]
    cells += [nbformat.v4.new_code_cell(source) for source in sources]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


def test_a_failing_notebook_is_named_and_the_others_still_run(tmp_path, reports_dir):
    broken = _notebook(tmp_path / "01_broken.ipynb", "x = 1", "1 / 0", "print('never')")
    fine = _notebook(tmp_path / "02_fine.ipynb", "print('hello from the notebook')")
    runs = publish.run_notebooks([broken, fine], "testgpu")
    assert [run.ok for run in runs] == [False, True]
    assert runs[0].error == "cell 2: ZeroDivisionError: division by zero"
    html = (reports_dir / "testgpu" / "02_fine.html").read_text()
    assert "hello from the notebook" in html
    assert (reports_dir / "testgpu" / "01_broken.html").is_file()
    no_input = (reports_dir / "testgpu" / "02_fine.no-input.html").read_text()
    assert "print(" not in no_input and "hello from the notebook" in no_input


def test_html_uses_local_widget_renderer_and_inline_images(tmp_path, reports_dir):
    notebook = _notebook(
        tmp_path / "03_plot.ipynb",
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])",
        "import ipywidgets\nipywidgets.IntSlider(value=3, description='size')",
    )
    executed, error = publish.execute_notebook(notebook)
    assert error is None
    html = publish.export_html(executed, reports_dir / "g" / "03_plot.html").read_text()
    assert 'src="../assets/require.js"' in html and "../assets/embed-amd.js" in html
    assert "data:image/png;base64," in html and "unpkg.com" not in html
    assert "application/vnd.jupyter.widget-state+json" in html  # the slider renders statically


def test_index_lists_reports_with_headlines_and_provenance(reports_dir):
    summary = {
        "title": "01 · scale",
        "mode": "live",
        "headline": ["scale float16: 99% of copy bandwidth at 2048 MiB"],
        "provenance": {"gpu": "NVIDIA H200", "driver": "580", "cuda_runtime": "13.0", "git_commit": "abc", "date": "d"},
    }
    (reports_dir / "h200").mkdir()
    (reports_dir / "h200" / "01_scale.summary.json").write_text(json.dumps(summary))
    page = publish.write_index().read_text()
    assert "h200/01_scale.html" in page and "h200/01_scale.no-input.html" in page
    assert "99% of copy bandwidth" in page and "NVIDIA H200" in page and "abc" in page and "live" in page


def test_main_exits_non_zero_and_prints_the_failure(tmp_path, reports_dir, capsys, monkeypatch):
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    broken = _notebook(tmp_path / "04_broken.ipynb", "raise RuntimeError('kernel exploded')")
    assert publish.main([str(broken)]) == 1
    out = capsys.readouterr().out
    assert "04_broken.ipynb" in out and "FAILED" in out and "RuntimeError: kernel exploded" in out
    assert "index:" in out


def test_main_command_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "profiling.workbench.publish", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m profiling.workbench.publish") and "notebooks" in result.stdout
