"""Which CUTLASS instantiation runs an implicit-GEMM conv2d: dtype, activation, tile and cluster.

Each :class:`Conv2dConfig`, with a dtype and an activation, is one JIT module of the conv2d family
(:class:`oasr.jit.core.Variant`: the family's sources built with ``-DOASR_CONV2D_*`` flags, which add
the sm90 launcher ``conv2d_implicit_gemm`` to the direct kernels), built the first time a call needs it.
A configuration is a tile, a cluster and the number of consumer warpgroups: CUTLASS's conv kernel on sm90 has
one, ``include/oasr/conv2d/sm90_implicit_gemm.cuh``'s ``TwoConsumerConv`` runs its mainloop with two, each on
half of the tile's pixels. :func:`choose` picks it from the output channels K; the measurements behind it, and
the tiles tried: dev/conv2d/RESULTS.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .compilation_context import SM90A
from .core import Variant
from .enums import enumerator

ACTIVATIONS = (None, "relu", "silu")
"""The epilogues, ``act(acc + bias)`` (a missing bias reads as 0): ``oasr::Activation``'s names."""

_DTYPE_CODES = {"float16": 1, "bfloat16": 2}
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class Conv2dConfig:
    """One kernel configuration: CTA tile (M pixels, N output channels, K reduction), cluster (M, N) and
    consumer warpgroups (1: CUTLASS's conv kernel; 2: ``TwoConsumerConv``, each on half of the tile's pixels)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1
    consumers: int = 1

    @property
    def name(self) -> str:
        """E.g. ``128x128x64_c1x1``, ``128x256x64_c1x1_wg2`` (two consumer warpgroups)."""
        two = "_wg2" if self.consumers == 2 else ""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}{two}"

    def flags(self) -> tuple[str, ...]:
        return (
            f"-DOASR_CONV2D_TILE_M={self.tile_m}",
            f"-DOASR_CONV2D_TILE_N={self.tile_n}",
            f"-DOASR_CONV2D_TILE_K={self.tile_k}",
            f"-DOASR_CONV2D_CLUSTER_M={self.cluster_m}",
            f"-DOASR_CONV2D_CLUSTER_N={self.cluster_n}",
            f"-DOASR_CONV2D_CONSUMERS={self.consumers}",
        )


# The rule, bf16 + bias + ReLU on the H200 (CUDA-graph device time): with all of K in one or two tiles, each CTA gathers
# its im2col rows once for every output channel; two consumer warpgroups hold 128x256 accumulators without spilling.
WIDE = Conv2dConfig(128, 256, 64, 1, 1, 2)
"""K a multiple of 256: conv #2 of the front end (16 x 749 x 39, 256 -> 256) 214.0 us against 245.1 for 64x256."""
TALL = Conv2dConfig(256, 128, 64, 1, 1, 2)
"""Other multiples of 128: K = 128 33.4 us against 39.1 for 128x128."""
NARROW = Conv2dConfig(128, 64, 64, 1, 1)
"""K <= 64, N = K in one tile: 16 x 100 x 40, 64 -> 64, stride 2, 6.8 us against 9.2 for 128x128 (at 670bc72)."""
DEFAULT = Conv2dConfig()
"""128x128 tiles, one consumer warpgroup: any other K."""
PICKS = (DEFAULT, WIDE, TALL, NARROW)
"""What :func:`choose` returns."""


@functools.lru_cache(maxsize=256)  # a model's few shapes, asked on every call
def choose(k: int) -> Conv2dConfig:
    """The configuration for a convolution with ``k`` output channels."""
    if k % 256 == 0:
        return WIDE
    if k % 128 == 0:
        return TALL
    return NARROW if k <= 64 else DEFAULT


def implicit_gemm_variant(dtype: str, activation: str | None, config: Conv2dConfig = DEFAULT) -> Variant:
    """The conv2d module for ``dtype`` ("float16", "bfloat16"), ``activation`` (in :data:`ACTIVATIONS`), ``config``."""
    return Variant(
        name=f"igemm_{_DTYPE_NAMES[dtype]}_{activation or 'none'}_{config.name}",
        cuda_cflags=(
            SM90A,  # wgmma and TMA: the implicit-GEMM modules target sm_90a alone
            f"-DOASR_CONV2D_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_CONV2D_ACTIVATION={enumerator(activation)}",
            *config.flags(),
        ),
    )


def implicit_gemm_variants(tests: bool = False) -> list[Variant]:
    """Every implicit-GEMM module :func:`choose` can pick: each dtype and activation on each tile; ``tests``: those
    the GPU tests run (bf16 with each activation, fp16 with ReLU)."""
    if tests:
        pairs = [("bfloat16", activation) for activation in ACTIVATIONS] + [("float16", "relu")]
    else:
        pairs = [(dtype, activation) for dtype in _DTYPE_NAMES for activation in ACTIVATIONS]
    return [implicit_gemm_variant(dtype, activation, tile) for dtype, activation in pairs for tile in PICKS]
