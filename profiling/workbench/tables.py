"""The workbench's recorded tables, whether this machine runs live or replays, and where
each mode writes.

Each step of a notebook runs live on a GPU machine and stores what it measured
under ``reports/<gpu>/tables/`` (CSV with a ``.json`` provenance sidecar). On a
machine without a GPU the same steps read those recordings back.
``OASR_WORKBENCH_MODE=live|replay`` forces a mode.

Live, reports and summaries go to ``reports/<gpu>/`` and the index to
``reports/index.html``: the committed source. Replay renders into
``reports/replay/`` (git-ignored) with its own index, so that running the main
command or a notebook without a GPU never rewrites a tracked file.

In a notebook kernel, the library's log notes (such as the no-GPU arch default)
print as plain text on the cell's stdout: notebooks render stderr as an error box.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..files import REPLAY_DIR, REPLAY_GPU, atomic_write_text, reports_root
from ..provenance import collect

LIVE, REPLAY = "live", "replay"


def workbench_mode() -> str:
    """``live`` with a CUDA GPU, ``replay`` without; ``OASR_WORKBENCH_MODE`` overrides."""
    forced = os.environ.get("OASR_WORKBENCH_MODE", "").strip().lower()
    if forced in (LIVE, REPLAY):
        return forced
    if forced:
        raise ValueError(f"OASR_WORKBENCH_MODE={forced!r}: use 'live', 'replay' or leave it unset")
    return LIVE if torch.cuda.is_available() else REPLAY


def report_gpu_slug() -> str:
    """The ``reports/<gpu>/`` folder this machine reads and records (the recordings' GPU when replaying)."""
    return collect()["gpu_slug"] if workbench_mode() == LIVE else REPLAY_GPU


def output_root() -> Path:
    """Where this mode writes the reports' index: the reports root live (committed),
    ``<reports root>/replay`` in replay (git-ignored)."""
    root = reports_root()
    return root if workbench_mode() == LIVE else root / REPLAY_DIR


def output_dir() -> Path:
    """Where this mode writes HTML reports and summaries: ``reports/<gpu>/`` live,
    ``reports/replay/<recordings' gpu>/`` in replay."""
    return output_root() / report_gpu_slug()


def summary_path(notebook: str, out_dir: Path | None = None) -> Path:
    """``<out_dir>/<notebook>.summary.json`` (default: this mode's :func:`output_dir`): its headlines for the index."""
    return (out_dir if out_dir is not None else output_dir()) / f"{notebook}.summary.json"


def _table_path(gpu_slug: str, op: str, kind: str, folder: str) -> Path:
    return reports_root() / gpu_slug / folder / f"{op}.{kind}.csv"


def save_table(
    df: pd.DataFrame, gpu_slug: str, op: str, kind: str, meta: dict[str, Any], folder: str = "tables"
) -> Path:
    """Store a measured table with its provenance (CSV + ``.json`` sidecar, atomic) as
    ``reports/<gpu_slug>/<folder>/<op>.<kind>.csv`` (an op's tables; the encoder's, per configuration, in
    ``encoder/``)."""
    path = _table_path(gpu_slug, op, kind, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, df.to_csv(index=False))
    atomic_write_text(path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def load_table(gpu_slug: str, op: str, kind: str, folder: str = "tables") -> tuple[pd.DataFrame, dict[str, Any]]:
    """The table :func:`save_table` stored and its provenance; FileNotFoundError when none was."""
    path = _table_path(gpu_slug, op, kind, folder)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded {kind} table for {op} in {path.parent}: run this notebook on a GPU machine "
            "(or the main command there) to record it."
        )
    return pd.read_csv(path), json.loads(path.with_suffix(".json").read_text())


class _PlainNotes(logging.Handler):
    """Prints log records as plain text on the current ``sys.stdout`` (a cell's output),
    as Python's last-resort handler would on stderr; silent once logging is configured."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return  # the root logger has handlers: the record reaches them by propagation
        try:
            print(self.format(record), file=sys.stdout)
        except Exception:  # logging must not raise
            self.handleError(record)


def show_library_notes_as_text() -> None:
    """Route the ``oasr`` loggers' records to the cell's stdout (once)."""
    logger = logging.getLogger("oasr")
    if not any(isinstance(handler, _PlainNotes) for handler in logger.handlers):
        logger.addHandler(_PlainNotes())


if "ipykernel" in sys.modules:  # a notebook kernel: JupyterLab, nbclient, nbmake
    show_library_notes_as_text()
