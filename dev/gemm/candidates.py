"""The gemm and bmm families' search space: the CUTLASS configurations ``tune.py`` times next to the rule's picks.

Production ships only what ``oasr/jit/gemm_config.py``'s rule picks; these are the configurations measured against
them (their figures: ``RESULTS.md``), as production's own ``GemmConfig``.
"""

from __future__ import annotations

from oasr.jit.gemm_config import GemmConfig as C

WAVE_CANDIDATES: tuple[C, ...] = (
    # 8000x256x256 (126 tiles of 128x128, 4 K blocks each: launch and prologue bound)
    C(128, 128, 64, 1, 2, "nonpersistent"),  # A multicast to both N tiles of a row
    C(128, 128, 128, 1, 1, "nonpersistent"),  # half the K blocks, so half the pipeline round trips
    C(64, 128, 64, 1, 1, "nonpersistent", 4),  # 252 CTAs, two resident per SM (4 stages: 96 KB)
    C(64, 128, 64, 1, 2, "nonpersistent", 4),  # the same with A multicast
    C(64, 256, 64, 1, 1, "nonpersistent", 4),  # 125 CTAs of wgmma's widest N
    # 1500x2048x512 (192 tiles of 128x128: 1.45 waves)
    C(128, 192, 64, 1, 1, "cooperative"),  # 12 x 11 = 132 tiles: one wave
    C(128, 192, 64, 2, 1, "cooperative"),  # the same with B multicast
    C(128, 192, 64, 1, 1, "nonpersistent"),  # one wave, one warpgroup per tile
    C(64, 192, 64, 1, 1, "pingpong"),  # 24 x 11 = 264 tiles: two per SM, one per warpgroup
)
"""Issue 17's candidates for the two shapes below 0.95x cuBLAS at 7d8b06f (``tune.py --wave``)."""

CANDIDATES: tuple[C, ...] = (
    C(128, 128, 64, 1, 1, "cooperative"),
    C(128, 128, 64, 2, 1, "cooperative"),
    C(128, 256, 64, 1, 1, "cooperative"),
    C(128, 256, 64, 2, 1, "cooperative"),
    C(256, 128, 64, 1, 2, "cooperative"),
    C(64, 128, 64, 1, 1, "pingpong"),
    C(64, 256, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 2, 1, "pingpong"),
    C(64, 128, 64, 1, 1, "nonpersistent"),
    C(128, 128, 64, 1, 1, "nonpersistent"),
    C(64, 64, 64, 1, 1, "pingpong"),
    *WAVE_CANDIDATES,
)
"""The sweep's bare gemm configurations (``tune.py``)."""

FUSED_CANDIDATES: tuple[C, ...] = (
    C(64, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "cooperative"),
    C(128, 256, 64, 2, 1, "cooperative"),
    C(128, 256, 64, 1, 1, "cooperative"),
    C(128, 128, 64, 2, 1, "cooperative"),
    C(128, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "nonpersistent"),
)
"""The sweep's bias + SiLU configurations."""

BMM_CANDIDATES: tuple[C, ...] = (
    C(64, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "cooperative"),
    C(64, 64, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "pingpong"),
    C(64, 128, 64, 1, 1, "nonpersistent"),
    C(128, 128, 64, 1, 1, "nonpersistent"),
)
"""The sweep's bmm configurations, each with B K-major and N-major."""
