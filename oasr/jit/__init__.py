"""JIT compilation of Oasr's CUDA modules (nvcc + ninja, loaded through tvm-ffi)."""

from __future__ import annotations

import functools

from .compilation_context import CompilationContext
from .core import BuildInfo, JitCompileError, JitSpec, gen_jit_spec

__all__ = ["BuildInfo", "CompilationContext", "JitCompileError", "JitSpec", "gen_jit_spec"]


@functools.cache
def _context() -> CompilationContext:
    return CompilationContext()


def __getattr__(name: str) -> CompilationContext:
    # Built on first use, so importing oasr.jit never touches CUDA or the environment.
    if name == "current_compilation_context":
        return _context()
    raise AttributeError(f"module 'oasr.jit' has no attribute {name!r}")
