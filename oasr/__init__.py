"""Oasr: CUDA kernels for speech-recognition encoders (Conformer-style).

Kernels are JIT-compiled on first use (nvcc + ninja, loaded through tvm-ffi) and
cached under ``~/.cache/oasr/jit``. Every op takes channels-last tensors and an
optional destination ``out=``. The families and their ops are declared once, in
:mod:`oasr.jit.families`; ``__all__`` is built from that list.
"""

from .activation import bias_activation as bias_activation
from .activation import glu as glu
from .activation import swish as swish
from .attention import attention as attention
from .attention import rel_pos_attention as rel_pos_attention
from .bmm import bmm as bmm
from .conv1d import depthwise_conv1d as depthwise_conv1d
from .conv1d import depthwise_conv1d_step as depthwise_conv1d_step
from .conv1d import fold_batch_norm as fold_batch_norm
from .conv2d import conv2d as conv2d
from .conv2d import conv2d_subsampling as conv2d_subsampling
from .conv2d import pack_subsampling_weight2 as pack_subsampling_weight2  # a utility beside the op (not in __all__)
from .gemm import gemm as gemm
from .gemm import gemm_glu as gemm_glu
from .group_gemm import group_gemm as group_gemm
from .group_gemm import group_gemm_check as group_gemm_check  # a utility beside the op (not in __all__)
from .jit.families import FAMILIES
from .norm import add_layer_norm as add_layer_norm
from .norm import add_rms_norm as add_rms_norm
from .norm import layer_norm as layer_norm
from .norm import rms_norm as rms_norm
from .plan import gemm_plan as gemm_plan  # a utility beside the gemm ops (not in __all__)
from .scale import scale as scale

# isort: split
from . import models as models  # (the encoder composes the ops above)

__version__ = "0.1.0"
__all__ = [op for family in FAMILIES for op in family.ops]
