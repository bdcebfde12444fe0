"""Where the JIT finds its sources and keeps its builds.

An installed package carries ``csrc/`` and ``include/`` as package data under
``oasr/_data/``; a source checkout (or an editable install) uses the folders at
the repository root. Builds never go into the package: they live in the cache
directory, ``~/.cache/oasr/jit`` unless ``OASR_JIT_DIR`` says otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

OASR_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _source_root() -> Path:
    packaged = OASR_PACKAGE_DIR / "_data"
    if (packaged / "csrc").is_dir():
        return packaged
    return OASR_PACKAGE_DIR.parent


OASR_SOURCE_ROOT = _source_root()
OASR_CSRC_DIR = OASR_SOURCE_ROOT / "csrc"
OASR_INCLUDE_DIR = OASR_SOURCE_ROOT / "include"


def jit_cache_dir() -> Path:
    """The folder holding every JIT build (read from the environment each call)."""
    return Path(os.environ.get("OASR_JIT_DIR", "~/.cache/oasr/jit")).expanduser()


def verbose_build() -> bool:
    """``OASR_JIT_VERBOSE=1`` prints nvcc's command lines and output while building."""
    return os.environ.get("OASR_JIT_VERBOSE", "0") not in ("", "0")
