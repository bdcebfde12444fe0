#!/usr/bin/env python3
"""Launches one GEMM shape under several (configuration, epilogue) pairs, each twice, for ncu to set side by side.

    python dev/gemm/ncu_compare.py --build 16000x512x512 direct:plain pingpong:plain direct:silu pingpong:silu
    ncu --section SpeedOfLight ... python dev/gemm/ncu_compare.py 16000x512x512 direct:plain ...

A pair names its configuration as ``direct`` (``gemm_config.DIRECT``) or a schedule of 128x128x64 tiles
(``pingpong``, ``cooperative``), or a whole ``GemmConfig.name`` (``128x192x64_c1x1_nonpersistent_s0``); the
epilogue is "plain", "bias" or an activation after the bias. ``--build`` builds the modules in parallel and stops.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dev.tune_kernels import build_all
from oasr.jit import gemm_config
from oasr.jit.families import GEMM
from profiling.harness.ops import get_op
from profiling.harness.timing import op_input_sets

gemm_module = sys.modules["oasr.gemm"]


def config_of(name: str) -> gemm_config.GemmConfig:
    """``direct``, a schedule of 128x128x64 tiles, or a whole ``GemmConfig.name``."""
    if name == "direct":
        return gemm_config.DIRECT
    if "_" not in name:
        return gemm_config.GemmConfig(128, 128, 64, 1, 1, name)
    tile, cluster, schedule, stages = name.split("_")
    tm, tn, tk = (int(v) for v in tile.split("x"))
    cm, cn = (int(v) for v in cluster[1:].split("x"))
    return gemm_config.GemmConfig(tm, tn, tk, cm, cn, schedule, int(stages[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="build the modules and stop (no GPU needed)")
    parser.add_argument("shape", help="MxNxK")
    parser.add_argument("pairs", nargs="+", metavar="CONFIG:EPILOGUE")
    args = parser.parse_args()
    m, n, k = (int(v) for v in args.shape.split("x"))
    pairs = [(config_of(c), e) for c, e in (p.split(":") for p in args.pairs)]
    if args.build:
        variants = {gemm_config.gemm_variant("bfloat16", e, c) for c, e in pairs}
        build_all([GEMM.jit_spec(variant=v) for v in variants])
        return
    i = op_input_sets(get_op("gemm"), {"m": m, "n": n, "k": k}, torch.bfloat16, max_sets=1)[0]
    for config, epilogue in pairs:
        bias = None if epilogue == "plain" else i["bias"]
        act = None if epilogue in ("plain", "bias") else epilogue
        for _ in range(2):
            gemm_module._linear(i["x"], i["weight"], bias, act, i["out"], config)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
