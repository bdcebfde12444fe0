#!/usr/bin/env python3
"""Sweep the compile-time tunables of oasr's kernels on a GPU, against torch.

Each variant is a set of ``-D`` macros (``OASR_ELEMENTWISE_UNROLL=2``, ``OASR_NORM_BLOCK_THREADS=256``,
... : the tunables the headers under ``include/oasr/`` declare). The op's family module is
built once per variant through the JIT, and each op is timed with the benchmark harness
(graph replay over rotated input sets) on the configs of its benchmark routine (the
Conformer shapes and the large case), next to its torch backend. Prints torch time /
variant time per config (> 1: faster than torch): the data behind the defaults.

    python benchmarks/tune_kernels.py --ops scale swish --dtypes float16 \\
        --variant base= --variant unroll2=OASR_ELEMENTWISE_UNROLL=2
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
import torch

from benchmarks.routines.bench_utils import run_gpu_script
from benchmarks.routines.norm import large_reference_check
from oasr.jit import gen_jit_spec
from profiling.ops import OpSpec, get_op, parse_dtype
from profiling.timing import op_input_sets, require_cuda, time_interleaved


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``name=MACRO=value,MACRO=value`` -> (name, ["-DMACRO=value", ...]); ``name=`` is the defaults."""
    name, _, macros = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"variant {text!r} needs a name: NAME=MACRO=VALUE,...")
    return name, [f"-D{m.strip()}" for m in macros.split(",") if m.strip()]


def family_module(family: str, flags: list[str]) -> Any:
    """The family's JIT module built with ``flags`` added (its own cache entry)."""
    base = getattr(importlib.import_module(f"oasr.jit.{family}"), f"gen_{family}_module")()
    return gen_jit_spec(f"{family}_tuning", base.sources, extra_cuda_cflags=flags).build_and_load()


def routine_configs(op: OpSpec, dtype: torch.dtype) -> list[dict[str, int]]:
    routine = importlib.import_module(f"benchmarks.routines.{op.family}")
    return routine.get_default_configs(dtype)[op.name]


def tune(
    op: OpSpec, dtype: torch.dtype, modules: dict[str, Any], rounds: int, before_each: Callable[[], None] | None = None
) -> pd.DataFrame:
    """Speedup over torch of every variant on every config of ``op``.

    Torch and the variants are timed in turn, ``rounds`` times
    (:func:`profiling.timing.time_interleaved`): clock drift over a run then cannot
    favour whoever is timed first. ``before_each`` runs before each of those timings.
    """
    api = importlib.import_module(f"oasr.{op.family}")
    getter = f"_{op.family}_module"
    default_getter = getattr(api, getter)

    def with_module(module: Any, fn: Any) -> Any:
        # Runs at warm-up and graph capture only: replays launch what was captured.
        setattr(api, getter, lambda: module)
        try:
            return fn()
        finally:
            setattr(api, getter, default_getter)

    rows = []
    for config in routine_configs(op, dtype):
        sets = op_input_sets(op, config, dtype)
        fns = {"torch": [partial(op.backends["torch"], s) for s in sets]}
        for name, module in modules.items():
            fns[name] = [partial(with_module, module, partial(op.backends["oasr"], s)) for s in sets]
        results = time_interleaved(fns, rounds=rounds, iters=10 * rounds, before_each=before_each)
        torch_ms = results["torch"].median_ms
        row: dict[str, Any] = {"op": op.name, "config": op.config_label(config, dtype), "torch_us": torch_ms * 1e3}
        row.update({name: torch_ms / results[name].median_ms for name in modules})
        rows.append(row)
        del sets, fns
        torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", required=True, help="op registry names (one family per run is fastest)")
    parser.add_argument("--dtypes", nargs="+", default=["float16"])
    parser.add_argument("--variant", type=parse_variant, action="append", required=True, help="NAME=MACRO=VALUE,...")
    parser.add_argument("--rounds", type=int, default=3, help="timings of each backend per config, taken in turn")
    parser.add_argument(
        "--after-large-check",
        action="store_true",
        help="time each backend right after the 1 GiB float64 reference check (benchmarks/scale_after_large_op.py)",
    )
    args = parser.parse_args()
    require_cuda("tune_kernels")
    ops = [get_op(name) for name in args.ops]
    variants = dict(args.variant)
    builds = [(family, name) for family in dict.fromkeys(op.family for op in ops) for name in variants]
    with ThreadPoolExecutor(max_workers=8) as pool:  # nvcc runs in subprocesses
        built = pool.map(lambda fv: family_module(fv[0], variants[fv[1]]), builds)
        modules = dict(zip(builds, built, strict=True))
    pd.set_option("display.width", 250)
    before_each = large_reference_check if args.after_large_check else None
    for dtype_name in args.dtypes:
        dtype = parse_dtype(dtype_name)
        for op in ops:
            table = tune(op, dtype, {name: modules[(op.family, name)] for name in variants}, args.rounds, before_each)
            print(f"\n{op.name} {dtype_name}: torch time / variant time (> 1 is faster than torch)")
            print(table.drop(columns="op").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            print("worst: " + "  ".join(f"{name} {table[name].min():.3f}" for name in variants))
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
