#!/usr/bin/env python3
"""The issue's grouped GEMM (G=8 x 1000 rows, N=1024, K=256, bf16) under each configuration named, launched
twice (the second warm), for ncu:

    ncu --clock-control none -k 'regex:GroupGemm' ... python dev/group_gemm/ncu_targets.py [CONFIG ...]

CONFIG: a candidate's name (``gemm_config.GROUP_CANDIDATES``, e.g. ``128x128x64_c1x1_direct_s0``); none: the
direct kernel and CUTLASS's 128x256 cooperative. ``dev/group_gemm/h200.sh ncu`` runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # noqa: F401  (after the checkout is on the path; registers oasr.group_gemm)
from oasr.jit import gemm_config

group_module = sys.modules["oasr.group_gemm"]


def main() -> None:
    names = sys.argv[1:] or [gemm_config.GROUP_DIRECT.name, gemm_config.GROUP_WIDE.name]
    configs = {c.name: c for c in gemm_config.GROUP_CANDIDATES}
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8000, 256, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(8, 1024, 256, device="cuda", generator=g) / 16).to(torch.bfloat16)
    offsets = torch.arange(1, 9, device="cuda", dtype=torch.int32) * 1000
    out = torch.empty(8000, 1024, device="cuda", dtype=torch.bfloat16)
    for name in names:
        for _ in range(2):
            group_module._launch(x, w, offsets, None, out, configs[name], False)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
