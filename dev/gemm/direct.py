#!/usr/bin/env python3
"""group_gemm's direct kernel as one dense GEMM (all rows one group) on issue 17's shapes, bare, with a bias + SiLU
or a GLU in its epilogue, next to cuBLAS and oasr.gemm (needs an sm90 GPU; ``--build`` needs only nvcc).

    python dev/gemm/direct.py            # check each result against float64, then time them
    python dev/gemm/direct.py --build    # build the four modules and stop

Issue 17 asks a fused bias + activation for <= 1.05x the time of a bare cuBLAS GEMM; CUTLASS's epilogue takes
1.12-1.39x. The direct kernel (``include/oasr/gemm/sm90_group_gemm_direct.cuh``) has its own epilogue, and on
8000 rows as one group (N=1024, K=256) it took 11.18 us against cuBLAS's 11.92
(``dev/group_gemm/results/rowstores_variants_h200.txt``). This measures whether the gemm family's fused forms
should run on it. ``direct`` and ``direct+bias`` are production's bf16 modules; ``direct+bias+silu`` the bias
module with ``variants/direct-bias-silu.patch`` (SiLU after the bias, as ``activation.cuh``). Beside them: ``cublas``
(``torch.mm``), ``torch`` (``F.silu(F.linear(x, w, b))``, as the harness) and ``oasr.gemm`` with bias and SiLU.
Then ``gemm_glu`` (issue: <= 1.1x a bare GEMM with the same 2N): ``direct-glu+bias``, the bias module with
``variants/direct-glu.patch`` (a tile's B is 64 value rows and their 64 gate rows, the same thread holds a value
and its gate, the epilogue stores value * sigmoid(gate) into the first half of a 2N-wide output), beside cuBLAS
and the direct kernel over 2N, ``oasr.gemm_glu`` (two kernels) and torch's ``F.glu(F.linear(...))``.
Timing: the harness's CUDA-graph replay, backends in turn, input sets rotated past the L2 (``time_interleaved``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path; registers oasr.group_gemm)
from dev.tune_kernels import build_all, patched_include, variant_spec
from oasr.jit import gemm_config
from oasr.jit.families import GROUP_GEMM
from profiling.harness.correctness import compare
from profiling.harness.ops import get_op
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

SHAPES = ((8000, 256, 256), (8000, 1024, 256), (1500, 2048, 512), (16000, 512, 512), (24000, 2048, 512))
"""The issue's bare-GEMM shapes and its 600 TFLOP/s one, (M, N, K)."""
VARIANTS = Path(__file__).resolve().parent / "variants"
HEADER_COMMIT = "9f028b4"
"""The commit whose ``include/`` the patches edit (its direct kernel is today's on main)."""
group_module = sys.modules["oasr.group_gemm"]


def modules() -> dict[str, object]:
    """Production's direct modules (without and with a bias) and the two patched bias modules, in parallel."""
    direct = gemm_config.GROUP_DIRECT
    plain, bias = (gemm_config.group_gemm_variant("bfloat16", direct, bias=b) for b in (False, True))
    specs = {"direct": GROUP_GEMM.jit_spec(variant=plain), "direct+bias": GROUP_GEMM.jit_spec(variant=bias)}
    for name, patch in (("direct+bias+silu", "direct-bias-silu"), ("direct-glu+bias", "direct-glu")):
        _, include = patched_include(VARIANTS / f"{patch}.patch", HEADER_COMMIT)
        specs[name] = variant_spec(GROUP_GEMM, patch, include, bias)
    build_all(list(specs.values()))
    return specs


def one_group(sets: list[dict], wide: bool) -> None:
    """Adds what the direct kernel's launch needs to each input set: the one group's end (and for GLU, ``wide``, an
    output as wide as the weight: the patched kernel writes the first half of each row)."""
    for i in sets:
        i["rows"] = torch.full((1,), i["x"].shape[0], dtype=torch.int32, device="cuda")
        i["empty"] = torch.empty(0, dtype=torch.uint8, device="cuda")
        if wide:
            i["wide"] = torch.empty(i["x"].shape[0], i["weight"].shape[0], dtype=i["x"].dtype, device="cuda")


def launch(module: object, i: dict, bias: bool, out: str = "out") -> torch.Tensor:
    """``i[out]`` = the rows of ``i["x"]`` as one group through ``i["weight"]`` (+ the bias, and the patch's form)."""
    b = i["bias"][None] if bias else None
    flag = group_module._error_flag()
    module.group_gemm(i[out][None], i["x"][None], i["weight"][None], i["rows"], b, i["empty"], flag, True)
    return i[out]


def report(label: str, flop: int, fns: dict, bare: str) -> None:
    timings = time_interleaved(fns)
    print(f"\n{label}", flush=True)
    for name, t in timings.items():
        tflops = flop / (t.median_ms * 1e-3) / 1e12
        ratio = t.median_ms / timings[bare].median_ms
        print(f"  {name:22s} {t.median_ms * 1e3:9.2f} us  {tflops:6.1f} TF/s  x{ratio:.3f} of {bare}", flush=True)


def check(name: str, label: str, result: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> int:
    errors = compare(result, expected, rtol, atol)
    if not errors["passed"]:
        print(f"{label} {name}: WRONG {errors}", flush=True)
    return 0 if errors["passed"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="build the four modules and stop (no GPU needed)")
    args = parser.parse_args()
    if not args.build:
        require_cuda("dev/gemm/direct.py")
    specs = modules()
    if args.build:
        return 0
    found = {name: spec.load() for name, spec in specs.items()}
    failed = 0
    op = get_op("gemm")
    rtol, atol = op.tolerance(torch.bfloat16)
    for m, n, k in SHAPES:
        label = f"{m}x{n}x{k}"
        sets = op_input_sets(op, {"m": m, "n": n, "k": k}, torch.bfloat16, max_sets=8)
        one_group(sets, wide=False)
        i = sets[0]
        x, w, b = i["x"].double(), i["weight"].double(), i["bias"].double()
        expected = {"direct": x @ w.T, "direct+bias": x @ w.T + b, "direct+bias+silu": F.silu(x @ w.T + b)}
        for name, reference in expected.items():
            i["out"].fill_(float("nan"))
            failed += check(name, label, launch(found[name], i, name != "direct"), reference, rtol, atol)
        fns = {"cublas": [lambda s=s: torch.mm(s["x"], s["weight"].T, out=s["out"]) for s in sets]}
        for name in expected:
            fns[name] = [lambda s=s, name=name: launch(found[name], s, name != "direct") for s in sets]
        fns["oasr.gemm+bias+silu"] = [
            lambda s=s: oasr.gemm(s["x"], s["weight"], s["bias"], "silu", out=s["out"]) for s in sets
        ]
        fns["torch+bias+silu"] = [lambda s=s: F.silu(F.linear(s["x"], s["weight"], s["bias"])) for s in sets]
        report(label, 2 * m * n * k, fns, "cublas")
    op = get_op("gemm_glu")  # weight [2N, K]: the bar is a bare GEMM with the same 2N
    for config in op.default_sweep:
        m, n, k = config["m"], config["n"], config["k"]
        label = f"gemm_glu {m}x{n}x{k} (2N = {2 * n})"
        sets = op_input_sets(op, config, torch.bfloat16, max_sets=8)
        one_group(sets, wide=True)
        i = sets[0]
        i["wide"].fill_(float("nan"))
        reference = F.glu(F.linear(i["x"].double(), i["weight"].double(), i["bias"].double()), -1)
        failed += check("direct-glu+bias", label, launch(found["direct-glu+bias"], i, True, "wide")[:, :n], reference,
                        rtol, atol)  # fmt: skip
        fns = {
            "cublas 2N": [lambda s=s: torch.mm(s["x"], s["weight"].T, out=s["wide"]) for s in sets],
            "direct 2N": [lambda s=s: launch(found["direct"], s, False, "wide") for s in sets],
            "direct-glu+bias": [lambda s=s: launch(found["direct-glu+bias"], s, True, "wide") for s in sets],
            "oasr.gemm_glu+bias": [
                lambda s=s: oasr.gemm_glu(s["x"], s["weight"], s["bias"], out=s["out"]) for s in sets
            ],
            "torch glu+bias": [lambda s=s: F.glu(F.linear(s["x"], s["weight"], s["bias"]), -1) for s in sets],
        }  # fmt: skip
        report(label, 4 * m * n * k, fns, "cublas 2N")
    print(f"\n{failed} wrong results" if failed else "\nevery checked result matched float64")
    return 1 if failed else 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
