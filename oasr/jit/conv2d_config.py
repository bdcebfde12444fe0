"""Which CUTLASS instantiation runs an implicit-GEMM conv2d: dtype, activation, tile and cluster.

Each :class:`Conv2dConfig`, with a dtype and an activation, is one JIT module of the conv2d family
(:class:`oasr.jit.core.Variant`: the family's sources built with ``-DOASR_CONV2D_*`` flags, which add
the sm90 launcher ``conv2d_implicit_gemm`` to the direct kernels), built the first time a call needs it.
A configuration is a tile, a cluster and the number of consumer warpgroups: CUTLASS 4.2's conv kernel
on sm90 has one (non-persistent: one CTA per output tile; its dispatch policy refuses the cooperative and
ping-pong schedules), and ``include/oasr/conv2d/sm90_implicit_gemm.cuh``'s ``TwoConsumerConv`` runs the same
mainloop with two, each on half of the tile's pixels. :func:`choose` picks it from the output channels K.

The rule is read off ``dev/conv2d/bench.py``'s tile table on an H200 (bf16 + bias + ReLU, CUDA-graph device
time, every candidate timed in turn on each implicit-GEMM shape of the sweep). The first run timed the front
end's conv #2 (16 x 749 x 39, 256 -> 256, 3x3 stride 2) with one consumer warpgroup: 64x256 tiles, 211 us,
against 246 us for 128x128 (upstream Oasr's sm90 default tile with CUTLASS's K-block of 64): with N = K = 256
in one tile, each CTA gathers its im2col rows once for every output channel instead of once per 128 of them;
128x256 took 2831 us (one warpgroup would hold 256 fp32 accumulators per thread: they spill). With two
consumer warpgroups (``dev/conv2d/results/two_consumer_h200.txt``), 128x256 tiles took conv #2 from 231.3 to
209.6 us in one table and from 218.5-227.5 to 195.9-207.9 us in three timings of the two alone; in the bench
with them as the rule's pick (``bench_two_consumer_h200.txt``), 214.0 against 245.1 us in the table and 190.9 us
in the harness's row, where 64x256 had taken 211.6-228.2 us in nine harness timings of that session. They also
led the other K = 256 shapes (26.5 against 30.6 us at 8 x 150 x 40, 110.4 against 122.5 at 16 x 100 x 40
stride 1), and 256x128 tiles led the K = 128 shape (33.4 against 39.1 us for 128x128). 128x64 tiles still win
both K = 64 shapes (16 x 100 x 40, 64 -> 64, stride 2: 6.7 us against 8.9 for the best two-consumer tile; at
batch 32: 12.0 against 13.2).

So K a multiple of 256 takes 128x256 tiles and other multiples of 128 take 256x128, each on two consumer
warpgroups; K <= 64 takes 128x64 tiles (N = K in one tile, no half-empty 128-wide one; only K = 64 was
timed) and anything else 128x128.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .core import Variant
from .enums import enumerator
from .families import SM90A

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


DEFAULT = Conv2dConfig()
"""128x128 tiles, one consumer warpgroup: K above 64 and not a multiple of 128."""
WIDE = Conv2dConfig(128, 256, 64, 1, 1, 2)
"""128x256 tiles, two consumer warpgroups: K a multiple of 256 (conv #2 of the front end)."""
TALL = Conv2dConfig(256, 128, 64, 1, 1, 2)
"""256x128 tiles, two consumer warpgroups: other multiples of 128."""
NARROW = Conv2dConfig(128, 64, 64, 1, 1)
"""128x64 tiles: K <= 64 (the K = 64 convs of upstream Oasr's list: 6.8 and 12.0 us against 9.2 and 17.2 for
128x128, ``dev/conv2d/results/670bc72/bench_h200.txt``; as the pick at abcec41, ``bench_h200.txt``: 6.8 and
12.0 us)."""
PICKS = (DEFAULT, WIDE, TALL, NARROW)
"""What :func:`choose` returns (``dev/conv2d/bench.py --build`` builds them)."""


@functools.lru_cache(maxsize=256)  # a model's few shapes, asked on every call
def choose(k: int) -> Conv2dConfig:
    """The configuration for a convolution with ``k`` output channels (the H200 table's rule; see the module
    docstring): 128x256 tiles when ``k`` is a multiple of 256, 256x128 for other multiples of 128 (both on two
    consumer warpgroups), 128x64 when ``k`` <= 64, otherwise 128x128."""
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
