"""Odd shapes through every conv1d path, for compute-sanitizer (memcheck / racecheck).

    compute-sanitizer --tool memcheck python3 dev/conv1d/sanitize.py
    compute-sanitizer --tool racecheck python3 dev/conv1d/sanitize.py --variant s3

``--variant NAME`` runs a variant of ``dev/conv1d/bench.py`` (its ``VARIANTS``) instead of
the production module; ``bench.py --sections sanitize`` runs both tools on production.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr.conv1d as conv1d
from dev.conv1d.bench import VARIANTS, build
from oasr.jit.families import CONV1D
from profiling.compare import stand_in


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="prod", choices=list(VARIANTS))
    args = parser.parse_args()
    stand_ins = contextlib.ExitStack()  # held until main returns
    stand_ins.enter_context(stand_in(CONV1D, build([args.variant])[args.variant]))
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for b, t, c, k, pad in (
            (3, 37, 33, 31, (30, 0)),
            (2, 5, 66, 15, (40, 41)),
            (1, 1, 7, 63, 31),
            (2, 50, 130, 7, 3),
            (2, 300, 72, 31, 15),  # staged: several tiles, a partial channel tile
            (2, 300, 64, 15, 7),
        ):
            x = torch.randn(b, t, c, device="cuda", dtype=dtype)
            w = torch.randn(k, c, device="cuda", dtype=dtype)
            bias = torch.randn(c, device="cuda", dtype=dtype)
            mask = torch.rand(b, t, device="cuda") > 0.3
            conv1d.depthwise_conv1d(x, w, bias, pad, "silu", mask=mask)
            conv1d.depthwise_conv1d(x[:, :, 1:], w[:, 1:].contiguous(), bias[1:], pad)  # scalar path
            state = torch.zeros(b, k - 1, c, device="cuda", dtype=dtype)
            for length in (1, max(k - 2, 1), 37, 150):
                conv1d.depthwise_conv1d_step(x[:, :length], state, w, bias, "gelu")
    torch.cuda.synchronize()
    print(f"sanitize run done ({args.variant})")


if __name__ == "__main__":
    main()
