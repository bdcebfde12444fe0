#!/usr/bin/env python3
"""Where an op's output lives changes its time: the data behind the harness's shared output.

Times torch's ``F.silu`` three ways over rotated inputs (graph replay, the harness's
``time_fn``): allocating its output (the caching allocator hands back the block the
previous launch freed), writing into one shared ``out=``, and writing into a fresh
``out=`` per input set. The first two agree; the third pays for writing back dirty L2
lines of earlier outputs. :func:`profiling.timing.op_input_sets` therefore gives every
backend one shared output.

    python benchmarks/output_reuse.py
"""

from __future__ import annotations

import math
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from benchmarks.routines.bench_utils import run_gpu_script
from profiling.ops.activation import ACTIVATION_SWEEP
from profiling.timing import require_cuda, rotation_sets, time_fn


def main() -> int:
    require_cuda("output_reuse")
    print(f"{'F.silu fp16 [b, t, c]':<24} {'sets':>5} {'allocating':>11} {'shared out':>11} {'rotated out':>12}")
    for config in ACTIVATION_SWEEP:
        shape = (config["b"], config["t"], config["c"])
        count = rotation_sets(4 * math.prod(shape))  # bytes read + written per launch
        inputs = [torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(count)]
        outputs = [torch.empty_like(x) for x in inputs]
        times_us = [
            1e3 * time_fn(fns).median_ms
            for fns in (
                [partial(F.silu, x) for x in inputs],
                [partial(torch.ops.aten.silu.out, x, out=outputs[0]) for x in inputs],
                [partial(torch.ops.aten.silu.out, x, out=out) for x, out in zip(inputs, outputs, strict=True)],
            )
        ]
        print(f"{shape!s:<24} {len(inputs):>5} " + " ".join(f"{t:>9.2f}us" for t in times_us))
        del inputs, outputs
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
