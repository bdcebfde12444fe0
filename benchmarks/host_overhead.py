#!/usr/bin/env python3
"""Host cost of one call (argument checks, dispatch, launch) for each op, oasr and torch.

Calls are issued back to back without synchronizing, on the smallest config of each
op's sweep, so the GPU never makes the host wait: the figure is CPU time per call.

    python benchmarks/host_overhead.py
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.routines.bench_utils import run_gpu_script
from profiling.ops import OPS, parse_dtype
from profiling.timing import host_overhead_us, require_cuda


def main() -> int:
    require_cuda("host_overhead")
    print(f"{'op':<16} {'oasr us/call':>13} {'torch us/call':>14}")
    for name, op in OPS.items():
        inputs = op.make_inputs(op.default_sweep[0], parse_dtype("float16"), torch.device("cuda"), 0)
        cost = {
            b: min(host_overhead_us(partial(fn, inputs), calls=200) for _ in range(5)) for b, fn in op.backends.items()
        }
        print(f"{name:<16} {cost['oasr']:13.2f} {cost['torch']:14.2f}")
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
