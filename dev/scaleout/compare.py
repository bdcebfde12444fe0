"""A sweep on one GPU against the same sweep on every GPU: wall time, speed-up, start-up, and whether the tables agree.

    python dev/scaleout/compare.py timing --out DIR [--engines local ray] [--sweeps short conformer]
    python dev/scaleout/compare.py ncu --out DIR [--engines local ray]

``timing`` runs two 40-case sweeps (CUDA-graph timing, float64 reference check):
``short`` (rms_norm, 20 small shapes x fp16/bf16: about 0.2 s a case, so start-up
dominates) and ``conformer`` (the seven memory-bound ops at the Conformer shapes of
``benchmarks/testlists/conformer.txt``, the 1 GiB cases included: 20 configs x fp16/bf16,
about a second a case). Each sweep runs in this process on one GPU (``gpus=None``; for
the first sweep its CUDA start-up is included: it is this process's first GPU work), then
through the local engine: on all GPUs with the session's workers not yet started
(``local-Ngpu-cold``: the forkserver's imports, the forks and each worker's CUDA start-up
included; first sweep only), on one GPU (the engine's own cost, short sweep only) and on
all GPUs with warm workers, and with Ray on all GPUs (short sweep only).

``ncu`` profiles a 40-config ``profile_sweep`` (scale, timing preset, both backends) on one
GPU and spread over all: the local engine (the driver runs one ncu per GPU), the same with
a private /tmp per ncu (``unshare -m``, root only), and Ray; each into a fresh store so
that nothing is a cache hit.

Each prints one line per run and writes ``<kind>.csv`` (one row per run, with the speed-ups
and the agreement of the tables per (op, backend, config, dtype): the median ratio of times
and its range), ``<kind>_startup.csv`` (per run and GPU: when its worker was ready, its first
result, that first chunk's own time and the median of the others) and every run's table
(``<kind>-<sweep>-<run>.csv``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from profiling.harness.ops import get_op
from profiling.nsight.sweep import profile_sweep
from profiling.scaleout.engine import start_workers
from profiling.scaleout.gpus import discover
from profiling.scaleout.timing import TimingCase, plan, run_cases

DTYPES = ("float16", "bfloat16")
SHORT_OP = "rms_norm"
SHORT_CONFIGS = [{"b": b, "t": t, "c": 512} for b in (8, 16, 32, 64) for t in (250, 500, 1000, 1500, 2000)]
CONFORMER_OPS = {"scale": 2, "glu": 3, "swish": 3, "layer_norm": 3, "rms_norm": 3, "add_layer_norm": 3,
                 "add_rms_norm": 3}  # fmt: skip
"""Op -> how many of its largest benchmark configs (the Conformer shape and the 1 GiB case among them)."""
NCU_OP = "scale"
NCU_CONFIGS = [{"n": 4096 * k} for k in range(1, 41)]
KEY = ["op", "backend", "config", "dtype"]


def sweep_cases(name: str) -> list[TimingCase]:
    """The 40 cases of the ``short`` or the ``conformer`` sweep."""
    if name == "short":
        return plan(get_op(SHORT_OP), SHORT_CONFIGS, list(DTYPES), check=True)
    cases = []
    for dtype in DTYPES:
        for op_name, count in CONFORMER_OPS.items():
            op = get_op(op_name)
            cases += plan(op, op.benchmark_configs(dtype)[-count:], [dtype], check=True)
    return [dataclasses.replace(case, sweep=cases[0].sweep) for case in cases]  # one sweep: kernels loaded once


def _agreement(base: pd.DataFrame, other: pd.DataFrame, column: str) -> str:
    key = [k for k in KEY if k in base and k in other]
    merged = base[[*key, column]].merge(other[[*key, column]], on=key, suffixes=("_1", "_n"))
    if len(merged) != len(base) or len(merged) != len(other):
        return f"ROWS DIFFER ({len(base)} vs {len(other)}, {len(merged)} in common)"
    ratio = merged[f"{column}_n"] / merged[f"{column}_1"]
    return f"{len(merged)} rows, {column} ratio median {ratio.median():.3f}, range {ratio.min():.3f}-{ratio.max():.3f}"


def _in_process_startup(start: float, arrivals: list[float]) -> list[dict]:
    steps = [b - a for a, b in itertools.pairwise(arrivals)]
    return [{"gpu": "here", "chunks": len(arrivals), "ready_s": 0.0, "first_result_s": round(arrivals[0] - start, 3),
             "first_chunk_s": round(arrivals[0] - start, 3),
             "median_chunk_s": round(statistics.median(steps), 3) if steps else float("nan")}]  # fmt: skip


def timing(out: Path, engines: list[str], sweeps: list[str]) -> tuple[list[dict], list[dict]]:
    gpus = discover()
    every = f"{len(gpus)}gpu"
    rows, startup = [], []
    for number, sweep in enumerate(sweeps):
        cases = sweep_cases(sweep)
        runs = [("in-process-1gpu", None, "local")]
        if number == 0:
            runs.append((f"local-{every}-cold", "all", "local"))
        if sweep == "short":
            runs.append(("local-1gpu", 1, "local"))
        runs.append((f"local-{every}", "all", "local"))
        if sweep == "short":
            runs += [(f"{engine}-{every}", "all", engine) for engine in engines if engine != "local"]
        tables = {}
        for name, spread, engine in runs:
            if spread is not None and engine == "local" and not name.endswith("-cold"):
                start_workers(spread).join()  # warm: the workers of the session are up
            arrivals: list[float] = []
            start = time.perf_counter()
            found, run = run_cases(cases, gpus=spread, engine=engine,
                                   on_rows=lambda batch, seen=arrivals: seen.append(time.perf_counter()))  # fmt: skip
            wall = time.perf_counter() - start
            table = pd.DataFrame(found)
            tables[name] = table
            table.to_csv(out / f"timing-{sweep}-{name}.csv", index=False)
            failed = len(run.errors) if run is not None else 0
            rows.append({"sweep": sweep, "run": name, "cases": len(cases), "failed": failed, "wall_s": round(wall, 2),
                         "gpus_used": table["gpu_device"].nunique() if len(table) else 0,
                         "refcheck_pass": int((table.get("refcheck") == "pass").sum()),
                         "rows": len(table)})  # fmt: skip
            where = run.startup() if run is not None else _in_process_startup(start, arrivals)
            startup += [{"sweep": sweep, "run": name, **row} for row in where]
            print(f"[timing {sweep}] {name}: {wall:.1f} s, {len(table)} rows on GPUs "
                  f"{sorted(table['gpu_device'].unique()) if len(table) else []}", flush=True)  # fmt: skip
            if run is not None:
                print(run.summary(), flush=True)
        mine = [row for row in rows if row["sweep"] == sweep]
        by_name = {row["run"]: row for row in mine}
        one = by_name.get("local-1gpu", by_name["in-process-1gpu"])["wall_s"]
        for row in mine:
            row["speedup_vs_in_process"] = round(by_name["in-process-1gpu"]["wall_s"] / row["wall_s"], 3)
            row["speedup_vs_1gpu_engine"] = round(one / row["wall_s"], 3)
            row["agreement"] = _agreement(tables["in-process-1gpu"], tables[row["run"]], "seconds")
    return rows, startup


def ncu(out: Path, engines: list[str]) -> tuple[list[dict], list[dict]]:
    runs = [("in-process-1gpu", None, "local", False)]
    for engine in engines:
        runs.append((f"{engine}-all", "all", engine, False))
        if engine == "local" and os.geteuid() == 0 and shutil.which("unshare"):
            runs.append(("local-all-private-tmp", "all", "local", True))
    rows, startup, tables = [], [], {}
    for name, spread, engine, private_tmp in runs:
        with tempfile.TemporaryDirectory(prefix="oasr-scaleout-", dir="/var/tmp") as store:
            start = time.perf_counter()
            result = profile_sweep(NCU_OP, configs=NCU_CONFIGS, preset="timing", live=True, force=True,
                                   reports_dir=Path(store), gpus=spread, engine=engine,
                                   private_tmp=private_tmp)  # fmt: skip
            wall = time.perf_counter() - start
        launches = result.launches.assign(op=NCU_OP, config=lambda f: "n=" + f["n"].astype(str))
        tables[name] = launches
        launches.to_csv(out / f"ncu-{name}.csv", index=False)
        rows.append({"run": name, "configs": len(NCU_CONFIGS), "wall_s": round(wall, 2), "launches": len(launches),
                     "gpus_used": launches["gpu_device"].nunique()})  # fmt: skip
        startup += [{"run": name, **row} for row in result.startup]
        print(f"[ncu] {name}: {wall:.1f} s, {len(launches)} launches", flush=True)
        if result.placement:
            print(result.placement, flush=True)
    for row in rows:
        row["speedup_vs_in_process"] = round(rows[0]["wall_s"] / row["wall_s"], 3)
        row["agreement"] = _agreement(tables[rows[0]["run"]], tables[row["run"]], "duration_s")
    return rows, startup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("timing", "ncu"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engines", nargs="+", default=["local"], choices=("local", "ray"))
    parser.add_argument("--sweeps", nargs="+", default=["short", "conformer"], choices=("short", "conformer"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, startup = (
        timing(args.out, args.engines, args.sweeps) if args.kind == "timing" else ncu(args.out, args.engines)
    )
    frame = pd.DataFrame(rows)
    frame.to_csv(args.out / f"{args.kind}.csv", index=False)
    pd.DataFrame(startup).to_csv(args.out / f"{args.kind}_startup.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 90):
        print(frame.to_string(index=False))
        print(pd.DataFrame(startup).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
