"""The workbench's recorded tables, and whether this machine runs live or replays.

Each step of a notebook runs live on a GPU machine and stores what it measured
under ``reports/<gpu>/tables/`` (CSV with a ``.json`` provenance sidecar). On a
machine without a GPU the same steps read those recordings back.
``OASR_WORKBENCH_MODE=live|replay`` forces a mode.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..files import REPLAY_GPU, atomic_write_text, reports_root
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
    """The ``reports/<gpu>/`` folder this machine writes (the recordings' GPU when replaying)."""
    return collect()["gpu_slug"] if workbench_mode() == LIVE else REPLAY_GPU


def _table_path(gpu_slug: str, op: str, kind: str) -> Path:
    return reports_root() / gpu_slug / "tables" / f"{op}.{kind}.csv"


def save_table(df: pd.DataFrame, gpu_slug: str, op: str, kind: str, meta: dict[str, Any]) -> Path:
    """Store a measured table with its provenance (CSV + ``.json`` sidecar, atomic)."""
    path = _table_path(gpu_slug, op, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, df.to_csv(index=False))
    atomic_write_text(path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def load_table(gpu_slug: str, op: str, kind: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    path = _table_path(gpu_slug, op, kind)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded {kind} table for {op} in {path.parent}: run this notebook on a GPU machine "
            "(or the main command there) to record it."
        )
    return pd.read_csv(path), json.loads(path.with_suffix(".json").read_text())
