#!/usr/bin/env python3
"""Odd grouped problems for compute-sanitizer: the direct kernel and CUTLASS's, each checked against float64.

    compute-sanitizer --tool memcheck python dev/group_gemm/sanitize.py    (dev/group_gemm/h200.sh sanitize)

Cases: empty groups and one group taking every row, rows and N off the tiles, K below one k-block, a bias,
fp16 and bf16; the direct kernel (gemm_config.DIRECT) and 128x256 cooperative (GROUP_WIDE). Each result is
held to the harness op's float64 loop and tolerances (``profiling/harness/ops/group_gemm.py``, as
``bench.py``); exits 1 on a wrong result.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path; registers oasr.group_gemm)
from oasr.jit import gemm_config
from profiling.harness.correctness import compare
from profiling.harness.ops import group_gemm as op_module

group_module = sys.modules["oasr.group_gemm"]

CASES = [  # group sizes, N, K
    ([0, 37, 0, 90, 1], 24, 8),
    ([131], 136, 72),
    ([5, 0, 0, 250], 64, 200),
]


def main() -> int:
    wrong = 0
    g = torch.Generator(device="cuda").manual_seed(0)
    for sizes, n, k in CASES:
        rows = sum(sizes)
        ends = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
        for dtype in (torch.bfloat16, torch.float16):
            x = torch.randn(rows, k, device="cuda", generator=g).to(dtype)
            w = (torch.randn(len(sizes), n, k, device="cuda", generator=g) / k**0.5).to(dtype)
            b = torch.randn(len(sizes), n, device="cuda", generator=g).to(dtype)
            expected = op_module.reference({"x": x, "weight": w, "sizes": sizes})
            expected += b.double().repeat_interleave(torch.tensor(sizes, device="cuda"), dim=0)
            rtol, atol = op_module.GROUP_GEMM.tolerance(dtype)
            for config in (gemm_config.DIRECT, gemm_config.GROUP_WIDE):
                out = torch.full((rows, n), float("nan"), device="cuda", dtype=dtype)
                group_module._launch(x, w, ends, b, out, config)
                check = compare(out, expected, rtol, atol)
                wrong += not check["passed"]
                verdict = "ok" if check["passed"] else "WRONG"
                print(f"{sizes} N={n} K={k} {dtype} {config.name}: max error {check['max_abs_err']:.3g} {verdict}")
    torch.cuda.synchronize()
    oasr.group_gemm_check()
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
