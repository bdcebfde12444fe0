"""The suite itself: it builds and decompresses into a folder of its own (tests/conftest.py), so a test run leaves
nothing in the user's ~/.cache/oasr, and an explicit OASR_JIT_DIR (the H200 scripts' persistent cache) is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from profiling.provenance import REPO_ROOT

USER_CACHE = Path("~/.cache/oasr").expanduser()
PROBE = """import os

def test_probe():
    print("JIT=" + os.environ["OASR_JIT_DIR"])
    print("REPORTS=" + os.environ["OASR_REPORT_CACHE"])
"""


def _caches_seen_by_a_test(tmp_path: Path, **environment: str) -> dict[str, str]:
    """The cache folders a test sees in a pytest session that loads the suite's conftest."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    kept = {k: v for k, v in os.environ.items() if k not in ("OASR_JIT_DIR", "OASR_REPORT_CACHE")}
    path = os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "conftest", "test_probe.py"],
        cwd=tmp_path, env={**kept, **environment, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith(("JIT=", "REPORTS=")))


def test_a_run_without_oasr_jit_dir_builds_in_a_session_folder_it_removes(tmp_path: Path) -> None:
    seen = _caches_seen_by_a_test(tmp_path)
    jit, reports = Path(seen["JIT"]), Path(seen["REPORTS"])
    assert jit.parent == reports.parent and jit.parent.name.startswith("oasr-tests-")
    assert USER_CACHE not in jit.parents and USER_CACHE not in reports.parents
    assert not jit.parent.exists()  # removed when the session ended


def test_an_explicit_oasr_jit_dir_is_kept(tmp_path: Path) -> None:
    seen = _caches_seen_by_a_test(tmp_path, OASR_JIT_DIR=str(tmp_path / "persistent"))
    assert seen["JIT"] == str(tmp_path / "persistent") and seen["REPORTS"] != seen["JIT"]
