#!/usr/bin/env python3
"""Sweep the launch shape of the element-wise kernels (common/elementwise.cuh) on a GPU.

Builds the scale module once per (threads, unroll, waves) variant through the JIT
(-DOASR_ELEMENTWISE_*), times each against torch's ``x * factor`` over the scale
sweep with the benchmark harness, and prints time relative to torch per size:
the data behind the defaults in elementwise.cuh.

    python benchmarks/tune_elementwise.py --dtype float16
"""

from __future__ import annotations

import argparse
import itertools
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
import torch

from oasr.jit import env, gen_jit_spec
from profiling.ops import get_op, parse_dtype
from profiling.timing import op_input_sets, time_fn


def variant_module(threads: int, unroll: int, waves: int):
    flags = [
        f"-DOASR_ELEMENTWISE_THREADS={threads}",
        f"-DOASR_ELEMENTWISE_UNROLL={unroll}",
        f"-DOASR_ELEMENTWISE_WAVES={waves}",
    ]
    sources = [env.OASR_CSRC_DIR / "scale.cu", env.OASR_CSRC_DIR / "scale_jit_binding.cu"]
    return gen_jit_spec("scale_tuning", sources, extra_cuda_cflags=flags).build_and_load()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--threads", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--unroll", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--waves", type=int, nargs="+", default=[4, 32])
    args = parser.parse_args()
    op, dtype = get_op("scale"), parse_dtype(args.dtype)
    variants = list(itertools.product(args.threads, args.unroll, args.waves))
    with ThreadPoolExecutor(max_workers=8) as pool:  # nvcc runs in subprocesses
        modules = dict(zip(variants, pool.map(lambda v: variant_module(*v), variants), strict=True))
    rows = []
    for config in op.default_sweep:
        sets = op_input_sets(op, config, dtype)
        torch_s = time_fn([partial(op.backends["torch"], s) for s in sets]).median_ms
        row = {"MiB": op.work(config, dtype).bytes / 2**20, "torch_us": torch_s * 1e3}
        for variant, module in modules.items():
            fns = [partial(module.run, s["out"], s["x"], s["factor"]) for s in sets]
            row["t{} u{} w{}".format(*variant)] = torch_s / time_fn(fns).median_ms
        rows.append(row)
        del sets
        torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    print(f"speedup over torch (>1 is faster), {args.dtype}:")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    variant_columns = table.columns[2:]
    print("worst-case speedup per variant:")
    print(table[variant_columns].min().sort_values(ascending=False).to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
