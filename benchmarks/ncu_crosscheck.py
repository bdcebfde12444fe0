#!/usr/bin/env python3
"""Do the benchmark's times agree with Nsight Compute's ``gpu__time_duration``?

Times each backend of an op with the benchmark harness (``profiling.harness.timing``:
CUDA-graph replay, rotated inputs), profiles the same configs with the ``timing``
preset in one ncu process, and prints both per launch with their difference.
The benchmark's per-launch time includes the gap between back-to-back kernels,
so small sizes read higher than ncu's; from 16 MiB on the two should agree.

    python benchmarks/ncu_crosscheck.py --op scale --dtype float16 --min-bytes 16777216
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling import commands

if __name__ == "__main__":
    commands.starting(commands.crosscheck_parser())  # --help and usage errors before the imports below load torch

import pandas as pd

from profiling.harness.measure import measure
from profiling.harness.ops import get_op, parse_dtype
from profiling.nsight.sweep import profile_sweep


def crosscheck(op_name: str, dtype: str, min_bytes: int) -> pd.DataFrame:
    op = get_op(op_name)
    configs = [c for c in op.default_sweep if op.work(c, parse_dtype(dtype)).bytes >= min_bytes]
    bench = measure(op, configs, [dtype])
    # The profiles are this check's own, not recordings: kept out of reports/.
    with tempfile.TemporaryDirectory(prefix="oasr-crosscheck-") as scratch:
        profiled = profile_sweep(
            op_name, configs=configs, dtypes=[dtype], preset="timing", force=True, live=True, reports_dir=Path(scratch)
        )
    ncu = profiled.launches[["backend", "config", "duration_s"]]
    table = bench.merge(ncu, on=["backend", "config"], how="left")
    table["bench_us"] = table["seconds"] * 1e6
    table["ncu_us"] = table["duration_s"] * 1e6
    table["diff_pct"] = 100 * (table["bench_us"] - table["ncu_us"]) / table["ncu_us"]
    return table[["backend", "config", "dtype", "bytes", "bench_us", "ncu_us", "diff_pct"]]


def main() -> int:
    args = commands.crosscheck_parser().parse_args()
    table = crosscheck(args.op, args.dtype, args.min_bytes)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    worst = table["diff_pct"].abs().max()
    print(f"largest difference {worst:.1f}% (tolerance {args.tolerance_pct}%)")
    return 0 if worst <= args.tolerance_pct else 1


if __name__ == "__main__":
    commands.started()
    sys.exit(main())
