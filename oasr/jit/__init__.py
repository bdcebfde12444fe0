"""JIT compilation of Oasr's CUDA modules (nvcc + ninja, loaded through tvm-ffi)."""

from __future__ import annotations

from .compilation_context import CompilationContext, current_compilation_context
from .core import BuildInfo, JitCompileError, JitSpec, gen_jit_spec

__all__ = [
    "BuildInfo",
    "CompilationContext",
    "JitCompileError",
    "JitSpec",
    "current_compilation_context",
    "gen_jit_spec",
]
