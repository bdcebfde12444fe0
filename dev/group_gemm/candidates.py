"""The group_gemm family's search space: the configurations ``bench.py`` times next to the rule's picks.

Production ships only what ``gemm_config.choose_group`` picks; these are the direct kernel and CUTLASS's persistent
schedules measured against them (figures: ``RESULTS.md``), as production's own ``GemmConfig``.
"""

from __future__ import annotations

from oasr.jit.gemm_config import GROUP_PICKS
from oasr.jit.gemm_config import GemmConfig as C

CANDIDATES: tuple[C, ...] = (
    *GROUP_PICKS,
    C(128, 128, 64, 1, 1, "cooperative"),  # a runner-up of the first H200 sweep
    C(128, 256, 64, 2, 1, "cooperative"),  # larger clusters for the 8 x 1000 rows
    C(128, 256, 64, 1, 2, "cooperative"),
)
"""The picks, then the other configurations of the sweep."""
