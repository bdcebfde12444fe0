"""Where the workbench keeps what it measured, and how it writes, digests and shows files.

``reports/`` at the repository root (``OASR_REPORTS_DIR`` moves it) holds one
folder per GPU: ``reports/<gpu_slug>/`` with tables, profiles and HTML reports,
made live on that GPU and committed. Replay (no GPU) reads them and renders into
``reports/replay/`` (git-ignored), never over them.
Every write is atomic: a temp file beside the target, then ``os.replace``.
"""

from __future__ import annotations

import os
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any

from oasr.jit.core import file_sha256

from .provenance import REPO_ROOT

TMP_PREFIX = ".tmp-"
REPLAY_GPU = "h200"
"""The GPU whose committed recordings replay uses on machines without a GPU."""
REPLAY_DIR = "replay"
"""The folder under the reports root that replay renders into (git-ignored): ``reports/replay/``."""


def reports_root() -> Path:
    """``$OASR_REPORTS_DIR``, or ``reports/`` at the repository root."""
    return Path(os.environ.get("OASR_REPORTS_DIR") or REPO_ROOT / "reports")


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as reports and notebooks show it: relative to the repository inside it,
    ``~/...`` under the home folder, otherwise as it is (no clone or home path in a report)."""
    absolute = Path(path).expanduser().absolute()
    for base, prefix in ((REPO_ROOT, ""), (Path.home(), "~/")):
        try:
            relative = absolute.relative_to(base)
        except ValueError:
            continue
        return prefix + relative.as_posix() if str(relative) != "." else (prefix.rstrip("/") or ".")
    return absolute.as_posix()


class ShownPath(type(Path())):  # type: ignore[misc]
    """A :class:`~pathlib.Path` that a notebook displays as :func:`shown_path` (repr stays exact)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(shown_path(self))


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


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex digest) of a file."""
    return path.stat().st_size, file_sha256(path)


def cached_digest(path: Path) -> tuple[int, str]:
    """:func:`file_digest`, computed once per (path, modification time, size) in a process: recordings are
    checked on every scan of their folder."""
    stat = path.stat()
    return _digest(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _digest(path: str, mtime_ns: int, size: int) -> tuple[int, str]:
    return file_digest(Path(path))
