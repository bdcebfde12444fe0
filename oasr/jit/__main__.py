"""python -m oasr.jit {list,clear,build}: inspect, clear or fill the JIT cache."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import sys
from pathlib import Path

from . import core, env
from .compilation_context import ArchListError
from .families import FAMILIES

DESCRIPTION = """\
Inspect, clear or fill Oasr's JIT cache.

Kernels compile on first use and are cached by content: one build per module
and key, where the key hashes the module's sources, the headers of include/
and csrc/ they include, the nvcc flags (target architectures included, and
NVCC_PREPEND_FLAGS/NVCC_APPEND_FLAGS), the nvcc version, the host compiler and
its version, and the tvm-ffi version.
The cache is ~/.cache/oasr/jit unless OASR_JIT_DIR names another folder;
OASR_CUDA_ARCH_LIST chooses the target architectures. `list` marks with '*',
per family, the build that matches the current sources and flags (the one a
call would load); the others are older builds. A cached library whose size or
hash no longer matches its build record is rebuilt on next use. `clear`
deletes only the files each build's record (oasr-build.json) lists, holding
the lock a build holds: a build in progress, and anything else, is kept.
"""


def _current_keys() -> tuple[dict[str, str], str | None]:
    """Each family's module (its default variant's, for those built per configuration) and current cache key,
    or ({}, why) when it cannot be computed (no CUDA toolkit)."""
    try:
        return {spec.name: spec.key for spec in (family.jit_spec() for family in FAMILIES)}, None
    except Exception as exc:  # no nvcc, no tvm-ffi: list the cache anyway
        return {}, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _list() -> int:
    root = env.jit_cache_dir()
    libraries = sorted(root.glob("*/*/*.so"), key=lambda p: (p.parent.parent.name, -p.stat().st_mtime))
    current, why = _current_keys()
    print(f"JIT cache: {root} ({len(libraries)} builds)")
    if why is not None:
        print(f"  (which build is current is unknown: {why})")
    elif libraries:
        print("  * = current: the build whose key matches today's sources and flags")
    for library in libraries:
        name, key = library.parent.parent.name, library.parent.name
        mark = "*" if current.get(name) == key else " "
        size_kib = library.stat().st_size / 1024
        built = dt.datetime.fromtimestamp(library.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        print(f"{mark} {name:<16} {key}  {size_kib:8.0f} KiB  built {built}")
    built_now = {(p.parent.parent.name, p.parent.name) for p in libraries}
    absent = [name for name, key in current.items() if (name, key) not in built_now]
    if absent:
        print(
            f"  not built for the current sources and flags: {', '.join(absent)} "
            "(built on first use, or now with `python -m oasr.jit build`)"
        )
    return 0


_KEY = re.compile(rf"^[0-9a-f]{{{core.KEY_HEX_DIGITS}}}$")


def _cache_entries(root: Path) -> tuple[list[Path], list[Path]]:
    """What may be the cache's under ``root``: key-named folders (``<module>/<key>/``, a build when its record
    says so, checked under the lock) and lock files (``<module>/<key>.lock``)."""
    builds: list[Path] = []
    locks: list[Path] = []
    for module in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        for entry in sorted(module.iterdir()):
            if entry.is_symlink():
                continue
            if entry.is_dir() and _KEY.match(entry.name):
                builds.append(entry)
            elif entry.is_file() and entry.suffix == ".lock" and _KEY.match(entry.stem):
                locks.append(entry)
    return builds, locks


def _remove_build(build: Path) -> str:
    """Delete, holding its build lock, the files ``build``'s record lists, then the folder and the lock when
    nothing else is left: "cleared", "busy" (a build holds the lock), "unrecorded" or "kept" (other files)."""
    lock = build.parent / f"{build.name}.lock"
    if core.recorded_files(build) is None and not lock.is_file():  # not the cache's: make no lock file beside it
        return "unrecorded"
    try:
        with core.build_lock(lock, timeout_s=0):
            files = core.recorded_files(build)
            if files is None:
                return "unrecorded"
            for name in files:
                path = build / name
                if path.is_symlink() or not path.is_dir():
                    path.unlink(missing_ok=True)
            try:
                build.rmdir()
            except OSError:
                return "kept"
            lock.unlink()  # held: a build waiting for it takes a new one
            return "cleared"
    except TimeoutError:
        return "busy"


def _remove_lock(lock: Path) -> None:
    """Delete a lock file no build folder has, when it is empty (as the cache makes it) and no build holds it."""
    with contextlib.suppress(TimeoutError, OSError), core.build_lock(lock, timeout_s=0):
        if lock.stat().st_size == 0 and not (lock.parent / lock.stem).exists():
            lock.unlink()


def _clear() -> int:
    root = env.jit_cache_dir()
    if not root.exists():
        print(f"nothing to clear: {root} does not exist")
        return 0
    if not root.is_dir():
        print(
            f"python -m oasr.jit clear: OASR_JIT_DIR={root} is a file, not a JIT cache; nothing was deleted.",
            file=sys.stderr,
        )
        return 1
    if not any(root.iterdir()):
        print(f"nothing to clear: {root} is empty")
        return 0
    candidates, locks = _cache_entries(root)
    outcomes = [_remove_build(build) for build in candidates]
    if not locks and set(outcomes) <= {"unrecorded"}:
        print(
            f"python -m oasr.jit clear: {root} does not look like an Oasr JIT cache (no <module>/<key>/ build "
            f"folders with the cache's {core.MANIFEST_NAME} record in it), so nothing was deleted; check OASR_JIT_DIR.",
            file=sys.stderr,
        )
        return 1
    for lock in locks:
        if lock.exists():
            _remove_lock(lock)
    # Module folders, and the cache folder itself, go only when nothing else is left in them.
    for folder in sorted({p.parent for p in candidates + locks}):
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        root.rmdir()
    said = [f"cleared {root}: {outcomes.count('cleared') + outcomes.count('kept')} builds"]
    if outcomes.count("busy"):
        said.append(f"kept {outcomes.count('busy')} being built now (run clear again when they end)")
    if outcomes.count("unrecorded"):
        said.append(
            f"kept {outcomes.count('unrecorded')} folders with no build record (a build that failed or was stopped; "
            "the next build of that key replaces it)"
        )
    if root.exists() and len(said) == 1:
        said.append("other files in it were kept")
    print("; ".join(said))
    return 0


def _prebuilt(scope: str) -> list[core.JitSpec]:
    """What ``build`` builds, once each, family by family: each family's default module (``"default"``); and the
    variants the GPU tests use (``"tests"``); or those and every variant the rules can pick (``"all"``), from each
    family's ``prebuild``."""
    specs: dict[str, core.JitSpec] = {}
    for family in FAMILIES:
        variants = [None]
        if family.prebuild is not None and scope != "default":
            variants += family.prebuild(True)
            if scope == "all":
                variants += family.prebuild(False)
        for variant in variants:
            spec = family.jit_spec(variant=variant)
            specs.setdefault(spec.name, spec)
    return list(specs.values())


def _build(scope: str = "default", jobs: int | None = None) -> int:
    env.ensure_jit_cache_dir()
    specs = _prebuilt(scope)
    # nvcc runs in subprocesses, one core and up to ~2 GB (CUTLASS) each: a job per core.
    return 1 if core.build_in_parallel(specs, jobs or min(len(specs), os.cpu_count() or 1)) else 0


COMMANDS = {
    "list": (_list, "list the builds in the cache, marking the current one of each family"),
    "build": (
        _build,
        "build every family's module (--tests: and the variants the GPU tests use; --all: and every one "
        "the rules can pick), one per core at a time (skips those already built)",
    ),
    "clear": (_clear, "delete the builds and lock files the cache made (other files are kept)"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oasr.jit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="{list,build,clear}", required=True)
    parsers = {}
    for name, (_, text) in COMMANDS.items():
        parsers[name] = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
    scope = parsers["build"].add_mutually_exclusive_group()
    scope.add_argument(
        "--tests", action="store_const", const="tests", dest="scope", help="also the GPU tests' variants"
    )
    scope.add_argument(
        "--all",
        action="store_const",
        const="all",
        dest="scope",
        help="also every variant the rules can pick, and the tests'",
    )
    parsers["build"].add_argument("--jobs", type=int, help="builds at a time (default: one per core)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            return _build(args.scope or "default", args.jobs)
        return COMMANDS[args.command][0]()
    except (env.JitCacheDirError, ArchListError) as exc:  # a setting to change: its sentence, not a traceback
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
