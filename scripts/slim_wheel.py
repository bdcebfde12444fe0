"""Slim a wheel to what a device call needs: keep or drop its files, strip binaries, rewrite RECORD to match.

The lent H200 takes at most 64 MiB a call with the tree, and some wheels are mostly what the project never
loads (Ray's Java worker, FlashInfer's generated kernels). What stays is installable as is: RECORD lists
each kept file with its new hash and size, and ``*.dist-info/`` is always kept.

    python3 scripts/slim_wheel.py WHEEL DEST --drop REGEX [--strip PATH ...]     # keep all but REGEX
    python3 scripts/slim_wheel.py WHEEL DEST --keep-prefix PREFIX [PREFIX ...]   # keep only these
    python3 scripts/slim_wheel.py WHEEL DEST --keep-json KEEP.json --distribution NAME
      (KEEP.json from scripts/peer_wheels_probe.py: "dirs", every file directly in them but JIT sources,
       and "files", kept as listed)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

JIT_SOURCES = re.compile(r"\.(cu|cuh|h|hpp|hh|c|cc|cpp|cxx|inl|inc|jinja|ptx)$")
"""Sources a JIT compiles: kept only where a ``files`` list names them."""


def keep_from_json(path: Path, distribution: str) -> Callable[[str], bool]:
    entry = json.loads(path.read_text())[distribution]
    dirs, files = set(entry["dirs"]), set(entry["files"])

    def keep(name: str) -> bool:
        folder = name.rpartition("/")[0] + "/"
        return name in files or (folder in dirs and not JIT_SOURCES.search(name))

    return keep


def _strip(data: bytes) -> bytes:
    with tempfile.NamedTemporaryFile(delete=False) as tmp:
        tmp.write(data)
    try:
        subprocess.run(["strip", "--strip-unneeded", tmp.name], check=True)
        return Path(tmp.name).read_bytes()
    finally:
        os.unlink(tmp.name)


def slim(source: Path, dest: Path, keep: Callable[[str], bool], strip: set[str]) -> Path:
    """Write ``dest/<source's name>`` with the files ``keep`` accepts (and ``*.dist-info/``), ``strip`` ones
    stripped of symbols; print what it kept."""
    out = dest / source.name
    kept = dropped = 0
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        info_dir = record_name.rpartition("/")[0] + "/"
        record = []
        for info in zin.infolist():
            if info.filename == record_name or info.is_dir():
                continue
            if not (info.filename.startswith(info_dir) or keep(info.filename)):
                dropped += info.file_size
                continue
            data = zin.read(info)
            if info.filename in strip:
                data = _strip(data)
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{info.filename},sha256={digest},{len(data)}")
            kept += len(data)
        record.append(f"{record_name},,")
        zout.writestr(zin.getinfo(record_name), "\n".join(record) + "\n")
    print(
        f"{out}: {out.stat().st_size / 1e6:.1f} MB (from {source.stat().st_size / 1e6:.1f} MB; "
        f"{dropped / 1e6:.0f} MB of files dropped, {kept / 1e6:.0f} MB kept, uncompressed)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("dest", type=Path)
    rules = parser.add_mutually_exclusive_group(required=True)
    rules.add_argument("--drop", metavar="REGEX", help="drop the files whose path matches")
    rules.add_argument("--keep-prefix", nargs="+", metavar="PREFIX", help="keep only paths with these prefixes")
    rules.add_argument("--keep-json", type=Path, metavar="FILE", help="keep what the probe's JSON lists")
    parser.add_argument("--distribution", help="with --keep-json: the distribution's entry")
    parser.add_argument("--strip", nargs="+", default=[], metavar="PATH", help="strip these binaries' symbols")
    args = parser.parse_args(argv)
    if args.drop:
        pattern = re.compile(args.drop)
        keep = lambda name: not pattern.match(name)  # noqa: E731
    elif args.keep_prefix:
        keep = lambda name: name.startswith(tuple(args.keep_prefix))  # noqa: E731
    else:
        if not args.distribution:
            parser.error("--keep-json needs --distribution")
        keep = keep_from_json(args.keep_json, args.distribution)
    args.dest.mkdir(parents=True, exist_ok=True)
    slim(args.wheel, args.dest, keep, set(args.strip))
    return 0


if __name__ == "__main__":
    sys.exit(main())
