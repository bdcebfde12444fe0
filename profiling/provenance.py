"""Where a measurement came from: recorded with every profile and benchmark result.

The same fields go into profile recordings (``reports/<gpu>/profiles/``) and
benchmark CSVs, so any figure can be traced to the GPU, software and commit
that produced it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

import oasr
from oasr.jit.core import nvcc_version

REPO_ROOT = Path(__file__).resolve().parent.parent


def gpu_slug(name: str) -> str:
    """A folder name for a GPU model: ``"NVIDIA H200"`` -> ``"h200"``."""
    slug = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-")
    return slug or "unknown-gpu"


@functools.cache
def git_commit() -> str:
    """The checkout's commit, with ``+dirty`` when files differ; ``"unknown"`` outside git.

    ``OASR_GIT_COMMIT`` names it where the tree has no ``.git`` (a copy sent to a GPU machine).
    """
    if os.environ.get("OASR_GIT_COMMIT"):
        return os.environ["OASR_GIT_COMMIT"]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"


@functools.cache
def collect(device_index: int = 0) -> dict[str, Any]:
    """Provenance of the current process's GPU and software (GPU fields empty without one)."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "oasr_version": oasr.__version__,
        "torch_version": torch.__version__,
        "cuda_runtime": torch.version.cuda or "none",
        "gpu": "none",
        "gpu_slug": "none",
        "compute_capability": "",
        "driver": "none",
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device_index)
        info.update(
            gpu=props.name,
            gpu_slug=gpu_slug(props.name),
            compute_capability=f"{props.major}.{props.minor}",
            driver=_driver_version(),
        )
    try:
        info["nvcc"] = ".".join(map(str, nvcc_version()[0]))
    except (RuntimeError, OSError, subprocess.CalledProcessError):
        info["nvcc"] = "none"
    return info
