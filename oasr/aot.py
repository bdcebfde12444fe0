"""Every JIT module Oasr has, for prebuilding (``python -m oasr.jit build``) and tests."""

from __future__ import annotations

from .jit.core import JitSpec


def gen_all_modules() -> list[JitSpec]:
    from .jit.scale import gen_scale_module

    return [
        gen_scale_module(),
    ]
