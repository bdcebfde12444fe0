#!/usr/bin/env python3
"""Issue 54's grid: oasr's gemm, gemm_glu and bmm as their plans run them, against cuBLAS and torch's unfused pairs.

The grid crosses the rows M in {1, 16, 500, 1500, 6000, 16000, 24000, 32000} with the (N, K) pairs the models use,
d, 2d, 3d and 4d for d in {256, 512, 768, 1024} (:data:`PAIRS`), plus a few odd sizes and issue 54's own shapes
(:data:`ODD`); every N and K bucket of the autotuner is met. Each row is timed by the harness's one timing
(``time_interleaved``: CUDA graphs, backends in turn over several rounds) and compared by the workbench's
``compare_samples`` (a bootstrap interval of the ratio and a rank test, never two medians alone). Parts:

- ``plain``: ``oasr.gemm(x, w)`` against cuBLAS (``torch.mm``): "x cuBLAS" is cuBLAS's time over oasr's (> 1: faster);
- ``bias+silu``, ``bias+gelu``: ``oasr.gemm(x, w, b, act)`` against torch's unfused ``act(F.linear(x, w, b))``
  ("x torch"), and its "fused cost": its time over the bare choice's in the same run;
- ``glu``: ``oasr.gemm_glu`` (weight [2N, K]) against ``F.glu(F.linear(...), -1)``, fused cost over the bare [M, 2N];
- ``ffn``: a Conformer FFN block, ``gemm + bias + SiLU`` (d -> 4d) then ``gemm + bias`` (4d -> d), as a whole;
- ``bmm``: attention's scores and context, T' in {188, 250, 375, 750}, head dim 64, 64 heads x batch.

The "choice" column is ``oasr.gemm_plan``'s backend and band (``autotune`` under ``OASR_AUTOTUNE=1``).

    python benchmarks/gemm_grid.py --list                       # the shapes (no GPU needed)
    python benchmarks/gemm_grid.py --m 6000 16000 --parts plain bias+silu --output grid.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling import commands

if __name__ == "__main__":
    commands.starting(commands.gemm_grid_parser())  # --help and usage errors before torch loads

import csv
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

import oasr
from profiling.compare import compare_samples
from profiling.harness.ops import parse_dtype
from profiling.harness.timing import require_cuda, run_gpu_script, time_interleaved

MS = (1, 16, 500, 1500, 6000, 16000, 24000, 32000)
DS = (256, 512, 768, 1024)
PAIRS = ((1, 1), (2, 1), (3, 1), (4, 1), (1, 4))
"""(N, K) as multiples of d: the output projection, GLU's pointwise input (2d), packed QKV, the FFN's up and down."""
ODD = ((1500, 375, 256), (6000, 640, 640), (16000, 384, 1536), (500, 2560, 640), (4000, 768, 768), (12000, 3072, 768))
"""Odd sizes (the 384 and 640 buckets, a T' of 375) and issue 54's shapes outside the d multiples."""
ATTENTION_T = (188, 250, 375, 750)
HEAD_DIM = 64
ATTENTION_BATCH = 64
"""Heads x batch of the attention products (16 utterances of 4 heads)."""
COLUMNS = ("part", "shape", "choice", "us", "against", "x", "ci_low", "ci_high", "verdict", "fused_cost", "max_err")


class Shape(NamedTuple):
    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def grid(ms: Sequence[int] = MS, ds: Sequence[int] = DS, odd: bool = True) -> list[Shape]:
    """The gemm shapes: each M of ``ms`` with each pair of :data:`PAIRS` for each d of ``ds``, then :data:`ODD`."""
    shapes = [Shape(m, a * d, b * d) for m in ms for d in ds for a, b in PAIRS]
    return list(dict.fromkeys(shapes + ([Shape(*s) for s in ODD] if odd else [])))


def attention_shapes() -> list[tuple[str, int, int, int, int]]:
    """(name, batch, M, N, K) of the scores (q k^T) and context (p v) products."""
    rows = []
    for t in ATTENTION_T:
        rows.append(("scores", ATTENTION_BATCH, t, t, HEAD_DIM))
        rows.append(("context", ATTENTION_BATCH, t, HEAD_DIM, t))
    return rows


def _randn(*shape: int, scale: float = 1.0, dtype: torch.dtype) -> torch.Tensor:
    return (scale * torch.randn(*shape, device="cuda")).to(dtype)


Row = dict[str, object]
"""One printed and written row (:data:`COLUMNS`)."""


def _compared(
    fns: dict[str, Callable[[], object]], head: str, base: str, args
) -> tuple[dict[str, float], dict[str, object]]:
    """Every candidate timed interleaved; the medians (us) and ``head`` against ``base`` (as "x": base over head)."""
    timed = time_interleaved(fns, rounds=args.rounds, iters=args.iters)
    us = {name: 1e3 * result.median_ms for name, result in timed.items()}
    c = compare_samples(timed[base].samples_ms, timed[head].samples_ms)
    verdict = {"faster": "faster", "slower": "slower"}.get(c.verdict, "same (within noise)")
    return us, {"x": 1 / c.ratio, "ci_low": 1 / c.ci_high, "ci_high": 1 / c.ci_low, "verdict": verdict}


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0


def gemm_rows(shape: Shape, parts: Sequence[str], dtype: torch.dtype, args) -> list[Row]:
    m, n, k = shape
    x, b = _randn(m, k, dtype=dtype), _randn(2 * n, scale=0.1, dtype=dtype)
    w = _randn(2 * n, k, scale=k**-0.5, dtype=dtype)  # the first N rows serve the plain products, all 2N GLU
    wn, bn = w[:n], b[:n]
    out, reference = torch.empty(m, n, dtype=dtype, device="cuda"), torch.empty(m, n, dtype=dtype, device="cuda")
    wide = torch.empty(m, 2 * n, dtype=dtype, device="cuda")
    bare = {"bare": lambda: oasr.gemm(x, wn, out=out)}
    rows = []
    for part in parts:
        if part == "plain":
            plan = oasr.gemm_plan(x, wn)
            fns = {"choice": bare["bare"], "cublas": lambda: torch.mm(x, wn.t(), out=reference)}
            us, vs = _compared(fns, "choice", "cublas", args)
            rows.append(Row(part=part, choice=plan, us=us["choice"], against="cuBLAS", fused_cost=None,
                            max_err=_err(oasr.gemm(x, wn), torch.mm(x, wn.t())), **vs))  # fmt: skip
        elif part in ("bias+silu", "bias+gelu"):
            act = part.removeprefix("bias+")
            torch_act = {"silu": F.silu, "gelu": F.gelu}[act]
            plan = oasr.gemm_plan(x, wn, bn, act)
            fns = {
                "choice": lambda act=act: oasr.gemm(x, wn, bn, act, out=out),
                "torch": lambda f=torch_act: f(F.linear(x, wn, bn)),
                **bare,
            }
            us, vs = _compared(fns, "choice", "torch", args)
            rows.append(Row(part=part, choice=plan, us=us["choice"], against="torch unfused",
                            fused_cost=us["choice"] / us["bare"],
                            max_err=_err(oasr.gemm(x, wn, bn, act), torch_act(F.linear(x, wn, bn))), **vs))  # fmt: skip
        elif part == "glu":
            plan = oasr.gemm_plan(x, w, b, op="gemm_glu")
            fns = {
                "choice": lambda: oasr.gemm_glu(x, w, b, out=out),
                "torch": lambda: F.glu(F.linear(x, w, b), -1),
                "bare": lambda: oasr.gemm(x, w, out=wide),
            }
            us, vs = _compared(fns, "choice", "torch", args)
            rows.append(Row(part=part, choice=plan, us=us["choice"], against="torch unfused",
                            fused_cost=us["choice"] / us["bare"],
                            max_err=_err(oasr.gemm_glu(x, w, b), F.glu(F.linear(x, w, b), -1)), **vs))  # fmt: skip
    for row in rows:
        row["shape"] = str(shape)
    return rows


def ffn_row(m: int, d: int, dtype: torch.dtype, args) -> Row:
    """gemm + bias + SiLU (d -> 4d), then gemm + bias (4d -> d), against torch's three kernels."""
    x = _randn(m, d, dtype=dtype)
    w1, b1 = _randn(4 * d, d, scale=d**-0.5, dtype=dtype), _randn(4 * d, scale=0.1, dtype=dtype)
    w2, b2 = _randn(d, 4 * d, scale=(4 * d) ** -0.5, dtype=dtype), _randn(d, scale=0.1, dtype=dtype)
    h, y = torch.empty(m, 4 * d, dtype=dtype, device="cuda"), torch.empty(m, d, dtype=dtype, device="cuda")

    def block() -> torch.Tensor:
        return oasr.gemm(oasr.gemm(x, w1, b1, "silu", out=h), w2, b2, out=y)

    def torch_block() -> torch.Tensor:
        return F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)

    us, vs = _compared({"choice": block, "torch": torch_block}, "choice", "torch", args)
    plans = " + ".join(_choice(plan) for plan in (oasr.gemm_plan(x, w1, b1, "silu"), oasr.gemm_plan(h, w2, b2)))
    err = _err(block(), torch_block())
    return Row(part="ffn", shape=f"{m}x{d}->{4 * d}->{d}", choice=plans, us=us["choice"], against="torch",
               fused_cost=None, max_err=err, **vs)  # fmt: skip


def bmm_row(name: str, batch: int, m: int, n: int, k: int, dtype: torch.dtype, args) -> Row:
    a = _randn(batch, m, k, dtype=dtype)
    # scores read the keys transposed ([batch, N, K] seen as [batch, K, N]), context the values as they are
    mat2 = _randn(batch, n, k, dtype=dtype).transpose(1, 2) if name == "scores" else _randn(batch, k, n, dtype=dtype)
    out = oasr.bmm(a, mat2)
    reference = torch.empty(batch, m, n, dtype=dtype, device="cuda")
    plan = oasr.gemm_plan(a, mat2, op="bmm")
    fns = {"choice": lambda: oasr.bmm(a, mat2, out=out), "cublas": lambda: torch.bmm(a, mat2, out=reference)}
    us, vs = _compared(fns, "choice", "cublas", args)
    return Row(part=f"bmm {name}", shape=f"{batch}x{m}x{n}x{k}", choice=plan, us=us["choice"], against="cuBLAS",
               fused_cost=None, max_err=_err(oasr.bmm(a, mat2), torch.bmm(a, mat2)), **vs)  # fmt: skip


def _choice(plan: object) -> str:
    return plan if isinstance(plan, str) else f"{plan.backend} ({plan.band})"


def _print(row: Row) -> None:
    cost = "" if row["fused_cost"] is None else f"{row['fused_cost']:.3f}"
    print(
        f"{row['part']:<13} {row['shape']:<22} {_choice(row['choice']):<26} {row['us']:9.2f} "
        f"{row['x']:6.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] {row['against']:<14} {row['verdict']:<20} "
        f"{cost:>6} {row['max_err']:.2e}",
        flush=True,
    )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary(rows: Sequence[Row]) -> list[str]:
    """Per part: the geomean of "x" (and its smallest), the largest fused cost."""
    lines = []
    for part in dict.fromkeys(row["part"] for row in rows):
        mine = [row for row in rows if row["part"] == part]
        xs = [row["x"] for row in mine]
        line = f"{part}: {len(mine)} rows, geomean x {_geomean(xs):.3f} against {mine[0]['against']}, min {min(xs):.3f}"
        costs = [row["fused_cost"] for row in mine if row["fused_cost"] is not None]
        if costs:
            line += f", fused cost max {max(costs):.3f} (geomean {_geomean(costs):.3f})"
        lines.append(line)
    return lines


def main() -> int:
    args = commands.gemm_grid_parser().parse_args()
    shapes = grid(args.m or MS, args.d or DS, not (args.no_odd or args.m or args.d))
    if args.list:
        print(f"{len(shapes)} gemm shapes (M x N x K): " + " ".join(map(str, shapes)))
        products = (f"{name} {b}x{m}x{n}x{k}" for name, b, m, n, k in attention_shapes())
        print("attention (batch x M x N x K): " + " ".join(products))
        return 0
    require_cuda("gemm_grid.py")
    commands.started()
    dtype = parse_dtype(args.dtype)
    print(f"{torch.cuda.get_device_name()}, {args.dtype}, torch {torch.__version__}; x: the other's time over oasr's")
    print(f"{'part':<13} {'shape':<22} {'choice':<26} {'us':>9} {'x':>6} {'interval':<16} {'against':<14} "
          f"{'verdict':<20} {'fused':>6} max err")  # fmt: skip
    rows: list[Row] = []
    gemm_parts = [p for p in args.parts if p in ("plain", "bias+silu", "bias+gelu", "glu")]
    for shape in shapes if gemm_parts else []:
        for row in gemm_rows(shape, gemm_parts, dtype, args):
            _print(row)
            rows.append(row)
    if "ffn" in args.parts:
        for m in args.m or MS:
            for d in args.d or DS:
                rows.append(ffn_row(m, d, dtype, args))
                _print(rows[-1])
    if "bmm" in args.parts:
        for spec in attention_shapes():
            rows.append(bmm_row(*spec, dtype, args))
            _print(rows[-1])
    print("\n" + "\n".join(summary(rows)))
    if args.output:
        with open(args.output, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=COLUMNS)
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "choice": _choice(row["choice"])})
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
