"""Oasr: CUDA kernels for speech-recognition encoders (Conformer-style).

Kernels are JIT-compiled on first use (nvcc + ninja, loaded through tvm-ffi) and
cached under ``~/.cache/oasr/jit``. Every op takes channels-last tensors and an
optional destination ``out=``.
"""

from .activation import glu, swish
from .norm import add_layer_norm, add_rms_norm, layer_norm, rms_norm
from .scale import scale

__version__ = "0.1.0"
__all__ = ["add_layer_norm", "add_rms_norm", "glu", "layer_norm", "rms_norm", "scale", "swish"]
