"""A sweep on one GPU against the same sweep on every GPU: wall time, speed-up, and whether the tables agree.

    python dev/scaleout/compare.py timing --out DIR [--engines local ray]
    python dev/scaleout/compare.py ncu --out DIR

``timing``: a 40-case timing sweep (rms_norm, 20 shapes x fp16/bf16, CUDA-graph timing,
float64 reference check) in this process on one GPU (``gpus=None``, the baseline, CUDA
start-up included: it is this process's first GPU work), then through the local engine on
one GPU (what the engine costs by itself) and on all GPUs with each engine. ``ncu``: a
40-config ``profile_sweep`` (scale, timing preset, both backends) on one GPU and spread
over all, each into a fresh store so that nothing is a cache hit. Each prints one line per
run and writes ``<kind>.csv`` (one row per run) and the tables (``<kind>-<run>.csv``); the
tables are compared per (backend, config, dtype): the median ratio of times and the largest, and the reference checks.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from profiling.harness.ops import get_op
from profiling.nsight.sweep import profile_sweep
from profiling.scaleout.gpus import discover
from profiling.scaleout.timing import measure_sweep

TIMING_OP = "rms_norm"
TIMING_CONFIGS = [{"b": b, "t": t, "c": 512} for b in (8, 16, 32, 64) for t in (250, 500, 1000, 1500, 2000)]
NCU_OP = "scale"
NCU_CONFIGS = [{"n": 4096 * k} for k in range(1, 41)]
KEY = ["backend", "config", "dtype"]


def _agreement(base: pd.DataFrame, other: pd.DataFrame, column: str) -> str:
    merged = base[[*KEY, column]].merge(other[[*KEY, column]], on=KEY, suffixes=("_1", "_n"))
    if len(merged) != len(base) or len(merged) != len(other):
        return f"ROWS DIFFER ({len(base)} vs {len(other)}, {len(merged)} in common)"
    ratio = merged[f"{column}_n"] / merged[f"{column}_1"]
    return f"{len(merged)} rows, {column} ratio median {ratio.median():.3f}, range {ratio.min():.3f}-{ratio.max():.3f}"


def timing(out: Path, engines: list[str]) -> list[dict]:
    op = get_op(TIMING_OP)
    gpus = discover()
    runs = [("in-process-1gpu", None, "local"), ("local-1gpu", 1, "local")]  # the engine's own cost on one GPU
    runs += [(f"{engine}-{len(gpus)}gpu", "all", engine) for engine in engines]
    rows, tables = [], {}
    for name, spread, engine in runs:
        start = time.perf_counter()
        table = measure_sweep(op, TIMING_CONFIGS, ["float16", "bfloat16"], gpus=spread, engine=engine, check=True)
        wall = time.perf_counter() - start
        tables[name] = table
        table.to_csv(out / f"timing-{name}.csv", index=False)
        rows.append({"run": name, "cases": len(TIMING_CONFIGS) * 2, "wall_s": round(wall, 2),
                     "gpus_used": table["gpu_device"].nunique(),
                     "refcheck_pass": int((table["refcheck"] == "pass").sum()), "rows": len(table)})  # fmt: skip
        print(f"[timing] {name}: {wall:.1f} s, {len(table)} rows on GPUs {sorted(table['gpu_device'].unique())}")
        if "placement" in table.attrs:
            print(table.attrs["placement"])
    base = rows[0]["wall_s"]
    for row in rows:
        row["speedup_vs_in_process"] = round(base / row["wall_s"], 3)
        row["agreement"] = _agreement(tables[rows[0]["run"]], tables[row["run"]], "seconds")
    for row in rows:
        row["speedup_vs_local_1gpu"] = round(rows[1]["wall_s"] / row["wall_s"], 3)
    return rows


def ncu(out: Path, engines: list[str]) -> list[dict]:
    runs = [("in-process-1gpu", None, "local")]
    for engine in engines:
        runs += [(f"{engine}-all", "all", engine)]
    rows, tables = [], {}
    for name, spread, engine in runs:
        with tempfile.TemporaryDirectory(prefix="oasr-scaleout-") as store:
            start = time.perf_counter()
            result = profile_sweep(NCU_OP, configs=NCU_CONFIGS, preset="timing", live=True, force=True,
                                   reports_dir=Path(store), gpus=spread, engine=engine)  # fmt: skip
            wall = time.perf_counter() - start
        launches = result.launches.assign(config=lambda f: "n=" + f["n"].astype(str))
        tables[name] = launches
        launches.to_csv(out / f"ncu-{name}.csv", index=False)
        rows.append({"run": name, "configs": len(NCU_CONFIGS), "wall_s": round(wall, 2), "launches": len(launches),
                     "gpus_used": launches["gpu_device"].nunique()})  # fmt: skip
        print(f"[ncu] {name}: {wall:.1f} s, {len(launches)} launches")
        if result.placement:
            print(result.placement)
    for row in rows:
        row["speedup_vs_in_process"] = round(rows[0]["wall_s"] / row["wall_s"], 3)
        row["agreement"] = _agreement(tables[rows[0]["run"]], tables[row["run"]], "duration_s")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("timing", "ncu"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engines", nargs="+", default=["local"], choices=("local", "ray"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = (timing if args.kind == "timing" else ncu)(args.out, args.engines)
    frame = pd.DataFrame(rows)
    frame.to_csv(args.out / f"{args.kind}.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 90):
        print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
