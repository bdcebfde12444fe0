"""python -m oasr.jit {list,clear,build}: inspect, clear or fill the JIT cache."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys

from . import env
from .families import FAMILIES

DESCRIPTION = """\
Inspect, clear or fill Oasr's JIT cache.

Kernels compile on first use and are cached by content: one build per module
and key, where the key hashes the module's sources, every header, the nvcc
flags (target architectures included), the nvcc version and the tvm-ffi
version. The cache is ~/.cache/oasr/jit unless OASR_JIT_DIR names another
folder; OASR_CUDA_ARCH_LIST chooses the target architectures. `list` marks
with '*', per family, the build that matches the current sources and flags
(the one a call would load); the others are older builds.
"""


def _current_keys() -> tuple[dict[str, str], str | None]:
    """Each family's current cache key, or ({}, why) when it cannot be computed (no CUDA toolkit)."""
    try:
        return {family.name: family.jit_spec().key for family in FAMILIES}, None
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


def _clear() -> int:
    root = env.jit_cache_dir()
    if root.exists():
        shutil.rmtree(root)
    print(f"cleared {root}")
    return 0


def _build() -> int:
    for family in FAMILIES:
        spec = family.jit_spec()
        info = spec.build()
        state = "cached" if info.cache_hit else f"built in {info.seconds:.1f} s"
        print(f"  {spec.name:<16} {state}  {info.library}")
    return 0


COMMANDS = {
    "list": (_list, "list the builds in the cache, marking the current one of each family"),
    "build": (_build, "build every family's module (skips those already built)"),
    "clear": (_clear, "delete the whole cache folder"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oasr.jit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="{list,build,clear}", required=True)
    for name, (_, text) in COMMANDS.items():
        commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
    args = parser.parse_args(argv)
    return COMMANDS[args.command][0]()


if __name__ == "__main__":
    sys.exit(main())
