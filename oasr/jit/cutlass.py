"""CUTLASS's C++ headers, from the ``nvidia-cutlass`` wheel (``cutlass_library/source``).

The families built on CUTLASS add its include folders and two flags: ``-DOASR_CUTLASS_VERSION``, so
that a different CUTLASS gives a different cache key (the key hashes flags, not external headers), and
``-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1``: CUTLASS then calls the driver's TMA descriptor encoders by
name instead of looking them up on every launch, and ``include/oasr/common/cutlass_launch.cuh`` defines
them in each module (no ``-lcuda``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from pathlib import Path


@functools.cache
def cutlass_root() -> Path:
    """``cutlass_library/source`` of the installed ``nvidia-cutlass``; RuntimeError with the fix if absent."""
    spec = importlib.util.find_spec("cutlass_library")
    root = Path(spec.origin).parent / "source" if spec is not None and spec.origin else None
    if root is None or not (root / "include" / "cutlass" / "cutlass.h").is_file():
        raise RuntimeError(
            "oasr JIT: the gemm and bmm kernels need CUTLASS's headers, which come with the "
            "`nvidia-cutlass` package: `pip install nvidia-cutlass==4.2.0.0`."
        )
    return root


def include_paths() -> list[Path]:
    """CUTLASS's ``include`` and ``tools/util/include`` folders."""
    root = cutlass_root()
    return [root / "include", root / "tools" / "util" / "include"]


@functools.cache
def flags() -> tuple[str, ...]:
    """``-DOASR_CUTLASS_VERSION=<the wheel's version>`` (part of every CUTLASS module's cache key) and the
    direct driver calls (the module docstring)."""
    cutlass_root()
    return (
        f"-DOASR_CUTLASS_VERSION={importlib.metadata.version('nvidia-cutlass')}",
        "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
    )
