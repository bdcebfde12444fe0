#!/usr/bin/env python3
"""The fused front end against edited copies of its header, in one run (needs an sm90 GPU).

    python dev/conv2d/variants.py NAME=INCLUDE_DIR ...   # e.g. ffma=.dev/variants/ffma/include
    python dev/conv2d/variants.py NAME=PATCH ...         # e.g. persistent=dev/conv2d/variants/persistent-tiles.patch

Each variant is the conv2d module built against INCLUDE_DIR (a copy of ``include/`` whose
``oasr/conv2d/subsampling.cuh`` is edited), or against a copy of ``include/`` with PATCH applied (``patch -p1``
from the repo root's level; the copy goes to ``.dev/variants/NAME``); it is checked against the float64
reference and timed next to the production module (CUDA-graph replay, interleaved, the harness's timing) at
B16 T1500 F80 d256 and B64 T250 F80 d256, bf16. What was tried this way, and the patches of the kernel's earlier
steps (in git history): ``RESULTS.md``.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_conv2d import front_end, subsampling_reference

from oasr.conv2d import pack_subsampling_weight2  # (after the checkout is on the path)
from oasr.jit.families import CONV2D
from profiling.harness import timing

ROOT = Path(__file__).resolve().parents[2]


def include_dir(name: str, source: str) -> Path:
    """SOURCE itself when it is a folder; for a patch, a copy of include/ with it applied."""
    path = Path(source).resolve()
    if path.is_dir():
        return path
    copy = ROOT / ".dev" / "variants" / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(ROOT / "include", copy / "include")
    subprocess.run(["patch", "-s", "-p1", "-d", str(copy), "-i", str(path)], check=True)
    return copy / "include"


def main() -> int:
    timing.require_cuda("dev/conv2d/variants.py")
    modules = {"prod": CONV2D.module()}
    for arg in sys.argv[1:]:
        name, source = arg.split("=", 1)
        spec = CONV2D.jit_spec(name=f"conv2d_variant_{name}", include_dir=include_dir(name, source))
        modules[name] = spec.build_and_load()
    failed = 0
    for b, t in ((16, 1500), (64, 250)):
        x, w1, b1, w2, b2 = front_end(b, t, 80, 256, torch.bfloat16, "cuda")
        args = (x, w1.reshape(256, 3, 3).contiguous(), b1, pack_subsampling_weight2(w2), b2)
        expected = subsampling_reference(x, w1, b1, w2, b2)
        fns = {}
        for name, module in modules.items():
            out = torch.full(tuple(expected.shape), float("nan"), dtype=x.dtype, device="cuda")
            module.conv2d_subsampling(out, *args)
            error = (out.double() - expected).abs().max().item()
            failed |= not error < 0.05
            print(f"B{b} T{t}: {name:8s} max |error| {error:.3g}")
            fns[name] = [functools.partial(module.conv2d_subsampling, out, *args)]
        results = timing.time_interleaved(fns, rounds=2, iters=20)
        for name in fns:
            print(f"B{b} T{t}: {name:8s} {results[name].median_ms * 1e3:8.1f} us", flush=True)
    return failed


if __name__ == "__main__":
    timing.run_gpu_script(main, __file__)
