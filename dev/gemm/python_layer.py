#!/usr/bin/env python3
"""The gemm and bmm families' Python layer alone, on any machine (no GPU needed): what ``oasr.gemm`` and ``oasr.bmm``
cost the host before the launch, split into their parts.

    python dev/gemm/python_layer.py

The calls run on CPU tensors (375x256 by 1024x256, bf16, ``out=`` given; bmm: attention's two products, 64 heads of
375 frames by 64, the scores' rows padded to 16 bytes): the CPU is marked a ready device and the families' modules are
a stand-in whose ``gemm`` and ``bmm`` return at once, so the figures are the checks, the layout work and the
dispatch, without the launch (``dev/gemm/eager.py`` times whole calls on the H200). Best of five runs of 20000 calls.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr  # (after the checkout is on the path)
from oasr._checks import ready_devices
from oasr.jit import gemm_config
from oasr.jit.families import BMM, GEMM
from profiling.compare import stand_in
from profiling.harness.timing import host_overhead_us

gemm_module = sys.modules["oasr.gemm"]
bmm_module = sys.modules["oasr.bmm"]


class _Launch:
    """The modules' stand-in: takes a launcher's arguments and returns 0 (launched)."""

    def gemm(self, *args: object) -> int:
        return 0

    def bmm(self, *args: object) -> int:
        return 0


def per_call_us(fn: Callable[[], object]) -> float:
    return min(host_overhead_us(fn, calls=20000, warmup=1000) for _ in range(5))


def main() -> None:
    stand_ins = contextlib.ExitStack()  # held until main returns
    for family in (GEMM, BMM):
        ready_devices(family).add(torch.device("cpu"))
        stand_ins.enter_context(stand_in(family, _Launch()))
    m, n, k = 375, 1024, 256
    x, w = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16)
    bias, out = torch.randn(n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    rows = {
        "oasr.gemm(x, w, out=out)": lambda: oasr.gemm(x, w, out=out),
        "oasr.gemm(x, w, bias, 'silu', out=out)": lambda: oasr.gemm(x, w, bias, "silu", out=out),
        "  _check_gemm": lambda: gemm_module._check_gemm("gemm", x, w, None, None, out, False),
        "  _linear (the stand-in's launch included)": lambda: gemm_module._linear(x, w, None, None, out),
        "    gemm_config.choose": lambda: gemm_config.choose(m, n, k),
        "    a [None] view (what the launcher took before 2-D views)": lambda: x[None],
    }
    q, keys, v = (torch.randn(64, 375, 64, dtype=torch.bfloat16) for _ in range(3))
    keys_t = keys.transpose(1, 2)
    scores = torch.empty(64, 375, 376, dtype=torch.bfloat16)[..., :375]
    context = torch.empty(64, 375, 64, dtype=torch.bfloat16)
    rows |= {
        "oasr.bmm(q, keys_t, out=scores)": lambda: oasr.bmm(q, keys_t, out=scores),
        "oasr.bmm(scores, v, out=context)": lambda: oasr.bmm(scores, v, out=context),
        "  _check_bmm (scores)": lambda: bmm_module._check_bmm(q, keys_t, scores),
        "  _product (scores; the stand-in's launch included)": lambda: bmm_module._product(q, keys_t, scores),
    }
    print(f"torch {torch.__version__}; {m}x{n}x{k} bf16 on CPU tensors, launch stubbed; us per call")
    for label, fn in rows.items():
        print(f"  {label:<44} {per_call_us(fn):6.2f}")


if __name__ == "__main__":
    main()
