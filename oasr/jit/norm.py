"""JIT spec of the norm module (LayerNorm, RMSNorm and their fused residual forms)."""

from . import env
from .core import JitSpec, gen_jit_spec


def gen_norm_module() -> JitSpec:
    return gen_jit_spec(
        "norm",
        [env.OASR_CSRC_DIR / "norm.cu", env.OASR_CSRC_DIR / "norm_jit_binding.cu"],
    )
