#!/usr/bin/env python3
"""The gemm family's tail kernel (``include/oasr/gemm/sm90_gemm_tail.cuh``: 128xN tiles whose last k-blocks are
issued as two column parts, so that the first part's epilogue runs under the second part's products) at each tile N
and tail depth of :data:`TILES` (``kTailBlocks`` rewritten in a copy of ``include/``) against cuBLAS and the rule's
picks, bf16, bare, with a bias and with bias + SiLU (needs an sm90 GPU; ``--build`` only nvcc).

    python dev/gemm/tail.py --build     # build the modules and stop
    python dev/gemm/tail.py             # check each against float64 (odd shapes too), then time them

Issue 17 asks bias + SiLU for <= 1.05x bare cuBLAS; on 1500x2048x512 (one wave) the rule's CUTLASS pick took
1.17x (``RESULTS.md``). Timing: as dev/gemm/direct.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)
from dev.gemm.direct import check, launch, report
from dev.tune_kernels import build_all, variant_include, variant_spec
from oasr.jit import gemm_config
from oasr.jit.families import GEMM
from profiling.harness.ops import get_op
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script

TILES = ((192, 2), (192, 4), (256, 2), (256, 4), (128, 2), (128, 4))  # (tile N, tail k-blocks)
EPILOGUES = ("plain", "bias", "silu")
TIMED = ((1500, 2048, 512), (8000, 256, 256), (8000, 1024, 256), (16000, 512, 512))
ODD = ((77, 136, 72), (1000, 1000, 200), (300, 200, 64), (129, 392, 1000))


def spec(dtype: str, epilogue: str, bn: int, tail: int):
    name = f"tail{bn}x{tail}"
    include = variant_include(name, [("gemm/sm90_gemm_tail.cuh", "kTailBlocks", str(tail))])
    config = gemm_config.GemmConfig(128, bn, 64, 1, 1, "tail")
    return variant_spec(GEMM, f"{name}_{epilogue}", include, gemm_config.gemm_variant(dtype, epilogue, config))


def specs(dtype: str) -> dict:
    return {(f"{bn}x{t}", e): spec(dtype, e, bn, t) for bn, t in TILES for e in EPILOGUES}


def rule_specs(dtype: str) -> list:
    """The rule's bare and fused modules for :data:`TIMED` (oasr.gemm would build them one at a time)."""
    found = {}
    for m, n, k in TIMED:
        for epilogue, fused in (("plain", False), ("silu", True)):
            variant = gemm_config.gemm_variant(dtype, epilogue, gemm_config.choose(m, n, k, fused=fused))
            found[variant.name] = GEMM.jit_spec(variant=variant)
    return list(found.values())


def table(m: int, n: int, k: int, modules: dict, timed: bool) -> int:
    dtype = torch.bfloat16
    label = f"{m}x{n}x{k} {dtype}  (rule: bare {gemm_config.choose(m, n, k).name}, fused "
    label += f"{gemm_config.choose(m, n, k, fused=True).name})"
    rtol, atol = get_op("gemm").tolerance(dtype)
    sets = op_input_sets(get_op("gemm"), {"m": m, "n": n, "k": k}, dtype, max_sets=8)
    i, failed = sets[0], 0
    x, w, b = i["x"].double(), i["weight"].double(), i["bias"].double()
    expected = {"plain": x @ w.T, "bias": x @ w.T + b, "silu": F.silu(x @ w.T + b)}
    for (tail, epilogue), module in modules.items():
        i["out"].fill_(float("nan"))
        failed += check(f"tail{tail} {epilogue}", label, launch(module, i, epilogue), expected[epilogue], rtol, atol)
    print(f"{label}: {len(modules)} checked, {failed} wrong", flush=True)
    if not timed:
        return failed
    fns = {
        "cublas": [lambda s=s: torch.mm(s["x"], s["weight"].T, out=s["out"]) for s in sets],
        "rule": [lambda s=s: oasr.gemm(s["x"], s["weight"], out=s["out"]) for s in sets],
        "rule bias+silu": [lambda s=s: oasr.gemm(s["x"], s["weight"], s["bias"], "silu", out=s["out"]) for s in sets],
    }
    for (tail, e), module in modules.items():
        fns[f"tail{tail} {e}"] = [lambda s=s, module=module, e=e: launch(module, s, e) for s in sets]
    report(label, 2 * m * n * k, fns, "cublas")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="build the modules and stop")
    args = parser.parse_args()
    found = specs("bfloat16")
    if args.build:
        build_all([*found.values(), *rule_specs("bfloat16")])
        return 0
    require_cuda()
    modules = {key: s.build_and_load() for key, s in found.items()}
    failed = sum(table(m, n, k, modules, False) for m, n, k in ODD)
    failed += sum(table(m, n, k, modules, True) for m, n, k in TIMED)
    print(f"\n{failed} wrong")
    return 1 if failed else 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
