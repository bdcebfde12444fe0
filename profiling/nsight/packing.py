"""Committed recordings kept gzip-compressed: ``<name>.ncu-rep.gz`` beside its sidecar.

An ``.ncu-rep`` compresses 3-7x, and the large ones (source-preset reports carry the kernels' sources and
SASS; a grouped GEMM's roofline sweep holds hundreds of launches) would otherwise push the repository past
what a device run carries (64 MiB). A recording's sidecar, digest and name stay those of the plain report;
:func:`readable` gives the path to read, decompressing a packed report once into ``~/.cache/oasr/ncu-reports``
(``$OASR_REPORT_CACHE``), where the copy keeps the report's name in a folder named by the packed file's digest;
:func:`stored` lists a folder's reports, plain or packed, by their plain names. Unpacking stops at the size the
report's sidecar records (a gzip bomb fills nothing), and a packed file that cannot be unpacked leaves nothing.

    python -m profiling.nsight.packing reports/h200     # pack every report of 0.5 MB or more under it
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import shutil
import sys
import zlib
from pathlib import Path

from ..files import TMP_PREFIX, cached_digest

PACKED_SUFFIX = ".gz"
MIN_PACKED_BYTES = 500_000
"""Reports from this size on are packed: every committed one (0.7-4.4 MB plain); at 2 MB the eleven below it
still took 9.6 of the tree's 50 MB, and the tree and a notebook run's wheels no longer fitted in a device run."""


MAX_UNPACKED_BYTES = 256 << 20
"""A packed report read without its sidecar's size unpacks to at most this: twenty times the largest committed
recording (11.9 MB), so that a gzip bomb stops here rather than at a full disk."""
BLOCK_BYTES = 1 << 20


class UnpackError(ValueError):
    """A packed report is not gzip, is cut short, or unpacks past the size it should have."""


def cache_dir() -> Path:
    return Path(os.environ.get("OASR_REPORT_CACHE") or Path.home() / ".cache" / "oasr" / "ncu-reports")


def packed(report: Path) -> Path:
    """Where ``report`` (``<name>.ncu-rep``) is kept packed: ``<name>.ncu-rep.gz``."""
    return report.with_name(report.name + PACKED_SUFFIX)


def exists(report: Path) -> bool:
    """Whether ``report`` is stored, plain or packed."""
    return report.is_file() or packed(report).is_file()


def stored(folder: Path, pattern: str = "*") -> list[Path]:
    """The reports under ``folder`` whose names match ``pattern`` (``<pattern>.ncu-rep``), plain or packed, each by
    its plain path (read it through :func:`readable`), sorted."""
    plain = set(folder.glob(f"{pattern}.ncu-rep"))
    plain |= {p.with_name(p.name.removesuffix(PACKED_SUFFIX)) for p in folder.glob(f"{pattern}.ncu-rep{PACKED_SUFFIX}")}
    return sorted(p for p in plain if not p.name.startswith(TMP_PREFIX))


def readable(report: str | Path, expected_bytes: int | None = None) -> Path:
    """``report`` itself when it is a plain file, else its packed form decompressed into the cache (once per
    packed content, under the report's own name); a report stored neither way comes back unchanged, for the
    caller's "missing" error.

    Parameters
    ----------
    report : str or Path
        The plain path, ``<name>.ncu-rep``.
    expected_bytes : int, optional
        The report's size as its sidecar records it: unpacking stops one byte past it (else past
        :data:`MAX_UNPACKED_BYTES`).

    Raises
    ------
    UnpackError
        When the packed file is not gzip, is cut short or unpacks past the limit; nothing is left in the cache.
    """
    report = Path(report)
    source = packed(report)
    if report.is_file() or not source.is_file():
        return report
    target = cache_dir() / cached_digest(source)[1][:16] / report.name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f"{TMP_PREFIX}{os.getpid()}-{target.name}")
        if expected_bytes is None:
            limit = (MAX_UNPACKED_BYTES, "a report may hold")
        else:
            limit = (expected_bytes, "its sidecar records")
        try:
            _unpack(source, staged, *limit)
            os.replace(staged, target)
        except BaseException:
            staged.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                target.parent.rmdir()  # made for this copy, and empty
            raise
    return target


def _unpack(source: Path, target: Path, limit: int, why: str) -> None:
    """Decompress ``source`` into ``target`` a block at a time, stopping past ``limit`` bytes (``why``: its origin)."""
    written = 0
    try:
        with gzip.open(source, "rb") as src, target.open("wb") as dst:
            while block := src.read(BLOCK_BYTES):
                written += len(block)
                if written > limit:
                    raise UnpackError(f"{source.name} expands past the {limit} bytes {why}")
                dst.write(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise UnpackError(f"{source.name} cannot be unpacked ({exc})") from None


def remove(report: Path) -> None:
    """Delete ``report``, plain and packed."""
    report.unlink(missing_ok=True)
    packed(report).unlink(missing_ok=True)


def pack(folder: Path, min_bytes: int = MIN_PACKED_BYTES) -> list[Path]:
    """Pack every plain ``.ncu-rep`` of ``min_bytes`` or more under ``folder`` (the rest stay plain); the
    packed files written."""
    done = []
    for report in sorted(folder.rglob("*.ncu-rep")):
        if report.name.startswith(TMP_PREFIX) or report.stat().st_size < min_bytes:
            continue
        target = packed(report)
        staged = target.with_name(TMP_PREFIX + target.name)
        with report.open("rb") as src, gzip.open(staged, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(staged, target)
        report.unlink()
        done.append(target)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pack large Nsight Compute recordings (gzip) before committing.")
    parser.add_argument("folder", type=Path, help="a reports folder, e.g. reports/h200")
    parser.add_argument("--min-bytes", type=int, default=MIN_PACKED_BYTES)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"packing: {args.folder} is not a folder", file=sys.stderr)
        return 2
    for path in pack(args.folder, args.min_bytes):
        print(f"packed {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
