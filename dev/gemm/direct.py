#!/usr/bin/env python3
"""The gemm family's direct path (group_gemm's kernel, every row one group) against cuBLAS and the CUTLASS rule,
bare, with each fused epilogue and as ``gemm_glu``'s one launch (needs an sm90 GPU; ``--build`` needs only nvcc).

    python dev/gemm/direct.py            # check each result against float64, then time them
    python dev/gemm/direct.py --build    # build the modules and stop
    python dev/gemm/direct.py --ncu plain bias silu   # launch these on the direct kernel for ncu (h200.sh direct-ncu)
    python dev/gemm/direct.py --summarise source.csv  # ncu's source page of one kernel: the epilogue's instructions
    python dev/gemm/direct.py --variants dev/gemm/variants/direct-pack-first.patch ...  # also the kernel so edited
    python dev/gemm/direct.py --dtype float16 ...   # fp16 inputs (default bfloat16)

Issue 17 asks a fused bias + activation for <= 1.05x the time of a bare cuBLAS GEMM (CUTLASS's epilogue took
1.12-1.39x) and ``gemm_glu`` for <= 1.1x a bare GEMM with the same 2N (it was a GEMM into [..., 2N] and
``oasr.glu``). Per shape of the harness's gemm sweep and its 600 TFLOP/s case: ``cublas`` (``torch.mm``), the rule's
bare pick (``oasr.gemm``), ``direct`` (``gemm_config.DIRECT``) bare and with a bias and each activation, the rule's
fused pick with bias + SiLU, CUTLASS's fused pick for the shape (``gemm_config.choose_cutlass_fused``), the rule's
bare pick with bias + SiLU (its one-wave tiles were never in the fused sweep) and torch's ``F.silu(F.linear(...))``.
Per shape of the gemm_glu sweep: cuBLAS and the rule over 2N, ``oasr.gemm_glu`` (the direct kernel's GLU), the
two-kernel form and torch's.
Timing: the harness's CUDA-graph replay, backends in turn, input sets rotated past the L2 (``time_interleaved``);
``eager us`` is the host's wall time per call of a loop of eager calls, launch included.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)
from dev.gemm.tune import eager_us
from dev.tune_kernels import build_all, patched_include, variant_spec
from oasr.jit import gemm_config
from oasr.jit.families import GEMM
from profiling.harness.correctness import compare
from profiling.harness.ops import get_op, parse_dtype
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

gemm_module = sys.modules["oasr.gemm"]
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
DIRECT_EPILOGUES = ("plain", "bias", *ACTIVATIONS, "glu")
TORCH_ACT = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"), "silu": F.silu}


ISSUE_SHAPES = ((8000, 256, 256), (8000, 1024, 256), (1500, 2048, 512), (16000, 512, 512))
"""Issue 17's bare-GEMM targets (``--issue-shapes``: these alone)."""


def gemm_shapes(issue_only: bool = False) -> list[tuple[int, int, int]]:
    if issue_only:
        return list(ISSUE_SHAPES)
    op = get_op("gemm")
    large = op.large_case(op, torch.bfloat16)
    return [(c["m"], c["n"], c["k"]) for c in (*op.default_sweep, large)]


def glu_shapes() -> list[tuple[int, int, int]]:
    return [(c["m"], c["n"], c["k"]) for c in get_op("gemm_glu").default_sweep]


def modules(dtype: str, issue_only: bool = False) -> None:
    """Every module the run uses, built in parallel: the direct ones (both dtypes: the tests' too) and, in
    ``dtype``, the rule's picks (bare, bias, SiLU) and CUTLASS's fused picks (``issue_only``: on issue 17's shapes)."""
    direct = gemm_config.DIRECT
    variants = [gemm_config.gemm_variant(d, e, direct) for d in gemm_config.DTYPES for e in DIRECT_EPILOGUES]
    for m, n, k in gemm_shapes(issue_only):
        variants.append(gemm_config.gemm_variant(dtype, "plain", gemm_config.choose(m, n, k)))
        variants.append(gemm_config.gemm_variant(dtype, "silu", gemm_config.choose(m, n, k, fused=True)))
        variants.append(gemm_config.gemm_variant(dtype, "silu", gemm_config.choose_cutlass_fused(m, n, k)))
        variants.append(gemm_config.gemm_variant(dtype, "silu", gemm_config.choose(m, n, k)))
    for m, n, k in glu_shapes():
        variants.append(gemm_config.gemm_variant(dtype, "plain", gemm_config.choose(m, 2 * n, k)))
        variants.append(gemm_config.gemm_variant(dtype, "bias", gemm_config.choose(m, 2 * n, k, fused=True)))
    unique = {v.name: v for v in variants}
    build_all([GEMM.jit_spec(variant=v) for v in unique.values()])


VARIANT_EPILOGUES = ("plain", "bias", "silu", "glu")


def variant_specs(patches: list[Path], dtype: str, epilogues=VARIANT_EPILOGUES) -> dict[tuple[str, str], object]:
    """Per patch (a diff of ``include/``), the direct module of each of ``epilogues`` in ``dtype`` built with it:
    {(patch name, epilogue): spec}."""
    specs = {}
    for patch in patches:
        name, include = patched_include(patch)
        for epilogue in epilogues:
            variant = gemm_config.gemm_variant(dtype, epilogue, gemm_config.DIRECT)
            specs[name, epilogue] = variant_spec(GEMM, f"{name}_{variant.name}", include, variant)
    return specs


def variant_modules(patches: list[Path], dtype: str) -> dict[str, dict[str, object]]:
    """:func:`variant_specs` of :data:`VARIANT_EPILOGUES`, built in parallel and loaded: {patch name: {epilogue:
    module}}."""
    specs = variant_specs(patches, dtype)
    build_all(list(specs.values()))
    found: dict[str, dict[str, object]] = {}
    for (name, epilogue), spec in specs.items():
        found.setdefault(name, {})[epilogue] = spec.load()
    return found


def launch(module: object, i: dict, epilogue: str, out: str = "out") -> torch.Tensor:
    """``i[out]`` = a variant module's ``epilogue`` on the input set ``i`` (addressable as made), no Python layer."""
    bias = None if epilogue == "plain" else i["bias"]
    module.gemm(i[out][None], i["x"][None], i["weight"][None], bias)
    return i[out]


def cutlass_silu(i: dict, config: gemm_config.GemmConfig) -> torch.Tensor:
    """``i["out"]`` = bias + SiLU on ``config``, through the Python layer."""
    gemm_module._linear(i["x"], i["weight"], i["bias"], "silu", i["out"], config)
    return i["out"]


def direct(i: dict, epilogue: str, out: str = "out") -> torch.Tensor:
    """``i[out]`` = the direct kernel's ``epilogue`` ("plain", "bias", an activation after the bias, "glu")."""
    bias = None if epilogue == "plain" else i["bias"]
    act = None if epilogue in ("plain", "bias") else epilogue
    gemm_module._linear(i["x"], i["weight"], bias, act, i[out], gemm_config.DIRECT)
    return i[out]


def report(label: str, flop: int, fns: dict, bare: str) -> None:
    timings = time_interleaved(fns)
    print(f"\n{label}", flush=True)
    print(f"  {'backend':24s} {'device us':>9s} {'TF/s':>6s}  {'x ' + bare:>10s} {'eager us':>9s}", flush=True)
    for name, t in timings.items():
        tflops = flop / (t.median_ms * 1e-3) / 1e12
        ratio = t.median_ms / timings[bare].median_ms
        eager = eager_us(fns[name][0])
        print(f"  {name:24s} {t.median_ms * 1e3:9.2f} {tflops:6.1f}  {ratio:10.3f} {eager:9.2f}", flush=True)


def check(name: str, label: str, result: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> int:
    errors = compare(result, expected, rtol, atol)
    if not errors["passed"]:
        print(f"{label} {name}: WRONG {errors}", flush=True)
    return 0 if errors["passed"] else 1


def gemm_table(m: int, n: int, k: int, dtype: torch.dtype, variants: dict) -> int:
    bare, fused = gemm_config.choose(m, n, k), gemm_config.choose(m, n, k, fused=True)
    cutlass = gemm_config.choose_cutlass_fused(m, n, k)
    label = f"{m}x{n}x{k} {dtype}  (rule: bare {bare.name}, fused {fused.name}; CUTLASS fused {cutlass.name})"
    rtol, atol = get_op("gemm").tolerance(dtype)
    sets = op_input_sets(get_op("gemm"), {"m": m, "n": n, "k": k}, dtype, max_sets=8)
    i, failed = sets[0], 0
    x, w, b = i["x"].double(), i["weight"].double(), i["bias"].double()
    expected = {"plain": x @ w.T, "bias": x @ w.T + b, **{a: TORCH_ACT[a](x @ w.T + b) for a in ACTIVATIONS}}
    for epilogue, reference in expected.items():
        i["out"].fill_(float("nan"))
        failed += check(f"direct {epilogue}", label, direct(i, epilogue), reference, rtol, atol)
    i["out"].fill_(float("nan"))
    failed += check("rule silu", label, oasr.gemm(i["x"], i["weight"], i["bias"], "silu", out=i["out"]),
                    expected["silu"], rtol, atol)  # fmt: skip
    for name, config in (("cutlass silu", cutlass), ("bare-pick silu", bare)):
        i["out"].fill_(float("nan"))
        failed += check(name, label, cutlass_silu(i, config), expected["silu"], rtol, atol)
    for name, found in variants.items():
        for epilogue in ("plain", "bias", "silu"):
            i["out"].fill_(float("nan"))
            result = launch(found[epilogue], i, epilogue)
            failed += check(f"{name} {epilogue}", label, result, expected[epilogue], rtol, atol)
    fns = {
        "cublas": [lambda s=s: torch.mm(s["x"], s["weight"].T, out=s["out"]) for s in sets],
        "rule": [lambda s=s: oasr.gemm(s["x"], s["weight"], out=s["out"]) for s in sets],
        **{f"direct {e}": [lambda s=s, e=e: direct(s, e) for s in sets] for e in expected},
        "rule bias+silu": [lambda s=s: oasr.gemm(s["x"], s["weight"], s["bias"], "silu", out=s["out"]) for s in sets],
        "cutlass bias+silu": [lambda s=s: cutlass_silu(s, cutlass) for s in sets],
        "bare-pick bias+silu": [lambda s=s: cutlass_silu(s, bare) for s in sets],
        "torch bias+silu": [lambda s=s: F.silu(F.linear(s["x"], s["weight"], s["bias"])) for s in sets],
    }
    for name, found in variants.items():
        for e in ("plain", "bias", "silu"):
            fns[f"{name} {e}"] = [lambda s=s, module=found[e], e=e: launch(module, s, e) for s in sets]
    report(label, 2 * m * n * k, fns, "cublas")
    return failed


def glu_table(m: int, n: int, k: int, dtype: torch.dtype, variants: dict) -> int:
    label = f"gemm_glu {m}x{n}x{k} {dtype} (2N = {2 * n})"
    rtol, atol = get_op("gemm_glu").tolerance(dtype)
    sets = op_input_sets(get_op("gemm_glu"), {"m": m, "n": n, "k": k}, dtype, max_sets=8)
    for s in sets:
        s["wide"] = torch.empty(m, 2 * n, dtype=dtype, device="cuda")
    i = sets[0]
    i["out"].fill_(float("nan"))
    reference = F.glu(F.linear(i["x"].double(), i["weight"].double(), i["bias"].double()), -1)
    failed = check("oasr.gemm_glu", label, oasr.gemm_glu(i["x"], i["weight"], i["bias"], out=i["out"]), reference,
                   rtol, atol)  # fmt: skip
    for name, found in variants.items():
        i["out"].fill_(float("nan"))
        failed += check(f"{name} glu", label, launch(found["glu"], i, "glu"), reference, rtol, atol)

    def two_kernels(s: dict) -> torch.Tensor:
        oasr.gemm(s["x"], s["weight"], s["bias"], out=s["wide"])
        return oasr.glu(s["wide"], out=s["out"])

    fns = {
        "cublas 2N": [lambda s=s: torch.mm(s["x"], s["weight"].T, out=s["wide"]) for s in sets],
        "rule 2N": [lambda s=s: oasr.gemm(s["x"], s["weight"], out=s["wide"]) for s in sets],
        "direct 2N": [lambda s=s: direct(s, "plain", "wide") for s in sets],
        "oasr.gemm_glu+bias": [lambda s=s: oasr.gemm_glu(s["x"], s["weight"], s["bias"], out=s["out"]) for s in sets],
        "gemm+bias, glu": [lambda s=s: two_kernels(s) for s in sets],
        "torch glu+bias": [lambda s=s: F.glu(F.linear(s["x"], s["weight"], s["bias"]), -1) for s in sets],
    }
    for name, found in variants.items():
        fns[f"{name} glu+bias"] = [lambda s=s, module=found["glu"]: launch(module, s, "glu") for s in sets]
    report(label, 4 * m * n * k, fns, "cublas 2N")
    return failed


NCU_SHAPES = ((8000, 1024, 256), (16000, 2048, 256))


def ncu_targets(epilogues: list[str]) -> None:
    """Each of ``epilogues`` on the direct kernel, launched twice (the second warm) on :data:`NCU_SHAPES`, for ncu."""
    for m, n, k in NCU_SHAPES:
        i = op_input_sets(get_op("gemm"), {"m": m, "n": n, "k": k}, torch.bfloat16, max_sets=1)[0]
        for epilogue in epilogues:
            for _ in range(2):
                direct(i, epilogue)
    torch.cuda.synchronize()


def summarise_source(csv_path: Path) -> None:
    """Prints what ``ncu --page source --csv`` wrote for one direct kernel: the epilogue's instructions per warp and
    tile by opcode (the SASS lines from the products' last wait to the last global store), stall samples by reason,
    and the lines with the most samples."""
    lines = csv_path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[header:]))))

    def value(row: dict, key: str) -> float:
        return float(row[key] or 0)

    def opcode(row: dict) -> str:
        return next(w for w in row["Source"].split() if not w.startswith("@")).split(".")[0]

    first = next(i for i, r in enumerate(rows) if "DEPBAR.LE gsb0, 0x0" in r["Source"])
    last = max(i for i, r in enumerate(rows) if opcode(r) == "STG")
    epilogue = [r for r in rows[first : last + 1] if value(r, "Instructions Executed") > 0]
    per_tile = max(value(r, "Instructions Executed") for r in epilogue if opcode(r) == "STSM")  # warps x tiles
    counts: dict[str, float] = {}
    for r in epilogue:
        counts[opcode(r)] = counts.get(opcode(r), 0) + value(r, "Instructions Executed") / per_tile
    print(f"epilogue instructions per warp and tile: {sum(counts.values()):.0f} ({per_tile:.0f} warp-tiles)")
    print("  " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:16]))
    reasons = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]
    totals = {k: sum(value(r, k) for r in rows) for k in reasons}
    samples = sum(totals.values())
    print(f"stall samples: {samples:.0f}; by reason:")
    print("  " + ", ".join(f"{k[6:]} {v / samples:.1%}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1])[:10]))
    print("the ten SASS lines with the most samples (samples, main reason, executions, instruction):")
    for r in sorted(rows, key=lambda r: -value(r, "Warp Stall Sampling (All Samples)"))[:10]:
        reason = max(reasons, key=lambda k: value(r, k))[6:]
        samples, executed = value(r, "Warp Stall Sampling (All Samples)"), r["Instructions Executed"]
        print(f"  {samples:4.0f}  {reason:10s} x{executed:>6s}  {r['Source'].strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="build the modules and stop (no GPU needed)")
    parser.add_argument("--ncu", nargs="+", metavar="EPILOGUE", help="launch these epilogues for ncu (no timing)")
    parser.add_argument("--summarise", type=Path, metavar="CSV", help="summarise ncu's source page of one kernel")
    help = "also the direct kernel with each diff of include/ (plain, bias, SiLU, GLU)"
    parser.add_argument("--variants", nargs="+", type=Path, default=[], metavar="PATCH", help=help)
    parser.add_argument("--issue-shapes", action="store_true", help="issue 17's four gemm shapes only (and GLU's)")
    parser.add_argument("--dtype", choices=gemm_config.DTYPES, default="bfloat16", help="the inputs' dtype")
    args = parser.parse_args()
    if args.summarise:
        summarise_source(args.summarise)
        return 0
    if not args.build:
        require_cuda("dev/gemm/direct.py")
    if args.ncu:
        ncu_targets(args.ncu)
        return 0
    modules(args.dtype, args.issue_shapes)
    variants = variant_modules(args.variants, args.dtype) if args.variants else {}
    if args.build:
        return 0
    dtype = parse_dtype(args.dtype)
    failed = sum(gemm_table(m, n, k, dtype, variants) for m, n, k in gemm_shapes(args.issue_shapes))
    failed += sum(glu_table(m, n, k, dtype, variants) for m, n, k in glu_shapes())
    print(f"\n{failed} wrong results" if failed else "\nevery checked result matched float64")
    return 1 if failed else 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
