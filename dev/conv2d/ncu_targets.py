#!/usr/bin/env python3
"""The issue's conv #1 and conv #2 (B16 T1500 F80 d256, bf16 + bias + ReLU), each launched twice, for ncu.

    ncu --clock-control none -k regex:'FewTaps|device_kernel' ... python dev/conv2d/ncu_targets.py
    ncu --clock-control none -k regex:Subsampling ... python dev/conv2d/ncu_targets.py --front

(``dev/conv2d/h200.sh ncu`` runs the first: the few-taps direct kernel and CUTLASS's implicit GEMM, whose
kernel is ``cutlass::device_kernel``; ``front`` and ``front-source`` the second: the fused front end, once.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, device="cuda", generator=g)).to(torch.bfloat16)

    if sys.argv[1:] == ["--front"]:
        x, w1, b1 = randn(16, 1500, 80), randn(256, 1, 3, 3, scale=1 / 3), randn(256, scale=0.1)
        oasr.conv2d_subsampling(x, w1, b1, randn(256, 256, 3, 3, scale=1 / 48), randn(256, scale=0.1))
        torch.cuda.synchronize()
        return

    x1, w1, b1 = randn(16, 1500, 80, 1), randn(256, 3, 3, 1, scale=1 / 3), randn(256, scale=0.1)
    x2, w2, b2 = randn(16, 749, 39, 256), randn(256, 3, 3, 256, scale=1 / 48), randn(256, scale=0.1)
    for x, w, b in ((x1, w1, b1), (x2, w2, b2)):
        for _ in range(2):
            oasr.conv2d(x, w, b, 2, 0, "relu")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
