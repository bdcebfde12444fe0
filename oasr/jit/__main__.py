"""``python -m oasr.jit {list,clear,build}``: inspect, clear or fill the JIT cache."""

from __future__ import annotations

import argparse
import shutil
import sys

from . import env
from .families import FAMILIES


def _list() -> int:
    root = env.jit_cache_dir()
    libraries = sorted(root.glob("*/*/*.so"))
    print(f"JIT cache: {root} ({len(libraries)} builds)")
    for library in libraries:
        size_kib = library.stat().st_size / 1024
        print(f"  {library.parent.parent.name:<16} {library.parent.name}  {size_kib:8.0f} KiB")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oasr.jit", description=__doc__)
    parser.add_argument("command", choices=["list", "clear", "build"])
    args = parser.parse_args(argv)
    return {"list": _list, "clear": _clear, "build": _build}[args.command]()


if __name__ == "__main__":
    sys.exit(main())
