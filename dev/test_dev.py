"""dev/'s own checks, apart from the library's suite: ``python3 -m pytest dev/`` (the default run collects tests/ only).

Every patch of ``dev/*/variants/`` applies to ``include/`` as it is (a patch that no longer does is deleted and named
by commit in its family's RESULTS.md); every script still imports on CPU, and those with a command line answer
``--help``; the GPU scripts say in one sentence that they need a GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dev.tune_kernels import patched_include

DEV = Path(__file__).resolve().parent
ROOT = DEV.parent
PATCHES = sorted(DEV.glob("*/variants/*.patch"))
SCRIPTS = sorted(p for p in DEV.rglob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_the_patches_and_scripts_are_found():
    assert PATCHES and len(SCRIPTS) > 20


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_each_patch_applies_to_todays_include(patch):
    name, include = patched_include(patch)
    assert name == patch.stem and (include / "oasr").is_dir()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(DEV)))
def test_each_script_imports_and_answers_help(script):
    """Imported as a module (its ``main`` not run), then, where it parses arguments, ``--help`` (a GPU script may
    answer, before parsing, that it needs a GPU, in one sentence)."""
    run = [sys.executable, "-c", f"import runpy; runpy.run_path({str(script)!r}, run_name='dev_import_check')"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT)
    missing = re.search(r"ModuleNotFoundError: No module named '(\w+)", done.stderr)
    if missing and missing.group(1) not in ("oasr", "profiling", "benchmarks", "dev"):
        pytest.skip(f"needs {missing.group(1)}, which is not installed here")  # e.g. cupy for sigmoid_error.py
    assert done.returncode == 0, done.stderr[-3000:]
    if "argparse" in script.read_text():
        done = subprocess.run(
            [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT
        )
        no_gpu = done.returncode == 1 and done.stderr.startswith(f"{script.name}: no CUDA GPU: ")  # checked first
        assert (done.returncode == 0 and "usage" in done.stdout) or no_gpu, done.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
@pytest.mark.parametrize(
    "argv",
    [
        ["harness/timing_drift.py"],
        ["harness/output_reuse.py"],
        ["harness/scale_after_large_op.py"],
        ["tune_kernels.py", "--ops", "scale", "--variant", "base=", "--after-large-check"],
    ],
)
def test_gpu_scripts_without_gpu_exit_1_with_one_sentence(argv):
    script = DEV / argv[0]
    proc = subprocess.run(
        [sys.executable, str(script), *argv[1:]], capture_output=True, text=True, timeout=120, env=ENV
    )
    assert proc.returncode == 1 and proc.stderr.startswith(f"{script.name}: no CUDA GPU: "), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
