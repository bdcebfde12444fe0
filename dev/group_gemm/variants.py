#!/usr/bin/env python3
"""The direct grouped GEMM against edited copies of its header, in one run (needs an sm90 GPU).

    python dev/group_gemm/variants.py PATCH[@COMMIT] ...   # check, then time next to production
    python dev/group_gemm/variants.py --ncu PATCH ...   # for ncu: each module twice, then the dense kernels

A variant is PATCH (a diff of ``include/``, named after its file) applied to a copy of ``include/``, or to
``include/`` of COMMIT for ``PATCH@COMMIT``, or ``NAME=INCLUDE_DIR``, an edited copy made by hand; it is built
as the bf16 direct module (``gemm_config.DIRECT``, no bias). A variant named ``diag-...`` is a diagnostic
(it leaves out work, e.g. the stores): it is timed but not checked. The others are checked against the float64
loop first. Timing: the harness's CUDA-graph replay, interleaved with production and one dense GEMM over all
rows (cuBLAS, and ``oasr.gemm``'s CUTLASS kernel), on the first three shapes of the harness op's sweep (the
issue's 8 x 1000 rows, N=1024, K=256, and upstream's two short ones) and on the issue's 8000 rows as one group.
The patches ``RESULTS.md`` reports apply to older headers: ``git show COMMIT:PATH > x.patch``, then ``x.patch@BASE``
with the commit named beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path; registers oasr.group_gemm)
from dev.tune_kernels import build_all, patched_include, variant_spec
from oasr.jit import gemm_config
from oasr.jit.families import GROUP_GEMM
from profiling.harness.correctness import compare
from profiling.harness.ops import group_gemm as op_module
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

ONE_GROUP = {"g": 1, "m": 8000, "n": 1024, "k": 256, "spread": 1}
"""The issue's rows as one group: the kernels on a dense problem, beside cuBLAS and oasr.gemm (CUTLASS)."""
group_module = sys.modules["oasr.group_gemm"]
OP = op_module.GROUP_GEMM


def include_dir(arg: str) -> tuple[str, Path]:
    """The variant's name and its ``include/``: NAME=INCLUDE_DIR as given, else PATCH[@COMMIT] applied."""
    if "=" in arg:
        name, folder = arg.split("=", 1)
        return name, Path(folder)
    patch, _, commit = arg.partition("@")
    return patched_include(Path(patch), commit or None)


def modules(args: list[str]) -> dict[str, object]:
    """Production's module and each variant's, built in parallel (a failed build ends the run)."""
    variant = gemm_config.group_gemm_variant("bfloat16", gemm_config.DIRECT)
    specs = {"prod": GROUP_GEMM.jit_spec(variant=variant)}
    for arg in args:
        name, folder = include_dir(arg)
        specs[name] = variant_spec(GROUP_GEMM, name, folder, variant)
    build_all(list(specs.values()))
    return {name: spec.load() for name, spec in specs.items()}


def launch(module: object, i: dict) -> torch.Tensor:
    empty = torch.empty(0, dtype=torch.uint8, device="cuda")
    flag = group_module._error_flag()
    module.group_gemm(i["out"][None], i["x"][None], i["weight"], i["offsets"], None, empty, flag, True)
    return i["out"]


def main() -> int:
    require_cuda("dev/group_gemm/variants.py")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ncu", action="store_true", help="launch each module twice on the issue's shape, then the dense kernels"
    )
    parser.add_argument("variants", nargs="*", metavar="PATCH[@COMMIT] | NAME=INCLUDE_DIR")
    args = parser.parse_args()
    found = modules(args.variants)
    if args.ncu:
        i = OP.make_inputs(op_module.GROUP_GEMM_SWEEP[0], torch.bfloat16, torch.device("cuda"), 0)
        for module in found.values():
            for _ in range(2):
                launch(module, i)
        one = OP.make_inputs(ONE_GROUP, torch.bfloat16, torch.device("cuda"), 0)
        launch(found["prod"], one)  # the same rows as one group, then two dense kernels over them
        torch.matmul(one["x"], one["weight"][0].T, out=one["out"])  # cuBLAS
        oasr.gemm(one["x"], one["weight"][0], out=one["out"])  # CUTLASS
        torch.cuda.synchronize()
        return 0
    failed = 0
    for config in (*op_module.GROUP_GEMM_SWEEP[:3], ONE_GROUP):
        sets = op_input_sets(OP, config, torch.bfloat16, max_sets=8)
        expected = OP.reference(sets[0])
        rtol, atol = OP.tolerance(torch.bfloat16)
        for name, module in found.items():
            if name.startswith("diag-"):
                continue
            sets[0]["out"].fill_(float("nan"))
            check = compare(launch(module, sets[0]), expected, rtol, atol)
            if not check["passed"]:
                failed += 1
                print(f"{OP.config_label(config)} {name}: WRONG {check}", flush=True)
        fns = {name: [lambda m=module, i=i: launch(m, i) for i in sets] for name, module in found.items()}
        fns["dense"] = [lambda i=i: torch.matmul(i["x"], i["weight"][0].T, out=i["out"]) for i in sets]
        fns["oasr.gemm"] = [lambda i=i: oasr.gemm(i["x"], i["weight"][0], out=i["out"]) for i in sets]
        timings = time_interleaved(fns)
        print(f"\n{OP.config_label(config)}", flush=True)
        for name, t in timings.items():
            us = t.median_ms * 1e3
            ratio = timings["prod"].median_ms / t.median_ms
            print(f"  {name:24s} {us:9.2f} us  x{ratio:.3f} of prod  (iqr {t.iqr_rel:.3f})", flush=True)
    print(f"\n{failed} wrong results" if failed else "\nevery checked variant matched the float64 loop")
    return 1 if failed else 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
