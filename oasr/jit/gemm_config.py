"""Which CUTLASS instantiation runs a gemm or bmm: tile, cluster, schedule and stages per shape.

Each :class:`GemmConfig`, with a dtype, an epilogue and B's layout, is one JIT module
(:class:`oasr.jit.core.Variant`), built the first time a call needs it. :func:`choose` picks
the configuration from the problem's shape.

The rule below is an untuned heuristic (not yet measured on the H200): ``dev/gemm/tune.py`` times
every candidate in :data:`CANDIDATES` next to cuBLAS on the issue's shapes, and its table is what
should replace this rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .core import Variant

SCHEDULES = ("cooperative", "pingpong", "nonpersistent")
"""Cooperative: two warpgroups share a 128-row tile. Ping-pong: each warpgroup owns a tile and one's
epilogue overlaps the other's math. Non-persistent: one CTA per tile, no scheduler loop."""

EPILOGUES = ("plain", "bias", "relu", "gelu", "gelu_tanh", "silu")
"""The gemm epilogues: the accumulators as they are, or ``act(acc + bias)`` (a missing bias reads as 0)."""

DTYPES = ("float16", "bfloat16")
"""The storage dtypes the kernels are built for (torch's names)."""
_DTYPE_CODES = {"float16": 1, "bfloat16": 2}
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16"}

NUM_SMS_H200 = 132


@dataclass(frozen=True)
class GemmConfig:
    """One kernel configuration: CTA tile (M, N, K), cluster (M, N), schedule and pipeline stages (0: auto)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: str = "cooperative"
    stages: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"GemmConfig: schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "cooperative" and self.tile_m % 128:
            raise ValueError("GemmConfig: the cooperative schedule needs a tile_m that is a multiple of 128")

    @property
    def name(self) -> str:
        """E.g. ``128x128x64_c1x1_cooperative_s0``."""
        tile = f"{self.tile_m}x{self.tile_n}x{self.tile_k}"
        return f"{tile}_c{self.cluster_m}x{self.cluster_n}_{self.schedule}_s{self.stages}"

    def flags(self) -> tuple[str, ...]:
        return (
            f"-DOASR_GEMM_TILE_M={self.tile_m}",
            f"-DOASR_GEMM_TILE_N={self.tile_n}",
            f"-DOASR_GEMM_TILE_K={self.tile_k}",
            f"-DOASR_GEMM_CLUSTER_M={self.cluster_m}",
            f"-DOASR_GEMM_CLUSTER_N={self.cluster_n}",
            f"-DOASR_GEMM_SCHEDULE={SCHEDULES.index(self.schedule)}",
            f"-DOASR_GEMM_STAGES={self.stages}",
        )


CANDIDATES: tuple[GemmConfig, ...] = (
    GemmConfig(128, 128, 64, 1, 1, "cooperative"),
    GemmConfig(128, 128, 64, 2, 1, "cooperative"),
    GemmConfig(128, 256, 64, 1, 1, "cooperative"),
    GemmConfig(128, 256, 64, 2, 1, "cooperative"),
    GemmConfig(256, 128, 64, 1, 2, "cooperative"),
    GemmConfig(64, 128, 64, 1, 1, "pingpong"),
    GemmConfig(64, 256, 64, 1, 1, "pingpong"),
    GemmConfig(128, 128, 64, 1, 1, "pingpong"),
    GemmConfig(128, 128, 64, 2, 1, "pingpong"),
    GemmConfig(64, 128, 64, 1, 1, "nonpersistent"),
    GemmConfig(128, 128, 64, 1, 1, "nonpersistent"),
    GemmConfig(64, 64, 64, 1, 1, "pingpong"),
)
"""What ``dev/gemm/tune.py`` times on the H200."""

SMALL = GemmConfig(64, 128, 64, 1, 1, "pingpong")
MEDIUM = GemmConfig(128, 128, 64, 1, 1, "cooperative")
WIDE = GemmConfig(128, 256, 64, 2, 1, "cooperative")
DEFAULT = MEDIUM
"""The family's representative build (prebuilding, the CPU build test)."""


_SPEED = ((SMALL, 0.8), (MEDIUM, 1.0), (WIDE, 1.1))
"""Assumed relative throughput of a CTA per tile element: larger tiles re-read less from shared memory."""


@functools.lru_cache(maxsize=4096)  # a model's few shapes, asked on every call
def choose(m: int, n: int, k: int, batch: int = 1) -> GemmConfig:
    """The configuration for an ``[m, k] x [k, n]`` problem, ``batch`` times (untuned heuristic).

    The one of SMALL (64x128 ping-pong), MEDIUM (128x128 cooperative) and WIDE (128x256
    cooperative, 2x1 clusters) whose wave-quantised work is least: waves of tiles over the
    H200's 132 SMs, times the tile's area, over its assumed speed (:data:`_SPEED`). Small
    problems get the small tiles (more CTAs in flight), large ones the wide tiles.
    """

    def cost(candidate: tuple[GemmConfig, float]) -> float:
        config, speed = candidate
        tiles = batch * -(-m // config.tile_m) * -(-n // config.tile_n)
        return -(-tiles // NUM_SMS_H200) * config.tile_m * config.tile_n / speed

    return min(_SPEED, key=cost)[0]


def gemm_variant(dtype: str, epilogue: str, config: GemmConfig) -> Variant:
    """The gemm module for ``dtype`` ("float16", "bfloat16"), ``epilogue`` (of :data:`EPILOGUES`) and ``config``."""
    return Variant(
        name=f"{_DTYPE_NAMES[dtype]}_{epilogue}_{config.name}",
        cuda_cflags=(
            f"-DOASR_GEMM_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_GEMM_EPILOGUE={EPILOGUES.index(epilogue)}",
            "-DOASR_GEMM_B_NMAJOR=0",
            *config.flags(),
        ),
    )


def bmm_variant(dtype: str, b_n_major: bool, config: GemmConfig) -> Variant:
    """The bmm module for ``dtype``, B's layout (``[batch, K, N]`` when ``b_n_major``) and ``config``."""
    return Variant(
        name=f"{_DTYPE_NAMES[dtype]}_{'nn' if b_n_major else 'nt'}_{config.name}",
        cuda_cflags=(
            f"-DOASR_GEMM_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_GEMM_B_NMAJOR={int(b_n_major)}",
            *config.flags(),
        ),
    )
