"""Which GPUs a sweep runs on: ``"all"``, a count, or a list of device ids, checked against what is here.

GPUs are found with ``nvidia-smi -L`` (no CUDA context is created in the calling
process, so the workers can still choose theirs with ``CUDA_VISIBLE_DEVICES``),
and with ``torch.cuda.device_count()`` where nvidia-smi is missing. A device id is
what ``CUDA_VISIBLE_DEVICES`` takes: an index as the driver counts them (within the
caller's own ``CUDA_VISIBLE_DEVICES``, if it has one), or a ``GPU-...`` UUID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

import torch

GpuSpec = str | int | Sequence[int | str] | None
"""``"all"``, a count (``2``), a list of ids (``[0, 1]``, ``"0,1"``), or None (the caller's default)."""


def discover() -> list[str]:
    """The device ids of the GPUs this process may use (``[]`` on a machine without one)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [part.strip() for part in visible.split(",") if part.strip()]
        # CUDA stops at the first invalid entry ("-1", "", a bad UUID): count only what it would use.
        valid = []
        for part in ids:
            if not (part.isdigit() or part.startswith(("GPU-", "MIG-"))):
                break
            valid.append(part)
        return valid[: _driver_count()] if valid else []
    return [str(i) for i in range(_driver_count())]


def name_of(device: str) -> str:
    """The model name of the GPU with device id ``device`` (``"NVIDIA H200"``), from nvidia-smi without
    creating a CUDA context; ``""`` when it cannot be asked."""
    smi = shutil.which("nvidia-smi")
    if not smi or not device:
        return ""
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader", "-i", device], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""


def _driver_count() -> int:
    """GPUs the driver lists (``nvidia-smi -L``; torch's count where nvidia-smi is missing or fails)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            out = None
        if out is not None and out.returncode == 0:
            return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve(gpus: GpuSpec, available: Sequence[str] | None = None) -> list[str]:
    """The device ids ``gpus`` names, checked against ``available`` (default: :func:`discover`).

    Parameters
    ----------
    gpus : "all", int, sequence of int or str, or a comma-separated str
        ``"all"``: every GPU here; ``n``: the first ``n``; a list: exactly those ids.
    available : sequence of str, optional
        The ids to choose from; tests pass fake ones.

    Returns
    -------
    list of str
        One id per GPU, each once, in the order given.

    Raises
    ------
    ValueError
        ``gpus`` is malformed, asks for more GPUs than there are, names one that is not here,
        or there is no GPU at all.
    """
    if gpus is None or (isinstance(gpus, str) and gpus.strip().lower() == "all"):
        here = list(discover() if available is None else available)
        if not here:
            raise ValueError(
                "gpus='all' found no GPU here (nvidia-smi -L lists none, and torch sees none); "
                "run on a GPU machine, or pass gpus=None to run in this process."
            )
        return here
    if isinstance(gpus, bool):
        raise TypeError(f"gpus must be 'all', a count or a list of GPU ids, not {gpus!r}")
    if isinstance(gpus, int):
        if gpus < 1:
            raise ValueError(f"gpus={gpus}: a count of GPUs must be at least 1")
        here = list(discover() if available is None else available)
        if gpus > len(here):
            raise ValueError(f"gpus={gpus}, but this machine has {len(here)} GPU(s) ({', '.join(here) or 'none'})")
        return here[:gpus]
    if isinstance(gpus, str):
        text = gpus.strip()
        if text.isdigit():
            return resolve(int(text), available)
        gpus = [part.strip() for part in text.split(",")]
    if not isinstance(gpus, Sequence):
        raise TypeError(f"gpus must be 'all', a count or a list of GPU ids, not {type(gpus).__name__}")
    ids = [str(g).strip() for g in gpus]
    if not ids or any(not i for i in ids):
        raise ValueError(f"gpus={list(gpus)!r}: the list of GPU ids is empty or has an empty entry")
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus={ids}: a GPU is listed twice (one worker per GPU, so no two share one)")
    if available is not None or all(i.isdigit() for i in ids):
        here = list(discover() if available is None else available)
        unknown = [i for i in ids if i not in here]
        if unknown:
            raise ValueError(f"gpus={ids}: no GPU {', '.join(unknown)} here; there are {', '.join(here) or 'none'}")
    return ids
