"""Profile recordings and the profile cache: one folder per GPU and op under ``reports/``.

Layout::

    reports/
      <gpu>/                          provenance.gpu_slug of the GPU: "h200"
        profiles/
          <op>/                       op name: "scale"
            <name>.ncu-rep            one ncu run (a sweep: many launches)
            <name>.json               its sidecar: what it holds and how it was made

``<name>`` is ``<preset>-<source hash, 8>-<digest of its entries, 8>``, so the
same request made again replaces its own files. A sidecar holds::

    {"schema": 1, "op": "scale", "gpu": "h200", "preset": "roofline",
     "source_hash": "<JIT key of the op's module>", "complete": true,
     "settings": {"clock_control": "none", "cache_control": "all"},
     "report": "<name>.ncu-rep", "created_ns": ...,
     "entries": [{"backend": "oasr", "config": {"n": 2048}, "dtype": "float16"}, ...],
     "provenance": {GPU, driver, CUDA runtime, nvcc, ncu version, clock and cache
                    control, git commit, date, op, backends, configs, dtypes, ...}}

One *entry* is one profiled launch: (backend, config, dtype). The cache key of
an entry is (gpu, op, backend, config, dtype, preset, source hash, and the ncu
``settings`` clock and cache control): gpu and op are the folder, the rest is
matched against the sidecars, newest first. The
source hash is the JIT key of the op's module (:func:`source_hash`), which
hashes its sources, every header, the flags and the nvcc version. Replay (no
GPU) matches without the source hash: it returns what was recorded, labelled.

Writes are atomic: ncu writes to a ``.tmp-*`` file in the folder, which is
renamed (``os.replace``) into place before its sidecar is written the same way;
a sidecar only ever points at a complete report. A sweep stopped half-way is
saved with ``"complete": false`` and the entries it finished. Saving a profile
deletes older ones of the same preset and settings whose every entry it covers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import TMP_PREFIX, atomic_write_text, reports_root
from ..harness.ops import OpSpec

SCHEMA = 1

Entry = tuple[str, tuple[tuple[str, int], ...], str]
"""(backend, config as sorted (field, value) pairs, dtype): one profiled launch."""


def make_entry(backend: str, config: dict[str, int], dtype: str) -> Entry:
    return (backend, tuple(sorted((k, int(v)) for k, v in config.items())), dtype)


def entry_label(entry: Entry) -> str:
    """``"oasr n=2048,dtype=float16"``."""
    backend, config, dtype = entry
    fields = ",".join(f"{k}={v}" for k, v in config)
    return f"{backend} {fields},dtype={dtype}"


def source_hash(op: OpSpec) -> str:
    """The kernel-source hash of an op: the JIT key of its family's module (sources, headers, flags, nvcc)."""
    return op.family.jit_spec().key


@dataclass(frozen=True)
class StoredProfile:
    """One stored profile: its report, its sidecar and what the sidecar says."""

    report: Path
    sidecar: Path
    meta: dict[str, Any]

    @property
    def name(self) -> str:
        return self.sidecar.stem

    @property
    def entries(self) -> set[Entry]:
        return {make_entry(e["backend"], e["config"], e["dtype"]) for e in self.meta["entries"]}

    @property
    def provenance(self) -> dict[str, Any]:
        return self.meta.get("provenance", {})


class ProfileStore:
    """The stored profiles of one op on one GPU: ``<root>/<gpu>/profiles/<op>/``."""

    def __init__(self, gpu: str, op: str, root: Path | None = None) -> None:
        self.gpu = gpu
        self.op = op
        self.directory = (root or reports_root()) / gpu / "profiles" / op

    def temp_report_path(self) -> Path:
        """Where ncu should write a new report: a ``.tmp-*`` file in this folder."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / f"{TMP_PREFIX}{uuid.uuid4().hex}.ncu-rep"

    def profiles(self) -> list[StoredProfile]:
        """Every stored profile whose report exists, newest first."""
        found = []
        for sidecar in self.directory.glob("*.json"):
            if sidecar.name.startswith(TMP_PREFIX):
                continue
            try:
                meta = json.loads(sidecar.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            report = sidecar.with_name(meta.get("report", ""))
            if meta.get("schema") == SCHEMA and report.is_file():
                found.append(StoredProfile(report, sidecar, meta))
        return sorted(found, key=lambda p: p.meta.get("created_ns", 0), reverse=True)

    def lookup(
        self,
        wanted: Iterable[Entry],
        preset: str,
        source_hash: str | None,
        settings: dict[str, str] | None = None,
    ) -> tuple[dict[Entry, StoredProfile], list[Entry]]:
        """For each wanted entry, the newest profile holding it; and the entries none holds.

        ``source_hash=None`` matches any source hash and ``settings=None`` any
        ncu settings (replay).
        """
        hits: dict[Entry, StoredProfile] = {}
        candidates = [
            p
            for p in self.profiles()
            if p.meta.get("preset") == preset
            and source_hash in (None, p.meta.get("source_hash"))
            and settings in (None, p.meta.get("settings", {}))
        ]
        missing = []
        for entry in dict.fromkeys(wanted):
            holder = next((p for p in candidates if entry in p.entries), None)
            if holder is None:
                missing.append(entry)
            else:
                hits[entry] = holder
        return hits, missing

    def save(
        self,
        report: Path,
        entries: Iterable[Entry],
        *,
        preset: str,
        source_hash: str,
        provenance: dict[str, Any],
        settings: dict[str, str] | None = None,
        complete: bool = True,
    ) -> StoredProfile:
        """Move ``report`` into the store with a sidecar; prune profiles it supersedes.

        ``settings`` are the ncu settings that are part of the cache key
        (``clock_control``, ``cache_control``).
        """
        entries = sorted(set(entries))
        settings = dict(settings or {})
        if not entries:
            raise ValueError("a stored profile needs at least one entry")
        key = json.dumps([preset, source_hash, sorted(settings.items()), entries])
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        name = f"{preset}-{source_hash[:8]}-{digest}"
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{name}.ncu-rep"
        if Path(report).parent.resolve() != self.directory.resolve():
            staged = self.temp_report_path()
            shutil.copyfile(report, staged)
            report = staged
        os.replace(report, final)
        meta = {
            "schema": SCHEMA,
            "op": self.op,
            "gpu": self.gpu,
            "preset": preset,
            "source_hash": source_hash,
            "settings": settings,
            "complete": complete,
            "report": final.name,
            "created_ns": time.time_ns(),
            "entries": [{"backend": b, "config": dict(c), "dtype": d} for b, c, d in entries],
            "provenance": provenance,
        }
        sidecar = final.with_suffix(".json")
        atomic_write_text(sidecar, json.dumps(meta, indent=1, sort_keys=True) + "\n")
        saved = StoredProfile(final, sidecar, meta)
        self._prune(saved)
        return saved

    def _prune(self, new: StoredProfile) -> None:
        covered = new.entries
        for old in self.profiles():
            same_kind = (old.meta.get("preset"), old.meta.get("settings", {})) == (
                new.meta["preset"],
                new.meta["settings"],
            )
            if old.name != new.name and same_kind and old.entries <= covered:
                old.sidecar.unlink(missing_ok=True)  # sidecar first: never one without its report
                old.report.unlink(missing_ok=True)
