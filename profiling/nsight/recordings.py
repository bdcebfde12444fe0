"""Profile recordings and the profile cache: one folder per GPU and op under ``reports/``.

Layout::

    reports/
      <gpu>/                          provenance.gpu_slug of the GPU: "h200"
        profiles/
          <op>/                       op name: "scale"
            <name>.ncu-rep            one ncu run (a sweep: many launches); committed large ones are
                                      packed, <name>.ncu-rep.gz (profiling.nsight.packing)
            <name>.json               its sidecar: what it holds and how it was made
            <name>.lines.csv          source preset only: its per-line table (profiling.nsight.source)

``<name>`` is ``<preset>-<source hash, 8>-<digest of its entries, 8>``, so the
same request made again replaces its own files. A sidecar holds::

    {"schema": 1, "op": "scale", "gpu": "h200", "preset": "roofline",
     "source_hash": "<JIT key of the op's module>", "complete": true,
     "settings": {"clock_control": "none", "cache_control": "all"},
     "report": "<name>.ncu-rep", "report_bytes": <size>, "report_sha256": "<hex>",
     "created_ns": ...,
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

Nothing read back is trusted: a sidecar that is not a JSON object of the shape
above (a list, a missing field, a string where a number belongs) and a report
whose size or SHA-256 no longer match its sidecar (a packed one is unpacked no
further than that size) are left out with one
:class:`DamagedRecordingWarning` naming the file. The sweep
(:mod:`profiling.nsight.sweep`) also reads each report before storing it and
before using it: one that is not whole (cut short: its blocks run past its end,
:func:`profiling.nsight.reader.container_problem`), cannot be read, or lacks a
launch for an entry its sidecar claims, is damaged too (re-profiled live, left
out in replay).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import reprlib
import shutil
import time
import uuid
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import TMP_PREFIX, atomic_write_text, cached_digest, file_digest, reports_root
from ..harness.ops import OpSpec
from . import packing

SCHEMA = 1
LINES_SUFFIX = ".lines.csv"
"""A ``source``-preset report's per-line table is kept beside it as ``<name>.lines.csv`` (:mod:`.source`)."""

Entry = tuple[str, tuple[tuple[str, int], ...], str]
"""(backend, config as sorted (field, value) pairs, dtype): one profiled launch."""


def make_entry(backend: str, config: dict[str, int], dtype: str) -> Entry:
    return (backend, tuple(sorted((k, int(v)) for k, v in config.items())), dtype)


def entry_label(entry: Entry) -> str:
    """``"oasr n=2048,dtype=float16"``."""
    backend, config, dtype = entry
    fields = ",".join(f"{k}={v}" for k, v in config)
    return f"{backend} {fields},dtype={dtype}"


class DamagedRecordingWarning(UserWarning):
    """A stored profile (its sidecar or its report) is damaged and is left out."""


_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 80, 80


def _shown(value: Any) -> str:
    """``value``'s repr, cut short: a sidecar's values go into one-line warnings, whatever their size or depth."""
    return _SHOWN.repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


MAX_DEPTH = 8
"""A sidecar nests at most this deep: twice its documented shape's 4 (provenance, configs, a config, a value), so
that no value deep enough to exhaust Python's stack (json and repr recurse per level) reaches a report."""


def _depth(value: Any) -> int:
    """How deep ``value``'s lists and objects nest (0 for a scalar), without recursing."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level + 1)
            pending += [(child, level + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def sidecar_problem(meta: Any) -> str | None:
    """What is wrong with a sidecar's content (None when it has the documented shape)."""
    if not isinstance(meta, dict):
        return f"it holds a JSON {type(meta).__name__}, not an object"
    if _depth(meta) > MAX_DEPTH:
        return f"it nests {_depth(meta)} levels deep, more than the {MAX_DEPTH} a sidecar may"
    if meta.get("schema") != SCHEMA:
        return f"its schema is {_shown(meta.get('schema'))}, not {SCHEMA}"
    for key in ("preset", "source_hash", "report"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            return f"its {_shown(key)} is {_shown(meta.get(key))}, not a non-empty string"
    report = meta["report"]
    if Path(report).name != report or report in (".", "..") or not report.endswith(".ncu-rep"):
        return f"its 'report' {_shown(report)} is not the name of an .ncu-rep file in its folder"
    if not _is_str_map(meta.get("settings", {})):
        return f"its 'settings' {_shown(meta.get('settings'))} are not a map of strings"
    if not isinstance(meta.get("complete", True), bool):
        return f"its 'complete' {_shown(meta.get('complete'))} is not true or false"
    for key in ("created_ns", "report_bytes"):
        if key in meta and not (_is_int(meta[key]) and meta[key] >= 0):
            return f"its {_shown(key)} {_shown(meta[key])} is not a non-negative integer"
    if "report_sha256" in meta and not (
        isinstance(meta["report_sha256"], str) and _SHA256.fullmatch(meta["report_sha256"])
    ):
        return f"its 'report_sha256' {_shown(meta['report_sha256'])} is not a SHA-256 hex digest"
    if not isinstance(meta.get("provenance", {}), dict):
        return f"its 'provenance' {_shown(meta.get('provenance'))} is not an object"
    entries = meta.get("entries")
    if not isinstance(entries, list) or not entries:
        return f"its 'entries' {_shown(entries)} are not a non-empty list"
    for entry in entries:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("backend", "dtype")):
            return f"its entry {_shown(entry)} lacks a backend or dtype string"
        config = entry.get("config")
        if not isinstance(config, dict) or not all(isinstance(k, str) and _is_int(v) for k, v in config.items()):
            return f"its entry {_shown(entry)} has a config that is not a map of integers"
    return None


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
    """The stored profiles of one op on one GPU: ``<root>/<gpu>/<kind>/<op>/``.

    ``kind`` is ``"profiles"`` for op sweeps; region profiles (:mod:`profiling.nsight.region`) are kept apart, under
    ``"regions"``, with the region's name as ``op``, so that every folder of ``profiles/`` stays an op of the harness.
    """

    def __init__(self, gpu: str, op: str, root: Path | None = None, kind: str = "profiles") -> None:
        self.gpu = gpu
        self.op = op
        self.directory = (root or reports_root()) / gpu / kind / op

    def temp_report_path(self) -> Path:
        """Where ncu should write a new report: a ``.tmp-*`` file in this folder."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / f"{TMP_PREFIX}{uuid.uuid4().hex}.ncu-rep"

    def scan(self) -> tuple[list[StoredProfile], dict[Path, str]]:
        """(every intact stored profile, newest first; {file: what is wrong} for each damaged one).

        Checks each sidecar's shape and, where the sidecar records them, its
        report's size and SHA-256 (hashes are cached by path, mtime and size).
        """
        found: list[StoredProfile] = []
        damaged: dict[Path, str] = {}
        for sidecar in sorted(self.directory.glob("*.json")):
            if sidecar.name.startswith(TMP_PREFIX):
                continue  # being written
            try:
                meta = json.loads(sidecar.read_text())
            except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # nesting past the stack too
                damaged[sidecar] = f"it is not readable JSON ({type(exc).__name__}: {exc})"
                continue
            problem = sidecar_problem(meta)
            if problem is not None:
                damaged[sidecar] = problem
                continue
            report = sidecar.with_name(meta["report"])
            problem = self._report_problem(report, meta)
            if problem is not None:
                damaged[report if packing.exists(report) else sidecar] = problem
                continue
            found.append(StoredProfile(report, sidecar, meta))
        return sorted(found, key=lambda p: p.meta.get("created_ns", 0), reverse=True), damaged

    @staticmethod
    def _report_problem(report: Path, meta: Mapping[str, Any]) -> str | None:
        try:
            report = packing.readable(report, meta.get("report_bytes"))
        except packing.UnpackError as exc:
            return f"its packed report {exc}"
        try:
            stat = report.stat()
        except OSError:
            return f"its report {report.name} is missing"
        if not report.is_file():
            return f"its report {report.name} is not a file"
        if "report_bytes" in meta and stat.st_size != meta["report_bytes"]:
            return f"it is {stat.st_size} bytes, but its sidecar recorded {meta['report_bytes']}"
        if "report_sha256" in meta:
            try:
                _, digest = cached_digest(report)
            except OSError as exc:
                return f"it cannot be read ({exc})"
            if digest != meta["report_sha256"]:
                return "its SHA-256 no longer matches the one its sidecar recorded"
        return None

    def profiles(self) -> list[StoredProfile]:
        """Every intact stored profile, newest first; one :class:`DamagedRecordingWarning` per damaged file."""
        found, damaged = self.scan()
        for path, problem in damaged.items():
            warn_damaged(path, problem)
        return found

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
        packing.packed(final).unlink(missing_ok=True)  # an older packed copy of the same name
        size, digest = file_digest(final)
        meta = {
            "schema": SCHEMA,
            "op": self.op,
            "gpu": self.gpu,
            "preset": preset,
            "source_hash": source_hash,
            "settings": settings,
            "complete": complete,
            "report": final.name,
            "report_bytes": size,
            "report_sha256": digest,
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
        for old in self.scan()[0]:
            same_kind = (old.meta.get("preset"), old.meta.get("settings", {})) == (
                new.meta["preset"],
                new.meta["settings"],
            )
            if old.name != new.name and same_kind and old.entries <= covered:
                old.sidecar.unlink(missing_ok=True)  # sidecar first: never one without its report
                packing.remove(old.report)
                old.report.with_name(old.name + LINES_SUFFIX).unlink(missing_ok=True)


def warn_damaged(path: Path, problem: str, stacklevel: int = 3) -> None:
    """One :class:`DamagedRecordingWarning` naming ``path``."""
    warnings.warn(
        DamagedRecordingWarning(
            f"damaged recording {path}: {problem}. It is left out: a live run profiles its entries again, "
            "replay shows the rest without them."
        ),
        stacklevel=stacklevel,
    )
