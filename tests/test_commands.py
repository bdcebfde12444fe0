"""The command lines start at once and end in one sentence: ``--help`` and usage errors answer before torch,
pandas or matplotlib load (profiling/commands.py), a bad notebook path is named in one line, and Ctrl-C while a
command starts prints no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from profiling.provenance import REPO_ROOT
from profiling.workbench import publish

NOTEBOOK = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("nosuch.ipynb", None, "does not exist"),
        ("folder.ipynb", "<dir>", "is a folder, not a notebook"),
        ("notes.txt", "hello", "is not a notebook (.ipynb file)"),
        ("empty.ipynb", "", "is empty, not a notebook"),
        ("broken.ipynb", "{bad", "is not a valid notebook (Notebook does not appear to be JSON"),
        ("list.ipynb", "[]", "is not a valid notebook ("),
        ("cells.ipynb", '{"cells": 3, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "is not a valid notebook"),
        ("nocode.ipynb", nbformat.writes(nbformat.v4.new_notebook()), "has no code cells"),
    ],
)
def test_a_path_that_is_no_notebook_is_one_sentence(name, text, expected, tmp_path, capsys) -> None:
    path = tmp_path / name
    if text == "<dir>":
        path.mkdir()
    elif text is not None:
        path.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        publish.main([str(path), str(tmp_path / "fine.ipynb")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("python -m profiling.workbench.publish: error: argument notebooks: "), error
    assert expected in error[-1] and "Traceback" not in "\n".join(error)


def _default_sigint() -> None:
    """A terminal's disposition of Ctrl-C: a suite started in the background (``nohup ... &``) hands its children
    SIGINT ignored, which the command rightly keeps (profiling/commands.py)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _started(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OASR_WORKBENCH_MODE": "replay"}
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )


def test_ctrl_c_while_the_main_command_starts_prints_no_traceback(tmp_path: Path) -> None:
    """Ctrl-C in the command's first seconds (loading torch and nbclient, or starting the notebook's kernel) ends
    it with one line and status 130."""
    # The cell outlasts the signal, so a fast start cannot finish the notebook before Ctrl-C arrives.
    slow = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(60)")]))
    (tmp_path / "01_x.ipynb").write_text(slow)
    process = _started(["-m", "profiling.workbench.publish", str(tmp_path / "01_x.ipynb")])
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == publish.EXIT_INTERRUPTED, (out, err)
    assert "Traceback" not in err and "interrupted (Ctrl-C)" in out + err, err


COMMANDS = [
    ["-m", "profiling.nsight"],
    ["-m", "profiling.compare"],
    ["-m", "profiling.workbench.publish"],
    ["benchmarks/oasr_benchmark.py"],
    ["benchmarks/ncu_crosscheck.py"],
    ["benchmarks/host_overhead.py"],
    ["benchmarks/gemm_grid.py"],
    ["notebooks/generate.py"],
]
"""Every command line a user runs, but two whose package imports the library on its own: ``python -m oasr.jit``
runs inside ``oasr``, whose ``__init__`` imports the ops (and torch), as does ``profiling.files`` under
``python -m profiling.nsight.packing`` (through ``oasr.jit.core``): their start-up is the library's import."""
HEAVY = ("torch", "pandas", "matplotlib")
STARTUP_BOUND_S = 3.0
"""Generous for a loaded 2-core machine (0.5 s there at best); the imported modules are what the test holds."""


def _imported(stderr: str) -> set[str]:
    """The modules ``python -X importtime`` reports importing."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("flags", [["--help"], ["--bogus"]], ids=["help", "usage-error"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[-1])
def test_help_and_usage_errors_answer_without_torch_pandas_or_matplotlib(command, flags) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command, *flags], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    assert done.returncode == (0 if flags == ["--help"] else 2), done.stderr[-2000:]
    assert "usage:" in done.stdout + done.stderr and "Traceback" not in done.stderr
    loaded = _imported(done.stderr)
    assert loaded and not [m for m in loaded if m.split(".")[0] in HEAVY], sorted(loaded)
    assert seconds < STARTUP_BOUND_S, f"{' '.join(command)} {flags[0]} took {seconds:.1f} s"
