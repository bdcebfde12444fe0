"""The main command (profiling.workbench.publish): notebook execution, HTML export, the index,
failure reporting, where each mode writes, Ctrl-C, and the escaping of data that reaches HTML."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
from IPython.lib.pretty import pretty

from oasr.jit.families import SCALE
from profiling import files
from profiling.provenance import REPO_ROOT
from profiling.workbench import publish, tables
from profiling.workbench.notebook import Workbench
from profiling.workbench.pages import SCALE_PAGE

HOSTILE = "<script>alert('x')</script> & \"q\""


@pytest.fixture
def reports_dir(tmp_path, monkeypatch):
    root = tmp_path / "reports"
    (root / "assets").mkdir(parents=True)
    monkeypatch.setenv("OASR_REPORTS_DIR", str(root))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    return root


def _notebook(path, *sources: str, title: str = "a test notebook"):
    cells = [nbformat.v4.new_markdown_cell(f"# {title}")]
    cells += [nbformat.v4.new_code_cell(source) for source in sources]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


def _summary(**overrides):
    summary = {
        "title": "01 · scale — `out = input * factor`",
        "mode": "live",
        "headline": ["scale float16: 99% of copy bandwidth at 2048 MiB"],
        "provenance": {"gpu": "NVIDIA H200", "driver": "580", "cuda_runtime": "13.0", "git_commit": "abc", "date": "d"},
    }
    return {**summary, **overrides}


def _digests(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


# ------------------------------------------------------------ where each mode writes


def test_replay_writes_into_the_ignored_replay_folder_and_live_into_the_gpu_folder(reports_dir, monkeypatch):
    assert tables.output_root() == reports_dir / "replay"
    assert tables.output_dir() == reports_dir / "replay" / "h200"
    assert tables.summary_path("01_scale") == reports_dir / "replay" / "h200" / "01_scale.summary.json"
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setattr(tables, "collect", lambda: {"gpu_slug": "h200"})
    assert tables.output_root() == reports_dir and tables.output_dir() == reports_dir / "h200"


def test_the_replay_folder_is_git_ignored_and_the_recordings_are_not():
    def ignored(path):
        result = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO_ROOT, capture_output=True)
        return result.returncode == 0

    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert ignored("reports/replay/index.html") and ignored("reports/replay/h200/01_scale.summary.json")
    assert not ignored("reports/h200/01_scale.html") and not ignored("reports/index.html")


def test_main_in_replay_leaves_the_committed_reports_as_they_were(tmp_path, reports_dir, capsys):
    committed = reports_dir / "h200"
    committed.mkdir()
    (committed / "01_scale.summary.json").write_text(json.dumps(_summary()))
    (committed / "01_scale.html").write_text("<html>live report</html>")
    (reports_dir / "index.html").write_text("<html>live index</html>")
    before = _digests(reports_dir)
    fine = _notebook(tmp_path / "01_scale.ipynb", "print('replayed here')")
    assert publish.main([str(fine)]) == 0
    after = _digests(reports_dir)
    assert {k: after.get(k) for k in before} == before  # nothing committed changed
    assert all(k.parts[0] == "replay" for k in set(after) - set(before))  # everything new is under replay/
    replay = reports_dir / "replay"
    assert "replayed here" in (replay / "h200" / "01_scale.html").read_text()
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("replay (no CUDA GPU)") and "replay/h200" in first and "git-ignored" in first
    assert f"index: {replay / 'index.html'}" in out
    page = (replay / "index.html").read_text()
    assert "href='../index.html'" in page  # the committed live index, from the replay one


def test_write_summary_in_replay_goes_to_the_replay_folder(reports_dir, monkeypatch):
    shutil.copytree(REPO_ROOT / "reports" / "h200" / "tables", reports_dir / "h200" / "tables")
    bench = Workbench(SCALE)
    bench.timing()
    path = bench.write_summary()
    assert path == reports_dir / "replay" / "h200" / "01_scale.summary.json"
    assert not (reports_dir / "h200" / "01_scale.summary.json").exists()
    assert json.loads(path.read_text())["mode"] == "replay"


# ------------------------------------------------------------ running and failing


def test_a_failing_notebook_is_named_and_the_others_still_run(tmp_path, reports_dir):
    broken = _notebook(tmp_path / "01_broken.ipynb", "x = 1", "1 / 0", "print('never')")
    fine = _notebook(tmp_path / "02_fine.ipynb", "print('hello from the notebook')")
    out = reports_dir / "testgpu"
    runs = publish.run_notebooks([broken, fine], out)
    assert [run.ok for run in runs] == [False, True]
    assert runs[0].error == "cell 2: ZeroDivisionError: division by zero"
    html = (out / "02_fine.html").read_text()
    assert "hello from the notebook" in html
    assert (out / "01_broken.html").is_file()
    no_input = (out / "02_fine.no-input.html").read_text()
    assert "print(" not in no_input and "hello from the notebook" in no_input


def test_a_failed_notebook_replaces_its_old_headline_in_the_index(tmp_path, reports_dir):
    out = reports_dir / "replay" / "h200"
    out.mkdir(parents=True)
    (out / "01_broken.summary.json").write_text(json.dumps(_summary(headline=["an old headline"])))
    broken = _notebook(tmp_path / "01_broken.ipynb", "raise RuntimeError('kernel exploded')")
    assert publish.main([str(broken)]) == 1
    summary = json.loads((out / "01_broken.summary.json").read_text())
    assert summary["failed"] == "cell 1: RuntimeError: kernel exploded" and summary["headline"] == []
    page = (reports_dir / "replay" / "index.html").read_text()
    assert "an old headline" not in page and "failed" in page and "kernel exploded" in page
    assert "partial run" in page and "h200/01_broken.no-input.html" not in page


def test_main_exits_non_zero_and_prints_the_failure(tmp_path, reports_dir, capsys):
    broken = _notebook(tmp_path / "04_broken.ipynb", "raise RuntimeError('kernel exploded')")
    assert publish.main([str(broken)]) == 1
    out = capsys.readouterr().out
    assert "04_broken.ipynb" in out and "FAILED" in out and "RuntimeError: kernel exploded" in out
    assert "index:" in out


def test_ctrl_c_exits_130_with_one_line_and_keeps_what_finished(tmp_path, reports_dir):
    marker = tmp_path / "started"
    quick = _notebook(tmp_path / "01_quick.ipynb", "print('quick')")
    slow = _notebook(
        tmp_path / "02_slow.ipynb", f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(120)"
    )
    never = _notebook(tmp_path / "03_never.ipynb", "print('never')")
    command = [sys.executable, "-m", "profiling.workbench.publish", str(quick), str(slow), str(never)]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), process.communicate(timeout=60)
    start = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and time.monotonic() - start < 30
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-1].startswith("interrupted (Ctrl-C): kept 01_quick.ipynb; not run to the end: 02_slow.ipynb, 03_ne")
    assert not any(line.startswith(("notebook ", "01_quick")) for line in lines)  # no table: one line
    assert "Traceback" not in err
    out_dir = reports_dir / "replay" / "h200"
    assert (out_dir / "01_quick.html").is_file() and not (out_dir / "02_slow.html").exists()
    assert not (out_dir / "03_never.html").exists()
    assert "01_quick.html" in (reports_dir / "replay" / "index.html").read_text()


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


# ------------------------------------------------------------ the static HTML


def test_html_is_offline_titled_and_links_back_to_its_index(tmp_path, reports_dir):
    notebook = _notebook(
        tmp_path / "03_plot.ipynb",
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])",
        "import ipywidgets\nipywidgets.Button(description='Run', icon='play')",
        "ipywidgets.IntSlider(value=3, description='size')",
        title="03 · plot — `y = f(x)`",
    )
    executed, error = publish.execute_notebook(notebook)
    assert error is None
    out = reports_dir / "replay" / "g"
    index = out.parent / "index.html"
    title = publish.report_title(notebook, executed)
    page = publish.export_html(executed, out / "03_plot.html", title=title, index=index).read_text()
    assert 'src="../../assets/require.js"' in page and "../../assets/embed-amd.js" in page
    assert "data:image/png;base64," in page
    assert "application/vnd.jupyter.widget-state+json" in page  # the controls render statically
    external = re.findall(r"<(?:script|link)[^>]+(?:src|href)=[\"']?(https?:|//)", page, flags=re.IGNORECASE)
    assert not external and "mathjax" not in page.lower() and "mermaid.esm" not in page
    assert "<title>03 · plot — y = f(x)</title>" in page
    assert '<a href="../index.html">← all reports</a>' in page and 'href="03_plot.no-input.html"' in page
    assert '"icon": "play"' not in page  # no icon font offline: no missing-glyph box
    assert "font-family: var(--jp-ui-font-family)" in page  # widget labels in the UI font
    no_code = publish.export_html(executed, out / "03_plot.no-input.html", True, title=title, index=index)
    assert "<title>03 · plot — y = f(x) (no code)</title>" in no_code.read_text()
    assert 'href="03_plot.html"' in no_code.read_text()


def test_titles_and_file_names_reach_the_html_escaped(tmp_path, reports_dir):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("text")])
    out = reports_dir / "replay" / "g"
    page = publish.export_html(notebook, out / "07_a'b<c.html", title=HOSTILE, index=out.parent / "index.html")
    text = page.read_text()
    assert "<script>alert" not in text and "<title>&lt;script&gt;alert" in text
    assert 'href="07_a%27b%3Cc.no-input.html"' in text


def test_report_titles_come_from_the_pages():
    assert publish.report_title(REPO_ROOT / "notebooks" / "01_scale.ipynb") == SCALE_PAGE.title


def test_the_no_code_variant_hides_source_code_outputs(tmp_path, reports_dir):
    notebook = _notebook(
        tmp_path / "05_src.ipynb",
        "from IPython.display import Markdown\nMarkdown('`include/a.cuh`\\n\\n```cpp\\nstruct KernelBody {};\\n```')",
        "print('a figure stays')",
    )
    executed, error = publish.execute_notebook(notebook)
    assert error is None
    out = reports_dir / "replay" / "g"
    with_code = publish.export_html(executed, out / "05_src.html").read_text()
    no_code = publish.export_html(executed, out / "05_src.no-input.html", exclude_input=True).read_text()
    assert "KernelBody" in with_code
    assert "KernelBody" not in no_code and "a figure stays" in no_code and "the report with code" in no_code


def test_log_notes_print_as_plain_text_in_a_notebook(tmp_path):
    notebook = _notebook(
        tmp_path / "06_note.ipynb",
        "import logging\nimport profiling.workbench.tables\nlogging.getLogger('oasr.jit').warning('oasr: a note')",
    )
    executed, error = publish.execute_notebook(notebook)
    assert error is None
    outputs = executed.cells[1].outputs
    assert [(o.get("name"), o.get("text")) for o in outputs] == [("stdout", "oasr: a note\n")]


def test_plain_notes_defer_to_configured_logging(capsys, monkeypatch):
    logger = logging.getLogger("oasr.test-notes")
    monkeypatch.setattr(logging.getLogger("oasr"), "handlers", [])
    tables.show_library_notes_as_text()
    tables.show_library_notes_as_text()
    assert len(logging.getLogger("oasr").handlers) == 1
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    logger.warning("shown on stdout")
    assert capsys.readouterr().out == "shown on stdout\n"
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.NullHandler()])
    logger.warning("left to the configured handlers")
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------ the index


def test_index_lists_reports_with_headlines_and_provenance(reports_dir):
    (reports_dir / "h200").mkdir()
    (reports_dir / "h200" / "01_scale.summary.json").write_text(json.dumps(_summary()))
    page = publish.write_index(reports_dir).read_text()
    assert "h200/01_scale.html" in page and "h200/01_scale.no-input.html" in page
    assert "99% of copy bandwidth" in page and "NVIDIA H200" in page and "abc" in page and "live" in page
    assert "01 · scale — <code>out = input * factor</code>" in page and "`" not in page


def test_live_index_ignores_the_replay_folder(reports_dir):
    (reports_dir / "replay").mkdir()
    (reports_dir / "replay" / "09_x.summary.json").write_text(json.dumps(_summary(title="a replayed one")))
    assert "a replayed one" not in publish.write_index(reports_dir).read_text()


def test_nothing_from_data_reaches_the_index_unescaped(reports_dir):
    folder = reports_dir / "h200"
    folder.mkdir()
    provenance = {"gpu": HOSTILE, "driver": HOSTILE, "cuda_runtime": HOSTILE, "git_commit": HOSTILE, "date": HOSTILE}
    reading = {"nvml": "ok", "l2": HOSTILE, "driver": HOSTILE, "sm_clock_mhz": HOSTILE, "sm_clock_max_mhz": 1980}
    reading |= {"memory_clock_mhz": 2619, "power_w": 400.0, "temperature_c": 50}
    provenance["device_state"] = {"before": reading, "after": reading}  # a recording's GPU state is data too
    summary = _summary(title=HOSTILE, mode=HOSTILE, headline=[HOSTILE], provenance=provenance, failed=HOSTILE)
    (folder / "01_x'><script>y.summary.json").write_text(json.dumps(summary))
    page = publish.write_index(reports_dir).read_text()
    assert "<script>" not in page and "'><" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "href='h200/01_x%27%3E%3Cscript%3Ey.html'" in page


# ------------------------------------------------------------ what notebooks show


def test_banner_escapes_provenance(reports_dir, monkeypatch):
    bench = Workbench(SCALE)
    monkeypatch.setattr(bench, "_recorded_meta", lambda: {"gpu": HOSTILE, "driver": "<b>", "git_commit": "&"})
    banner = bench.banner().data
    assert "<script>" not in banner and "&lt;script&gt;" in banner and "&lt;b&gt;" in banner and "&amp;" in banner
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "live")
    monkeypatch.setattr("profiling.provenance.collect", lambda: {"gpu": HOSTILE, "gpu_slug": "x"})
    live = Workbench(SCALE).banner().data
    assert "<script>" not in live and "&lt;script&gt;" in live


def test_advice_escapes_ncu_text(reports_dir):
    launches = pd.DataFrame({"profile": [0], "launch": [0], "backend": ["oasr"], "dram_bytes": [1.0]})
    advice = pd.DataFrame(
        {
            "profile": [0],
            "launch": [0],
            "backend": ["oasr"],
            "kernel": ["k<T>"],
            "title": ["<i>t</i>"],
            "message": [HOSTILE],
        }
    )
    page = Workbench.advice(SimpleNamespace(launches=launches, advice=advice)).to_html()
    assert "<script>" not in page and "&lt;script&gt;" in page and "k&lt;T&gt;" in page and "<i>" not in page


def test_paths_are_shown_relative_to_the_repository_or_home(monkeypatch, tmp_path):
    assert files.shown_path(REPO_ROOT / "reports" / "index.html") == "reports/index.html"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert files.shown_path(tmp_path / ".cache" / "oasr" / "jit" / "scale.so") == "~/.cache/oasr/jit/scale.so"
    assert files.shown_path("/elsewhere/x") == "/elsewhere/x"
    shown = files.ShownPath(REPO_ROOT / "reports" / "x.json")
    assert pretty(shown) == "reports/x.json" and shown == REPO_ROOT / "reports" / "x.json"
