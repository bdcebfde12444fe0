#!/usr/bin/env python3
"""Where an op's output lives changes its time: the data behind the harness's rotating outputs.

Times torch's ``F.silu`` over rotated inputs (graph replay) four ways: allocating its
output and dropping it at once (the caching allocator then hands the next launch the
same block, still in the L2); allocating it under the harness's rule of keeping the
last ``len(fns)`` results alive (:mod:`profiling.harness.timing`); writing into one shared
``out=``; writing into a rotating ``out=`` per input set. The first and third skip
the write-back of dirty L2 lines that the second and fourth pay alike.

    python dev/harness/output_reuse.py
"""

from __future__ import annotations

import math
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F

from profiling.harness.ops.activation import ACTIVATION_SWEEP
from profiling.harness.timing import require_cuda, rotation_sets, run_gpu_script, time_fn


def dropped(x: torch.Tensor) -> None:
    F.silu(x)


def main() -> int:
    require_cuda("output_reuse")
    columns = ("dropped", "kept", "shared out", "rotated out")
    print(f"{'F.silu fp16 [b, t, c]':<22} {'sets':>4} " + " ".join(f"{c:>12}" for c in columns))
    for config in ACTIVATION_SWEEP:
        shape = (config["b"], config["t"], config["c"])
        count = rotation_sets(4 * math.prod(shape))  # bytes read + written per launch
        inputs = [torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(count)]
        outputs = [torch.empty_like(x) for x in inputs]
        times_us = [
            1e3 * time_fn(fns).median_ms
            for fns in (
                [partial(dropped, x) for x in inputs],
                [partial(F.silu, x) for x in inputs],
                [partial(torch.ops.aten.silu.out, x, out=outputs[0]) for x in inputs],
                [partial(torch.ops.aten.silu.out, x, out=out) for x, out in zip(inputs, outputs, strict=True)],
            )
        ]
        print(f"{shape!s:<22} {count:>4} " + " ".join(f"{t:>10.2f}us" for t in times_us))
        del inputs, outputs
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
