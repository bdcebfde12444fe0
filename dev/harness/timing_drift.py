#!/usr/bin/env python3
"""How an op's time drifts within one process: the data behind timing backends in turn.

Runs one config of a registry op (by default swish on the 1 GiB fp16 case) with the
benchmark harness's timing, in four phases: after the float64 reference check,
after the check with the allocator's cache emptied, after the check and 50 ms of
untimed launches per backend, and with no check. In each phase
oasr and torch are timed one after the other for several rounds; every round's
median is printed, so a slow first round (whatever ran just before) shows up, and
whether it hits the backend timed first. (It is why the benchmark routines time
before their reference check.)

    python dev/harness/timing_drift.py --op rms_norm --shape 64 8192 1024 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from profiling.harness.correctness import refcheck
from profiling.harness.ops import get_op, parse_dtype
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, settle, time_fn

PHASES = ("after refcheck", "after refcheck + empty_cache", "after refcheck + settle", "no refcheck")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="swish")
    parser.add_argument("--shape", type=int, nargs=3, default=[64, 8192, 1024], metavar=("B", "T", "C"))
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    require_cuda("timing_drift")
    op, dtype = get_op(args.op), parse_dtype(args.dtype)
    config = dict(zip(op.config_fields, args.shape, strict=True))
    sets = op_input_sets(op, config, dtype)
    fns = {backend: [partial(fn, inputs) for inputs in sets] for backend, fn in op.backends.items()}
    print(f"{op.config_label(config)},dtype={dtype}: {len(sets)} input set(s); per-launch median of each round, us")
    print(f"{'phase':<30} {'round':>5} " + " ".join(f"{b:>9}" for b in fns))
    for phase in PHASES:
        if phase != "no refcheck":
            checks = refcheck(op, sets[0], op.backends, dtype)  # the benchmark's --refcheck
            failed = [backend for backend, check in checks.items() if not check["passed"]]
            if failed:
                print(f"{', '.join(failed)} differ from the reference")
            if "empty_cache" in phase:
                torch.cuda.empty_cache()
            if "settle" in phase:
                for backend_fns in fns.values():
                    settle(backend_fns, 0.05)
        for round_ in range(args.rounds):
            times = [1e3 * time_fn(backend_fns, iters=10).median_ms for backend_fns in fns.values()]
            print(f"{phase:<30} {round_:>5} " + " ".join(f"{t:>9.2f}" for t in times))
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
