#!/usr/bin/env python3
"""The issue's grouped GEMM (G=8 x 1000 rows, N=1024, K=256, bf16) under each configuration named, launched
twice (the second warm), for ncu:

    ncu --clock-control none -k 'regex:GroupGemm' ... python dev/group_gemm/ncu_targets.py [CONFIG ...]

CONFIG: a candidate's name (``candidates.py``, e.g. ``128x128x64_c1x1_direct_s0``); none: the
direct kernel and CUTLASS's 128x256 cooperative. ``dev/group_gemm/h200.sh ncu`` runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # noqa: F401  (after the checkout is on the path; registers oasr.group_gemm)
from dev.group_gemm.candidates import CANDIDATES
from oasr.jit import gemm_config
from profiling.harness.ops import group_gemm as op_module

group_module = sys.modules["oasr.group_gemm"]


def main() -> None:
    names = sys.argv[1:] or [gemm_config.DIRECT.name, gemm_config.GROUP_WIDE.name]
    configs = {c.name: c for c in CANDIDATES}
    issue_shape = op_module.GROUP_GEMM_SWEEP[0]  # the harness op's inputs, as bench.py times them
    i = op_module.GROUP_GEMM.make_inputs(issue_shape, torch.bfloat16, torch.device("cuda"), 0)
    for name in names:
        for _ in range(2):
            group_module._launch(i["x"], i["weight"], i["offsets"], None, i["out"], configs[name], False)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
