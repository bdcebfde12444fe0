"""Time oasr.group_gemm on the issue's shapes next to torch._grouped_mm, one dense GEMM and a loop of F.linear.

    python dev/group_gemm/bench.py --build [--jobs 14]   # build every module the sweep uses, in parallel
    python dev/group_gemm/bench.py [--csv out.csv] [--dtype bfloat16]   # the sweep (H100/H200)
    python dev/group_gemm/bench.py --only direct --shapes 3   # some candidates on the first shapes

The shapes are the harness op's sweep (``profiling/harness/ops/group_gemm.py``: the issue's 8 x 1000 rows
at N=1024, K=256, then upstream Oasr's list with group sizes drawn uniformly from [m/2, 2m)). Backends:
``oasr`` (the public op, its chosen configuration and ``gemm_config.group_pdl``), ``oasr+bias`` (with a
per-group bias in the epilogue; ``oasr+bias:direct`` the same on the direct kernel), ``oasr:<config>`` for
every candidate of ``candidates.py``
(tiles, clusters and schedules: the rows to pick a default from) launched in stream order, and
``oasr:<config>+pdl``, the same with both kernels (setup, grouped GEMM) launched by programmatic dependent
launch (each resident while the one before it runs), ``torch._grouped_mm``, ``loop`` (a Python loop of
F.linear, one cuBLAS call per group) and ``dense`` (one cuBLAS GEMM over all L rows: the same FLOP, the
issue's 1.1x bar). Every grouped result is checked against the float64 loop (the harness op's tolerances)
before it is timed.

Device time: ``profiling.harness.timing.time_interleaved`` (CUDA-graph replay, backends interleaved over
rounds, input sets rotated past the L2). Each row reports the median in us, TFLOP/s over the real rows,
and oasr's speed-up over torch._grouped_mm, the loop and dense (x > 1: oasr faster).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)
from dev.group_gemm.candidates import CANDIDATES
from oasr.jit import gemm_config
from oasr.jit.core import build_in_parallel
from oasr.jit.families import GROUP_GEMM
from profiling.harness.correctness import compare
from profiling.harness.ops import group_gemm as op_module
from profiling.harness.ops import parse_dtype
from profiling.harness.timing import op_input_sets, run_gpu_script, time_interleaved

group_module = sys.modules["oasr.group_gemm"]
OP = op_module.GROUP_GEMM


def build(jobs: int) -> None:
    """The bf16 module of every candidate, and both dtypes' modules, plain and with a bias, of the configurations
    choose_group picks (what the sweep uses), ``jobs`` at a time."""
    variants = [gemm_config.group_gemm_variant("bfloat16", c) for c in CANDIDATES]
    variants += [
        gemm_config.group_gemm_variant(d, c, bias)
        for d in gemm_config.DTYPES
        for c in gemm_config.GROUP_PICKS
        for bias in (False, True)
    ]
    variants = list({v.name: v for v in variants}.values())
    specs = [GROUP_GEMM.jit_spec(variant=v) for v in variants]
    if build_in_parallel(specs, jobs):
        raise SystemExit(1)


def backends(dtype: torch.dtype, only: str = "") -> dict[str, Callable[[dict], torch.Tensor]]:
    """Name -> callable on one input set (the harness op's inputs); ``only``: the candidates whose name
    contains it."""
    fns: dict[str, Callable[[dict], torch.Tensor]] = {"oasr": OP.backends["oasr"]}
    for config in (c for c in CANDIDATES if only in c.name):
        for pdl in (False, True):
            fns[f"oasr:{config.name}{'+pdl' if pdl else ''}"] = lambda i, c=config, p=pdl: _launch(i, c, p)
    if dtype == torch.bfloat16:
        fns["torch._grouped_mm"] = op_module.torch_grouped
    fns["oasr+bias"] = lambda i: oasr.group_gemm(i["x"], i["weight"], i["offsets"], i["bias"], out=i["out"])
    fns["oasr+bias:direct"] = lambda i: _launch(i, gemm_config.DIRECT, None, i["bias"])
    fns["loop"] = op_module.linear_loop
    fns["dense"] = lambda i: torch.matmul(i["x"], i["weight"][0].T, out=i["out"])
    return fns


def _launch(
    i: dict, config: gemm_config.GemmConfig, pdl: bool | None, bias: torch.Tensor | None = None
) -> torch.Tensor:
    group_module._launch(i["x"], i["weight"], i["offsets"], bias, i["out"], config, pdl)
    return i["out"]


def sweep(dtype_name: str, csv_path: str | None, only: str = "", shapes: int | None = None) -> int:
    dtype = parse_dtype(dtype_name)
    rows, failed = [], 0
    for config in OP.default_sweep[:shapes]:
        label = OP.config_label(config)
        sets = op_input_sets(OP, config, dtype, max_sets=8)
        for i in sets:
            i["bias"] = torch.randn(config["g"], config["n"], device="cuda").to(dtype)
        fns = backends(dtype, only)
        expected = OP.reference(sets[0])
        sizes = torch.tensor(sets[0]["sizes"], device="cuda")
        with_bias = expected + sets[0]["bias"].double().repeat_interleave(sizes, dim=0)
        rtol, atol = OP.tolerance(dtype)
        for name, fn in fns.items():
            if name == "dense":  # another product: not the op's result
                continue
            sets[0]["out"].fill_(float("nan"))
            check = compare(fn(sets[0]), with_bias if name.startswith("oasr+bias") else expected, rtol, atol)
            if not check["passed"]:
                failed += 1
                print(f"{label} {name}: WRONG {check}", flush=True)
        del expected, with_bias
        timings = time_interleaved({name: [lambda f=fn, i=i: f(i) for i in sets] for name, fn in fns.items()})
        work = OP.work(config, dtype)
        base = {name: t.median_ms * 1e3 for name, t in timings.items()}
        print(f"\n{label}  L={sum(op_module.group_sizes(config))}  ({len(sets)} input sets)", flush=True)
        for name, t in timings.items():
            us = base[name]
            row = {
                "shape": label,
                "dtype": dtype_name,
                "backend": name,
                "median_us": round(us, 2),
                "iqr_rel": round(t.iqr_rel, 3),
                "tflops": round(work.total_flops / (us * 1e-6) / 1e12, 1),
            }
            for ref in ("torch._grouped_mm", "loop", "dense"):
                if ref in base:
                    row[f"x_vs_{ref}"] = round(base[ref] / us, 2)
            rows.append(row)
            ratios = "  ".join(f"{k[2:]} {v:.2f}x" for k, v in row.items() if k.startswith("x_vs_"))
            print(f"  {name:42s} {us:9.2f} us  {row['tflops']:6.1f} TF/s  {ratios}", flush=True)
    if csv_path:
        fields = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    print(f"\n{failed} wrong results" if failed else "\nevery grouped result matched the float64 loop")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="build every module the sweep uses, then stop")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--csv")
    parser.add_argument("--dtype", default="bfloat16", choices=gemm_config.DTYPES)
    parser.add_argument("--only", default="", help="time the candidates whose name contains this (e.g. direct)")
    parser.add_argument("--shapes", type=int, help="the first SHAPES shapes of the sweep only")
    args = parser.parse_args()
    if args.build:
        build(args.jobs)
        return 0
    return sweep(args.dtype, args.csv, args.only, args.shapes)


if __name__ == "__main__":
    if "--build" in sys.argv:
        raise SystemExit(main())
    run_gpu_script(main, "dev/group_gemm/bench.py")
