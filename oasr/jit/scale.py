"""JIT spec of the scale module."""

from . import env
from .core import JitSpec, gen_jit_spec


def gen_scale_module() -> JitSpec:
    return gen_jit_spec(
        "scale",
        [env.OASR_CSRC_DIR / "scale.cu", env.OASR_CSRC_DIR / "scale_jit_binding.cu"],
    )
