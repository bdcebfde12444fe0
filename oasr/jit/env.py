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


class JitCacheDirError(RuntimeError):
    """The cache folder cannot hold builds (a file, read-only, not creatable); the message names OASR_JIT_DIR."""


def jit_cache_dir() -> Path:
    """The folder holding every JIT build (read from the environment each call).

    Raises
    ------
    JitCacheDirError
        When ``OASR_JIT_DIR`` is set but empty (which would make the cache the current folder).
    """
    text = os.environ.get("OASR_JIT_DIR", "~/.cache/oasr/jit")
    if not text.strip():
        raise JitCacheDirError(
            f"oasr JIT: OASR_JIT_DIR is set but empty ({text!r}), which would put builds in the current folder; "
            "set it to a folder you can write to, or unset it to use ~/.cache/oasr/jit."
        )
    return Path(text).expanduser()


def cache_dir_error(root: Path, reason: str) -> JitCacheDirError:
    """One sentence naming the folder, why it is unusable and the fix (OASR_JIT_DIR)."""
    if "OASR_JIT_DIR" in os.environ:
        where = f"OASR_JIT_DIR={root}"
    else:
        where = f"{root} (the default; OASR_JIT_DIR chooses another)"
    return JitCacheDirError(
        f"oasr JIT: the cache folder {where} cannot hold builds ({reason}); "
        "set OASR_JIT_DIR to a folder you can write to."
    )


def ensure_jit_cache_dir() -> Path:
    """The cache folder, created if needed; :class:`JitCacheDirError` when it is a file or not writable."""
    root = jit_cache_dir()
    if root.exists() and not root.is_dir():
        raise cache_dir_error(root, "it is a file, not a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_dir_error(root, exc.strerror or type(exc).__name__) from exc
    if not os.access(root, os.W_OK | os.X_OK):
        raise cache_dir_error(root, "it is read-only")
    return root


def verbose_build() -> bool:
    """``OASR_JIT_VERBOSE=1`` prints nvcc's command lines and output while building."""
    return os.environ.get("OASR_JIT_VERBOSE", "0") not in ("", "0")
