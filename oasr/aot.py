"""Every JIT module Oasr has, for prebuilding (``python -m oasr.jit build``) and tests."""

from __future__ import annotations

from .jit.core import JitSpec


def gen_all_modules() -> list[JitSpec]:
    from .jit.activation import gen_activation_module
    from .jit.norm import gen_norm_module
    from .jit.scale import gen_scale_module

    return [
        gen_scale_module(),
        gen_activation_module(),
        gen_norm_module(),
    ]
