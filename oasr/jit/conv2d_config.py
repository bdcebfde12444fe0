"""Which CUTLASS instantiation runs an implicit-GEMM conv2d: dtype, activation, tile and cluster.

Each :class:`Conv2dConfig`, with a dtype and an activation, is one JIT module of the conv2d family
(:class:`oasr.jit.core.Variant`: the family's sources built with ``-DOASR_CONV2D_*`` flags, which add
the sm90 launcher ``conv2d_implicit_gemm`` to the direct kernels), built the first time a call needs it.
CUTLASS 4.2 offers one schedule for conv on sm90 (non-persistent: one CTA per output tile, one consumer
warpgroup), so a configuration is a tile and a cluster. :data:`DEFAULT` (128x128x64, no cluster) is
upstream Oasr's untuned sm90 default tile with CUTLASS's K-block of 64; no H200 sweep has chosen
among tiles yet (``dev/conv2d/h200.sh`` times the default against cuDNN).
"""

from __future__ import annotations

from dataclasses import dataclass

from .core import Variant
from .families import SM90A

ACTIVATIONS = (None, "relu", "silu")
"""The epilogues, ``act(acc + bias)`` (a missing bias reads as 0), in the kernel's code order."""

_DTYPE_CODES = {"float16": 1, "bfloat16": 2}
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class Conv2dConfig:
    """One kernel configuration: CTA tile (M pixels, N output channels, K reduction) and cluster (M, N)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1

    @property
    def name(self) -> str:
        """E.g. ``128x128x64_c1x1``."""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}"

    def flags(self) -> tuple[str, ...]:
        return (
            f"-DOASR_CONV2D_TILE_M={self.tile_m}",
            f"-DOASR_CONV2D_TILE_N={self.tile_n}",
            f"-DOASR_CONV2D_TILE_K={self.tile_k}",
            f"-DOASR_CONV2D_CLUSTER_M={self.cluster_m}",
            f"-DOASR_CONV2D_CLUSTER_N={self.cluster_n}",
        )


DEFAULT = Conv2dConfig()
"""The configuration every implicit-GEMM call uses (and the CPU build test builds, as bf16 + ReLU)."""


def implicit_gemm_variant(dtype: str, activation: str | None, config: Conv2dConfig = DEFAULT) -> Variant:
    """The conv2d module for ``dtype`` ("float16", "bfloat16"), ``activation`` (in :data:`ACTIVATIONS`), ``config``."""
    act = ACTIVATIONS.index(activation)
    return Variant(
        name=f"igemm_{_DTYPE_NAMES[dtype]}_{activation or 'none'}_{config.name}",
        cuda_cflags=(
            SM90A,  # wgmma and TMA: the implicit-GEMM modules target sm_90a alone
            f"-DOASR_CONV2D_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_CONV2D_ACTIVATION={act}",
            *config.flags(),
        ),
    )
