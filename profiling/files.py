"""Where the workbench keeps what it measured, and how it writes files.

``reports/`` at the repository root (``OASR_REPORTS_DIR`` moves it) holds one
folder per GPU: ``reports/<gpu_slug>/`` with tables, profiles and HTML reports.
Every write is atomic: a temp file beside the target, then ``os.replace``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from .provenance import REPO_ROOT

TMP_PREFIX = ".tmp-"
REPLAY_GPU = "h200"
"""The GPU whose committed recordings replay uses on machines without a GPU."""


def reports_root() -> Path:
    """``$OASR_REPORTS_DIR``, or ``reports/`` at the repository root."""
    return Path(os.environ.get("OASR_REPORTS_DIR") or REPO_ROOT / "reports")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path``, then ``os.replace`` it into place."""
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}{path.suffix}")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
