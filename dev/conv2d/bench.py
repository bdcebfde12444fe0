#!/usr/bin/env python3
"""The conv2d family on the H200: builds, then times the issue's shapes against torch.

    python dev/conv2d/bench.py --build [--jobs 14]   # every module the tests and the timing use, in parallel
    python dev/conv2d/bench.py [--csv out.csv]       # time and check (needs an sm90 GPU)
    python dev/conv2d/bench.py --front               # the fused front end alone (the direct module only)
    python dev/conv2d/bench.py --tiles               # the implicit-GEMM tiles alone

Timing: the harness's ``measure`` (CUDA-graph replay, inputs rotated past the L2, backends interleaved,
2 rounds of 20 samples), bf16, each backend checked after its timing against a float64 reference that rounds
where it rounds (torch's also stores each conv's output before its separate bias add,
``profiling/harness/ops/conv2d.py``): ``oasr``, ``torch`` (channels-last memory, cuDNN's NHWC kernels) and
``torch_nchw``, on the conv2d ops' default sweeps
(upstream Oasr's conv2d list, the front end's conv #1 and conv #2 at B16 T1500 F80 d256, and the
fused front end). The summary compares the issue's three shapes with their targets; then every CUTLASS
tile (the rule's picks, ``oasr/jit/conv2d_config.py``, and the candidates :data:`TILES`) is timed on each
implicit-GEMM shape of the sweep.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oasr.jit import conv2d_config  # (after the checkout is on the path)
from oasr.jit.core import build_in_parallel
from oasr.jit.families import CONV2D
from profiling.harness import timing
from profiling.harness.measure import measure
from profiling.harness.ops import conv2d

TILES = [
    conv2d_config.Conv2dConfig(64, 256, 64, 1, 1),
    conv2d_config.Conv2dConfig(128, 128, 64, 2, 1),
    conv2d_config.Conv2dConfig(128, 128, 64, 1, 2),
    conv2d_config.Conv2dConfig(128, 256, 64, 2, 1, 2),
    conv2d_config.Conv2dConfig(128, 128, 64, 1, 1, 2),
]
"""Candidate tiles the rule does not pick, timed next to its picks (bf16 + ReLU): 64x256 on one consumer
warpgroup was conv #2's pick before the two-consumer kernel. 128x256 on one consumer warpgroup is left out:
its 256 accumulators per thread spill (2831 us on conv #2, ``RESULTS.md``)."""
TILE_VARIANTS = [conv2d_config.implicit_gemm_variant("bfloat16", "relu", tile) for tile in TILES]

# (what, op, config, target in us): the targets (B16 T1500 F80 d256, bf16, device time).
TARGETS = [
    ("conv #1 + bias + ReLU", "conv2d", {"n": 16, "h": 1500, "w": 80, "c": 1, "k": 256, "r": 3, "stride": 2}, 75.0),
    ("conv #2 + bias + ReLU", "conv2d", {"n": 16, "h": 749, "w": 39, "c": 256, "k": 256, "r": 3, "stride": 2}, 200.0),
    ("fused front end", "conv2d_subsampling", {"b": 16, "t": 1500, "f": 80, "d": 256}, 230.0),
]


def build(jobs: int) -> None:
    specs = [
        CONV2D.jit_spec(variant=v) for v in [None, *conv2d_config.implicit_gemm_variants(tests=True), *TILE_VARIANTS]
    ]
    build_in_parallel(specs, jobs)  # a candidate tile CUTLASS refuses is reported; the others go on


def tiles() -> None:
    """Every tile (the rule's picks and :data:`TILES`) next to torch channels-last on each implicit-GEMM shape
    of the sweep (C and K multiples of 8), bf16 + bias + ReLU; ``*`` marks the rule's pick."""
    print("implicit-GEMM tiles (bf16 + bias + ReLU, CUDA-graph device time; * the rule's pick):")
    modules = {}
    for tile in list(conv2d_config.PICKS) + TILES:
        try:
            spec = CONV2D.jit_spec(variant=conv2d_config.implicit_gemm_variant("bfloat16", "relu", tile))
            modules[tile] = spec.build_and_load()
        except Exception as error:
            print(f"  {tile.name}: not built ({str(error).splitlines()[0] if str(error) else type(error).__name__})")
    for config in (c for c in conv2d.CONV2D.default_sweep if c["c"] % 8 == 0 and c["k"] % 8 == 0):
        sets = timing.op_input_sets(conv2d.CONV2D, config, "bfloat16")
        reference = conv2d.CONV2D.reference(sets[0])
        fns = {"torch": [functools.partial(conv2d.CONV2D.backends["torch"], i) for i in sets]}
        errors = {}
        for tile, module in modules.items():
            name = tile.name + (" *" if tile == conv2d_config.choose(config["k"]) else "")

            def run(i, module=module):
                st, pad = i["stride"], i["pad"]
                module.conv2d_implicit_gemm(i["out"], i["x"], i["weight"], i["bias"], st, st, pad, pad, "relu")
                return i["out"]

            sets[0]["out"].fill_(float("nan"))
            errors[name] = (run(sets[0]).double() - reference).abs().max().item()
            fns[name] = [functools.partial(run, i) for i in sets]
        results = timing.time_interleaved(fns, rounds=2, iters=20)
        torch_ms = results["torch"].median_ms
        print(f"  {conv2d.CONV2D.config_label(config)}: torch channels-last {torch_ms * 1e3:.1f} us")
        for name, error in errors.items():
            ms = results[name].median_ms
            line = f"{name:20s} {ms * 1e3:8.1f} us  x{torch_ms / ms:.2f} of torch  max |error| {error:.3g}"
            print("    " + line, flush=True)


def bench(csv: Path | None, front: bool) -> int:
    timing.require_cuda("dev/conv2d/bench.py")
    frames = []
    for op in (conv2d.CONV2D_SUBSAMPLING,) if front else (conv2d.CONV2D, conv2d.CONV2D_SUBSAMPLING):
        frame = measure(op, op.default_sweep, ["bfloat16"], rounds=2, iters=20, check=True)
        frames.append(frame)
        table = frame[
            ["op", "config", "backend", "seconds", "speedup_vs_torch", "flop_per_s", "pct_of_copy", "refcheck"]
        ]
        table = table.assign(us=table.seconds * 1e6, tflops=table.flop_per_s / 1e12).drop(
            columns=["seconds", "flop_per_s"]
        )
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"), flush=True)
    results = pd.concat(frames, ignore_index=True)
    if csv is not None:
        results.to_csv(csv, index=False)
    print("\nissue targets (bf16, CUDA-graph device time):")
    failed = int((results.refcheck == "fail").any())
    for what, name, config, target in TARGETS[2:] if front else TARGETS:
        op = conv2d.CONV2D if name == "conv2d" else conv2d.CONV2D_SUBSAMPLING
        label = op.config_label(config)
        rows = results[(results.op == name) & (results.config == label)].set_index("backend")
        us = {b: rows.loc[b, "seconds"] * 1e6 for b in rows.index}
        verdict = "met" if us["oasr"] <= target else "NOT met"
        print(
            f"  {what:24s} oasr {us['oasr']:8.1f} us (target <= {target:.0f}: {verdict}); torch channels-last "
            f"{us['torch']:8.1f} us, NCHW {us['torch_nchw']:8.1f} us"
        )
    if front:
        return failed
    slower = results[(results.backend == "oasr") & (results.speedup_vs_torch < 1.0)]
    print(f"\noasr slower than torch channels-last on {len(slower)} shapes: {', '.join(slower.config) or 'none'}")
    print()
    tiles()
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="build the modules, then stop")
    parser.add_argument("--jobs", type=int, default=8, help="parallel builds (~45 s and ~1.8 GB each for CUTLASS)")
    parser.add_argument("--csv", type=Path, help="write every row here")
    parser.add_argument("--front", action="store_true", help="time the fused front end alone")
    parser.add_argument("--tiles", action="store_true", help="time the implicit-GEMM tiles alone")
    args = parser.parse_args()
    if args.build:
        build(args.jobs)
        return 0
    if args.tiles:
        timing.require_cuda("dev/conv2d/bench.py")
        tiles()
        return 0
    return bench(args.csv, args.front)


if __name__ == "__main__":
    timing.run_gpu_script(main, __file__)
