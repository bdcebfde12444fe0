#!/usr/bin/env python3
"""Host cost of one call (argument checks, dispatch, launch) of each op, oasr and torch.

Each op runs on its smallest tensors (every size field 1 but the channels, 256: ``(1, 1, 256)``
for the norms, ``k=1`` for conv1d) with ``out=`` given, as the harness calls it. Calls are issued back to back
without synchronizing, so the GPU never makes the host wait: the figure is CPU time per
call, the best of five runs of 200 calls. One table per op; the target is <= 3 us.

    python benchmarks/host_overhead.py [--dtypes float16 bfloat16 float32]
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling import commands

if __name__ == "__main__":
    commands.starting(commands.host_overhead_parser())  # --help and usage errors before torch loads

import torch

from oasr.jit import gen_jit_spec
from profiling.harness.ops import OPS, OpSpec, parse_dtype
from profiling.harness.timing import host_overhead_us, require_cuda, run_gpu_script

TARGET_US = 3.0
CHANNELS = 256


def tiny_config(op: OpSpec) -> dict[str, int]:
    """Every size field 1 but the channels (``c``, else the last field: the element count), which are 256."""
    channels = "c" if "c" in op.config_fields else op.config_fields[-1]
    return {**dict.fromkeys(op.config_fields, 1), channels: CHANNELS}


def cost_us(fn: partial, runs: int = 5, calls: int = 200) -> float:
    return min(host_overhead_us(fn, calls=calls) for _ in range(runs))


def launch_floor() -> object:
    """``launch_floor.cu``'s module: ``ffi_call`` (a tvm-ffi call with two tensors) and ``empty_launch``."""
    return gen_jit_spec("launch_floor", [Path(__file__).with_name("launch_floor.cu")]).build_and_load()


def main() -> int:
    args = commands.host_overhead_parser().parse_args()
    require_cuda("host_overhead")
    device = torch.device("cuda")
    import tvm_ffi

    # Without torch's C exchange API tvm-ffi converts each tensor through Python DLPack (microseconds).
    fast = hasattr(torch.Tensor, "__dlpack_c_exchange_api__") or hasattr(torch.Tensor, "__c_dlpack_exchange_api__")
    print(f"torch {torch.__version__}, tvm-ffi {tvm_ffi.__version__}, DLPack C exchange API: {'yes' if fast else 'NO'}")
    over: list[str] = []
    for name, op in OPS.items():
        config = tiny_config(op)
        print(f"\n{name} ({op.config_label(config)}, out= given)")
        print(f"{'dtype':<10} {'oasr us/call':>13} {'torch us/call':>14} {'oasr <= 3 us':>13}")
        for dtype_name in args.dtypes:
            inputs = op.make_inputs(config, parse_dtype(dtype_name), device, 0)
            oasr_us, torch_us = (cost_us(partial(op.backends[b], inputs)) for b in ("oasr", "torch"))
            within = oasr_us <= TARGET_US
            if not within:
                over.append(f"{name} {dtype_name}")
            print(f"{dtype_name:<10} {oasr_us:13.2f} {torch_us:14.2f} {'yes' if within else 'NO':>13}")
    floor = launch_floor()
    x = torch.empty(CHANNELS, device=device, dtype=torch.float16)
    y = torch.empty_like(x)
    print("\nfloor (no checks, no work; float16 [256] tensors)")
    print(f"  tvm-ffi call, 2 tensors, returns at once  {cost_us(partial(floor.ffi_call, y, x)):6.2f} us")
    print(f"  the same, launching an empty kernel       {cost_us(partial(floor.empty_launch, y, x)):6.2f} us")
    print(f"  torch: y.copy_(x)                         {cost_us(partial(y.copy_, x)):6.2f} us")
    print(f"\nevery op <= {TARGET_US:g} us per call: " + ("yes" if not over else "no (" + ", ".join(over) + ")"))
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
