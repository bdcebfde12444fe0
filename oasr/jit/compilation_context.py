"""Which CUDA architectures the JIT compiles for.

By default the architectures of the GPUs present (sm90 and newer get the ``a``
suffix, which enables wgmma, TMA and the other arch-specific instructions).
``OASR_CUDA_ARCH_LIST="8.0 9.0a"`` overrides detection. A machine with no GPU
and no override builds for ``9.0a`` (the H200) and says so once, so that CPU
machines can compile and test every module.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable

logger = logging.getLogger("oasr.jit")

DEFAULT_ARCHS: frozenset[tuple[int, str]] = frozenset({(9, "0a")})
SM90A = "-gencode=arch=compute_90a,code=sm_90a"
"""The one target of the wgmma/TMA (CUTLASS) modules, whatever other GPUs the JIT builds for."""
_ARCH_PATTERN = re.compile(r"^(\d+)\.(\d+[af]?)$")
_warned_default = False


class ArchListError(ValueError):
    """``OASR_CUDA_ARCH_LIST`` is not a list of CUDA architectures; the message says what to write."""


def parse_arch_list(text: str) -> set[tuple[int, str]]:
    """Parse ``"8.0 9.0a"`` (spaces, commas or semicolons between entries).

    Raises
    ------
    ArchListError
        When an entry is not of the form ``MAJOR.MINOR`` with an optional
        ``a``/``f`` suffix, or when the list is empty.
    """
    entries = [e for e in re.split(r"[\s,;]+", text.strip()) if e]
    if not entries:
        raise ArchListError(
            "OASR_CUDA_ARCH_LIST is set but empty; give architectures such as "
            "'8.0 9.0a', or unset it to detect the GPUs present."
        )
    archs = set()
    for entry in entries:
        match = _ARCH_PATTERN.match(entry)
        if match is None:
            raise ArchListError(
                f"OASR_CUDA_ARCH_LIST entry {entry!r} is not a CUDA architecture; "
                "expected entries such as '8.0 9.0a 10.0a'."
            )
        archs.add((int(match.group(1)), match.group(2)))
    return archs


def _detect_gpu_archs() -> set[tuple[int, str]]:
    try:
        import torch
    except ImportError:
        return set()
    if not torch.cuda.is_available():
        return set()
    archs = set()
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        archs.add((major, f"{minor}a" if major >= 9 else str(minor)))
    return archs


class CompilationContext:
    """The set of target architectures, as ``(major, minor_with_suffix)`` pairs."""

    def __init__(self) -> None:
        global _warned_default
        override = os.environ.get("OASR_CUDA_ARCH_LIST")
        if override is not None:
            self.TARGET_CUDA_ARCHS = parse_arch_list(override)
            return
        self.TARGET_CUDA_ARCHS = _detect_gpu_archs()
        if not self.TARGET_CUDA_ARCHS:
            self.TARGET_CUDA_ARCHS = set(DEFAULT_ARCHS)
            if not _warned_default:
                _warned_default = True
                logger.warning(
                    "oasr: no CUDA GPU found and OASR_CUDA_ARCH_LIST is unset; "
                    "building for sm_90a (set OASR_CUDA_ARCH_LIST to change)."
                )

    def get_nvcc_flags_list(self, supported_major_versions: Iterable[int] | None = None) -> list[str]:
        """``-gencode`` flags for the targets whose major version is supported.

        Raises
        ------
        RuntimeError
            When no target architecture has a supported major version.
        """
        archs = self.TARGET_CUDA_ARCHS
        if supported_major_versions is not None:
            supported = list(supported_major_versions)
            archs = {a for a in archs if a[0] in supported}
            if not archs:
                raise RuntimeError(
                    f"No supported CUDA architectures found for major versions {supported}"
                    f" (targets: {self.arch_names()})."
                )
        return [f"-gencode=arch=compute_{m}{n},code=sm_{m}{n}" for m, n in sorted(archs)]

    def arch_names(self) -> list[str]:
        return [f"sm_{m}{n}" for m, n in sorted(self.TARGET_CUDA_ARCHS)]


@functools.cache
def current_compilation_context() -> CompilationContext:
    """The process's targets, read once, on first use (so importing oasr.jit touches neither CUDA nor the env)."""
    return CompilationContext()
