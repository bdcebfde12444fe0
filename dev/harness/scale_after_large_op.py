#!/usr/bin/env python3
"""Small scale launches right after the float64 check of a 1 GiB op: where the time goes.

In the Conformer testlist, the first scale case after a 1 GiB norm row (4 KiB, bf16)
timed oasr at 0.80x torch, while the same case alone was 1.00x
(``dev/harness/testlists/scale_after_large_op.txt``). This script times that case round
by round in three phases: with nothing before it, right after the 1 GiB
``add_rms_norm`` reference check, and after that check and ``--pause`` seconds idle.
Each round prints oasr's and torch's per-launch medians and the seconds since the
phase began, so a slow state shows how long it lasts and whom it hits.

On the H200 (``reports/h200/dev/harness/scale_after_large_op_probe.txt``) it hit oasr
alone, in fp16 too, for its first 2-3 rounds after the check, pause or not, at full
clocks; under ncu both kernels took as long. The cause was oasr's evict-first
(streaming) loads and stores, which lose L2 ways to the lines the check left behind:
tensors under 64 KiB now take plain ones (``include/oasr/common/elementwise.cuh``).

With ``--ncu`` it launches each backend ``--launches`` times per phase instead, eagerly
inside the NVTX range ``probe`` (domain ``probe``), oasr's then torch's, for
``ncu --nvtx --nvtx-include "probe@probe/"`` to read each kernel's own duration and clocks.

    python dev/harness/scale_after_large_op.py --dtype bfloat16 --size 2048
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nvtx
import torch

from profiling.harness.correctness import refcheck
from profiling.harness.ops import get_op, parse_dtype
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

PHASES = ("nothing before", "after 1 GiB check", "after 1 GiB check + pause")


def large_reference_check() -> None:
    """The benchmark's float64 check of the 1 GiB fp16 ``add_rms_norm`` case (``--refcheck``)."""
    op, dtype = get_op("add_rms_norm"), torch.float16
    inputs = op.make_inputs(op.benchmark_configs(dtype)[-1], dtype, torch.device("cuda"), 0)
    refcheck(op, inputs, op.backends, dtype)
    torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--size", type=int, default=2048, help="elements")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--pause", type=float, default=2.0, help="idle seconds in the last phase")
    parser.add_argument("--ncu", action="store_true", help="eager launches in NVTX ranges, for ncu")
    parser.add_argument("--launches", type=int, default=20, help="per backend and phase, with --ncu")
    args = parser.parse_args()
    require_cuda("scale_after_large_op")
    op, dtype = get_op("scale"), parse_dtype(args.dtype)
    sets = op_input_sets(op, {"n": args.size}, dtype)
    fns = {backend: [partial(fn, inputs) for inputs in sets] for backend, fn in op.backends.items()}
    print(f"n={args.size},dtype={dtype}: {len(sets)} input sets; per-launch median of each round, us")
    print(f"{'phase':<28} {'round':>5} {'t (s)':>6} " + " ".join(f"{b:>7}" for b in fns))
    for phase in PHASES:
        if phase != "nothing before":
            large_reference_check()
        if "pause" in phase:
            time.sleep(args.pause)
        start = time.perf_counter()
        print(f"# {phase} begins at {time.strftime('%H:%M:%S')}.{int(1e3 * (time.time() % 1)):03d}")
        if args.ncu:
            with nvtx.annotate("probe", domain="probe"):
                for backend_fns in fns.values():
                    for i in range(args.launches):
                        backend_fns[i % len(backend_fns)]()
            torch.cuda.synchronize()
            print(f"{phase:<28} launched in {time.perf_counter() - start:.3f} s")
            continue
        for round_ in range(args.rounds):
            results = time_interleaved(fns, rounds=1, iters=10, discarded_rounds=0)
            times = " ".join(f"{1e3 * result.median_ms:>7.2f}" for result in results.values())
            print(f"{phase:<28} {round_:>5} {time.perf_counter() - start:>6.2f} {times}")
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
