#!/usr/bin/env python3
"""Host cost per call of the gemm family against torch, split into its parts (needs an sm90 GPU).

    python dev/gemm/eager.py [--before PATCH]    (PATCH: a diff of include/, e.g. a launcher change undone)

Per shape (bf16, ``out=`` given): ``torch.mm``; ``oasr.gemm`` (the rule's CUTLASS pick) and ``oasr.gemm_glu`` (the
direct kernel); the same modules called straight through tvm-ffi with ready views (the launcher alone: the C++
side and the launch); the launch floor (``benchmarks/launch_floor.cu``: a tvm-ffi call with two tensors, and the
same launching an empty kernel). ``--before``: the CUTLASS pick built with PATCH applied to ``include/`` too (the
launcher before a change), called the same way. Calls go back to back without synchronizing
(``host_overhead_us``: the host's cost, the problems being small enough that the GPU keeps up); the best of five
runs of 200 calls.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)
from benchmarks.host_overhead import cost_us, launch_floor
from dev.tune_kernels import build_all, patched_include, variant_spec
from oasr.jit import gemm_config
from oasr.jit.families import GEMM
from profiling.harness.timing import require_cuda, run_gpu_script

SHAPES = ((1, 256, 256), (16, 256, 256), (375, 1024, 256))
"""(M, N, K): one frame, a streaming chunk, an utterance's frames after subsampling."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, metavar="PATCH", help="also the CUTLASS picks with PATCH on include/")
    args = parser.parse_args()
    require_cuda("dev/gemm/eager.py")
    picks = {gemm_config.choose(m, n, k) for m, n, k in SHAPES}
    variants = {c: gemm_config.gemm_variant("bfloat16", "plain", c) for c in picks}
    glu = gemm_config.gemm_variant("bfloat16", "glu", gemm_config.DIRECT)
    specs = {c: GEMM.jit_spec(variant=v) for c, v in variants.items()}
    before = {}
    if args.before:
        name, include = patched_include(args.before)
        before = {c: variant_spec(GEMM, f"{name}_{c.name}", include, v) for c, v in variants.items()}
    build_all([*specs.values(), *before.values(), GEMM.jit_spec(variant=glu)])
    floor = launch_floor()
    print(f"torch {torch.__version__}; host us per call, best of 5 x 200 calls back to back")
    for m, n, k in SHAPES:
        config = gemm_config.choose(m, n, k)
        x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
        w2 = torch.randn(2 * n, k, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        module = specs[config].load()
        rows = {
            "torch.mm": partial(torch.mm, x, w.T, out=out),
            f"oasr.gemm ({config.name})": partial(oasr.gemm, x, w, out=out),
            "  its module called alone": partial(module.gemm, out[None], x[None], w[None], None),
        }
        if config in before:
            old = before[config].load()
            rows[f"  its module with {args.before.stem}"] = partial(old.gemm, out[None], x[None], w[None], None)
        glu_module = GEMM.module(glu)
        rows["oasr.gemm_glu (direct)"] = partial(oasr.gemm_glu, x, w2, out=out)
        rows["  the GLU module called alone"] = partial(glu_module.gemm, out[None], x[None], w2[None], None)
        rows["tvm-ffi call, 2 tensors"] = partial(floor.ffi_call, out, x)
        rows["  the same, an empty kernel launched"] = partial(floor.empty_launch, out, x)
        print(f"\n{m}x{n}x{k}")
        for name, fn in rows.items():
            print(f"  {name:44s} {cost_us(fn):7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
