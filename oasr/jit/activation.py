"""JIT spec of the activation module (GLU, Swish)."""

from . import env
from .core import JitSpec, gen_jit_spec


def gen_activation_module() -> JitSpec:
    return gen_jit_spec(
        "activation",
        [env.OASR_CSRC_DIR / "activation.cu", env.OASR_CSRC_DIR / "activation_jit_binding.cu"],
    )
