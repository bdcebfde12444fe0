#!/usr/bin/env python3
"""The Conformer encoder end to end (``oasr.models``) against torch on the same module and weights, in bfloat16.

::

    python benchmarks/encoder.py                                   # both configs, the three workloads, the breakdown
    python benchmarks/encoder.py --configs wenet --workloads 64x2.5s --max-autotune
    python benchmarks/encoder.py --no-compile --no-breakdown --no-record

The backends, the workloads and how each is timed are :mod:`profiling.harness.encoder`'s (the workbench's model
page runs the same functions). Every row gives microseconds per encoder call, RTFx (seconds of audio per second of
encoder time) and the speedups over torch eager, torch in a CUDA graph and ``torch.compile``. The breakdown (on
unless ``--no-breakdown``) times each op of the first layer alone on that layer's real inputs: the layer is traced
into an FX graph (dynamo, as ``torch.compile`` does) and every node that computes (not a view) is replayed in a CUDA
graph.

The results are recorded (unless ``--no-record``) per configuration as ``reports/<gpu>/encoder/<config>.speed.csv``
and ``<config>.breakdown.csv`` (base units), each with a ``.json`` provenance sidecar (GPU, commit, torch version,
date): the tables that notebook 10 replays. A run of one configuration leaves the other's recording as it was; a
run of some workloads records those alone for its configurations.
Without a GPU the script exits with one line saying so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
import torch

from oasr.models import CONFIGS
from profiling.harness import device_state
from profiling.harness.encoder import (
    BREAKDOWN,
    BREAKDOWN_COLUMNS,
    RECORDINGS,
    SPEED,
    SPEED_COLUMNS,
    WORKLOADS,
    Workload,
    breakdown,
    build,
    time_workload,
)
from profiling.harness.timing import require_cuda, run_gpu_script
from profiling.provenance import collect
from profiling.workbench.tables import save_table

# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoder.py", description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--max-autotune", action="store_true", help="also torch.compile max-autotune (slow to build)")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--no-breakdown", action="store_true", help="leave the per-op breakdown out")
    parser.add_argument("--iters", type=int, default=30, help="samples per backend (default 30)")
    parser.add_argument(
        "--no-record", action="store_true", help=f"print only: record nothing under reports/<gpu>/{RECORDINGS}/"
    )
    return parser


def print_rows(rows: Sequence[dict[str, Any]]) -> None:
    """One workload's rows, then the oasr encoder's host overhead (its eager time above its graph replay)."""
    ratios = ("x torch eager", "x torch graph", "x torch.compile")
    print(
        f"{'config':<12} {'workload':<9} {'backend':<34} {'us':>10} {'RTFx':>8}" + "".join(f"{r:>16}" for r in ratios)
    )
    for row in rows:
        us, rtfx = 1e6 * row["seconds"], row["rtfx"]
        speedups = (row[f"speedup_vs_torch_{base}"] for base in ("eager", "graph", "compile"))
        print(
            f"{row['config']:<12} {row['workload']:<9} {row['backend']:<34} {us:10.1f} {rtfx:8.0f}"
            + "".join(f"{s:16.2f}" for s in speedups)
        )
    seconds = {row["backend"]: row["seconds"] for row in rows}
    print(f"oasr host overhead (eager - graph): {1e6 * (seconds['oasr eager'] - seconds['oasr graph']):.1f} us")


def print_breakdown(workload: Workload, table: pd.DataFrame) -> None:
    """One layer's ops (:func:`profiling.harness.encoder.breakdown`'s rows), then their sum and the whole layer."""
    name, layer_seconds = table["config"].iloc[0], table["layer_seconds"].iloc[0]
    print(f"\none layer of {name}, {workload.name} (batch {len(workload.frames)}, {max(workload.frames)} frames):")
    for row in table.itertuples():
        print(f"  {row.op:<22} {row.arguments:<44} {1e6 * row.seconds:9.1f} us {100 * row.share:5.1f}%")
    total = table["seconds"].sum()
    print(f"  {'sum of the ops':<67} {1e6 * total:9.1f} us; the layer in one graph: {1e6 * layer_seconds:.1f} us")


def record(
    name: str, speed: Sequence[dict[str, Any]], breakdowns: Sequence[pd.DataFrame], provenance: dict[str, Any]
) -> list[Path]:
    """Store one configuration's speed rows and per-op breakdowns (if any) under ``reports/<gpu>/encoder/`` with
    ``provenance``; returns the CSV paths."""
    gpu = provenance["gpu_slug"]
    paths = [save_table(pd.DataFrame(speed, columns=list(SPEED_COLUMNS)), gpu, name, SPEED, provenance, RECORDINGS)]
    if breakdowns:
        table = pd.concat(breakdowns, ignore_index=True)[list(BREAKDOWN_COLUMNS)]
        paths.append(save_table(table, gpu, name, BREAKDOWN, provenance, RECORDINGS))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_cuda("benchmarks/encoder.py")
    provenance = collect()
    print(f"{provenance['gpu']}, torch {provenance['torch_version']}, commit {provenance['git_commit']}")
    modes = [] if args.no_compile else ["default", *(["max-autotune"] if args.max_autotune else [])]
    for name in args.configs:
        models = build(name)
        rows: list[dict[str, Any]] = []
        breakdowns: list[pd.DataFrame] = []
        with device_state.around() as state:  # the clocks, power and L2 state around this configuration's timing
            for workload_name in args.workloads:
                workload = WORKLOADS[workload_name]
                timed = time_workload(name, workload, models, modes, args.iters)
                print_rows(timed)
                rows += timed
                if not args.no_breakdown:
                    breakdowns.append(breakdown(name, workload, models[0]))
                    print_breakdown(workload, breakdowns[-1])
        if not args.no_record:  # each configuration as soon as it is done: a later failure keeps it
            for path in record(name, rows, breakdowns, {**provenance, "device_state": state}):
                print(f"wrote {path}")
        del models
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
