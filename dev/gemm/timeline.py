#!/usr/bin/env python3
"""Where one call of the gemm family's direct kernel spends its time, tile by tile (issue 17; H200).

    python dev/gemm/timeline.py [--build] [--shape M N K ...] [--epilogues plain bias silu]

Builds ``variants/diag-timeline.patch``: production's direct kernel with thread 0 of each consumer warpgroup
reading its SM clock when it may issue a tile's products (the other pair has issued its tile), when it has issued
them, when they are done and when the tile is stored, and printing the readings (two tiles per warpgroup) when it
ends. Runs each (shape, epilogue) three times and summarises the last call: per tile of a CTA (the pairs take
them in turns), the median of each reading over the warpgroups of CTAs with that many tiles, and how long the
call's CTAs took from the first start to the last end (``%globaltimer``). Cycles convert to us at the clock the
CTAs ran at. The printing costs time at each CTA's end, so the call's own duration here is not production's.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dev.gemm.direct import launch, variant_specs  # noqa: E402
from dev.tune_kernels import build_all, child_output  # noqa: E402

PATCH = Path(__file__).resolve().parent / "variants" / "diag-timeline.patch"
CALLS = 3  # per (shape, epilogue); the last one's CTAs are summarised


def modules(epilogues: list[str]) -> dict[str, object]:
    """The patched direct module of each epilogue, built in parallel: {epilogue: spec}."""
    specs = variant_specs([PATCH], "bfloat16", epilogues)
    build_all(list(specs.values()))
    return {epilogue: spec for (_, epilogue), spec in specs.items()}


def child(shapes: list[tuple[int, int, int]], epilogues: list[str]) -> None:
    """Runs in a subprocess: every line the kernels print goes to this process's stdout."""
    import torch

    from profiling.harness.ops import get_op
    from profiling.harness.timing import op_input_sets

    found = {e: spec.load() for e, spec in modules(epilogues).items()}
    libc = ctypes.CDLL(None)
    for m, n, k in shapes:
        i = op_input_sets(get_op("gemm"), {"m": m, "n": n, "k": k}, torch.bfloat16, max_sets=1)[0]
        for epilogue, module in found.items():
            for _ in range(CALLS):
                launch(module, i, epilogue)
                torch.cuda.synchronize()
            libc.fflush(None)
            print(f"CASE {m}x{n}x{k} {epilogue}", flush=True)


STAMPS = ("may issue", "issued", "done", "stored")


def summarise(case: str, rows: list[list[int]]) -> None:
    """rows: cta, sm, wg, tiles, g0, g1, cycles, then (may issue, issued, done, stored) of two tiles."""
    rows.sort(key=lambda r: r[4])
    last = rows[-len(rows) // CALLS :]
    start = min(r[4] for r in last)
    ghz = statistics.median(r[6] / max(1, r[5] - r[4]) for r in last)
    span = (max(r[5] for r in last) - start) / 1e3
    print(f"\n{case}: {len(last) // 4} CTAs, clock ~{ghz:.2f} GHz, first start to last end {span:.2f} us")
    starts = sorted(r[4] - start for r in last)
    print(f"  CTA starts within {starts[-1] / 1e3:.2f} us (median {statistics.median(starts) / 1e3:.2f})")
    print(f"  {'tiles':>5} {'tile':>4} " + " ".join(f"{s:>10}" for s in STAMPS) + f" {'products':>9} {'epilogue':>9}")
    for tiles in sorted({r[3] for r in last}):
        group = [r for r in last if r[3] == tiles]
        for j in range(min(tiles, 4)):
            wgs = [r for r in group if r[2] // 2 == j % 2]
            stamps = [[r[7 + 4 * (j // 2) + s] for r in wgs] for s in range(4)]
            med = [statistics.median(v) / ghz / 1e3 for v in stamps]
            products = statistics.median(c - a for a, c in zip(stamps[0], stamps[2], strict=True)) / ghz / 1e3
            epilogue = statistics.median(d - c for c, d in zip(stamps[2], stamps[3], strict=True)) / ghz / 1e3
            columns = " ".join(f"{v:>10.2f}" for v in med)
            print(f"  {tiles:>5} {j:>4} {columns} {products:>9.2f} {epilogue:>9.2f}")
        ends = {}
        for r in group:
            ends[r[0]] = max(ends.get(r[0], 0), r[6])
        end = statistics.median(ends.values()) / ghz / 1e3
        print(f"  {tiles:>5} end  {end:>10.2f} us (median over {len(ends)} CTAs of their last warpgroup's end)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help="build the modules and stop (no GPU needed)")
    parser.add_argument("--shape", nargs=3, type=int, action="append", metavar=("M", "N", "K"))
    parser.add_argument("--epilogues", nargs="+", default=["plain", "bias", "silu"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = [tuple(s) for s in (args.shape or [[16000, 512, 512], [8000, 1024, 256]])]
    if args.build:
        modules(args.epilogues)
        return 0
    if args.child:
        child(shapes, args.epilogues)
        return 0
    shape_args = [v for s in shapes for v in ("--shape", *map(str, s))]
    lines = child_output(__file__, ["--epilogues", *args.epilogues, *shape_args])
    if lines is None:
        return 1
    pending: list[list[int]] = []
    for line in lines:  # a case's lines come before its marker
        if line.startswith("TL "):
            pending.append([int(v) for v in line.split()[1:]])
        elif line.startswith("CASE"):
            summarise(line[5:], pending)
            pending = []
    return 0


if __name__ == "__main__":
    sys.exit(main())
