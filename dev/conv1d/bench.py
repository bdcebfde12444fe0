"""Scratch GPU check and benchmark of the conv1d family (one H200 run).

    python3 dev/conv1d/bench.py [--sections sweep,fused,step]

Prints, for each shape of the harness sweep in bf16: oasr us, torch us on the pre-transposed
NCT tensor (torch's best layout), torch us from channels-last with the transposes, the
speedup over NCT torch and the share of the measured copy bandwidth; then the fused forms
(SiLU, mask + SiLU) and the streaming step at Conformer chunk sizes. Timing: CUDA-graph
replay with input sets rotated past the L2 (profiling.harness.timing). Variants of the kernel's
constants: dev/tune_kernels.py (e.g. ``--variant mb2=conv1d.cuh:kExactMinBlocks=2``).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr.conv1d as conv1d
from profiling.harness.ops.conv1d import DEPTHWISE_CONV1D as op
from profiling.harness.timing import measure_copy_bandwidth, rotation_sets, time_interleaved


def time_us(backends: dict[str, list]) -> dict[str, float]:
    """Median us per launch of each backend (lists of callables rotate through input sets)."""
    results = time_interleaved(backends, rounds=3, iters=30)
    return {name: r.median_ms * 1e3 for name, r in results.items()}


def n_sets(nbytes: int) -> int:
    return rotation_sets(nbytes)


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------


def sweep(copy_bw: float) -> None:
    dtype = torch.bfloat16
    print(f"\n== depthwise_conv1d bf16, same padding, bias (copy bandwidth {copy_bw:.2f} TB/s)")
    print(
        f"{'b,t,c,k':>18} {'oasr us':>8} {'torch NCT':>9} {'torch BTC':>9} {'x NCT':>6} {'x BTC':>6} "
        f"{'%copy':>6} {'TB/s':>5} {'max|err|':>9} ok"
    )
    for config in op.default_sweep:
        work = op.work(config, dtype)
        sets = [op.make_inputs(config, dtype, torch.device("cuda"), seed) for seed in range(n_sets(work.bytes))]
        first = sets[0]
        first["out"].fill_(float("nan"))
        result = op.backends["oasr"](first)
        reference = op.reference(first)
        rtol, atol = op.tolerance(dtype)
        ok = bool(torch.isclose(result.double(), reference, rtol=rtol, atol=atol).all())
        err = float((result.double() - reference).abs().nan_to_num(float("inf")).max())

        def btc(i):
            x = i["x"].transpose(1, 2).contiguous()
            y = F.conv1d(x, i["weight_ck"], i["bias"], padding=i["padding"], groups=x.shape[1])
            return y.transpose(1, 2).contiguous()

        us = time_us(
            {
                "oasr": [
                    lambda i=i: conv1d.depthwise_conv1d(i["x"], i["weight"], i["bias"], i["padding"], out=i["out"])
                    for i in sets
                ],
                "nct": [lambda i=i: op.backends["torch"](i) for i in sets],
                "btc": [lambda i=i: btc(i) for i in sets],
            }
        )
        label = ",".join(str(config[f]) for f in op.config_fields)
        tbs = work.bytes / (us["oasr"] * 1e-6) / 1e12
        print(
            f"{label:>18} {us['oasr']:8.2f} {us['nct']:9.2f} {us['btc']:9.2f} {us['nct'] / us['oasr']:6.1f} "
            f"{us['btc'] / us['oasr']:6.1f} {100 * tbs / copy_bw:5.1f}% {tbs:5.2f} {err:9.2e} "
            f"{'PASS' if ok else 'FAIL'}",
            flush=True,
        )
        del sets


def fused(copy_bw: float) -> None:
    dtype = torch.bfloat16
    print("\n== fused forms, bf16 (us): plain+bias, +silu, mask+silu (prefix mask, 10% padded frames)")
    for b, t, c, k in ((16, 1500, 256, 31), (16, 1500, 512, 15), (64, 250, 256, 15)):
        nbytes = 2 * b * t * c * 2
        sets = []
        for seed in range(n_sets(nbytes)):
            g = torch.Generator(device="cuda").manual_seed(seed)
            x = torch.randn(b, t, c, device="cuda", dtype=dtype, generator=g)
            w = torch.randn(k, c, device="cuda", dtype=dtype, generator=g) / k**0.5
            bias = torch.randn(c, device="cuda", dtype=dtype, generator=g)
            lengths = torch.randint(int(0.8 * t), t + 1, (b,), device="cuda", generator=g)
            mask = torch.arange(t, device="cuda")[None] < lengths[:, None]
            sets.append((x, w, bias, mask, torch.empty_like(x)))
        pad = k // 2
        us = time_us(
            {
                "plain": [lambda s=s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, out=s[4]) for s in sets],
                "silu": [
                    lambda s=s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, "silu", out=s[4]) for s in sets
                ],
                "mask_silu": [
                    lambda s=s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, "silu", mask=s[3], out=s[4])
                    for s in sets
                ],
            }
        )
        print(
            f"  ({b},{t},{c},K={k}): plain {us['plain']:.2f}  silu {us['silu']:.2f} ({us['silu'] / us['plain']:.3f}x)  "
            f"mask+silu {us['mask_silu']:.2f} ({us['mask_silu'] / us['plain']:.3f}x)  "
            f"plain {100 * nbytes / (us['plain'] * 1e-6) / 1e12 / copy_bw:.0f}% of copy",
            flush=True,
        )


def step() -> None:
    dtype = torch.bfloat16
    print("\n== streaming step, bf16 (us): oasr step (conv + state update) vs torch F.conv1d on the chunk (NCT)")
    for b in (1, 8):
        for k in (15, 31):
            for length in (16, 32, 64):
                c = 512
                x = torch.randn(b, length, c, device="cuda", dtype=dtype)
                w = torch.randn(k, c, device="cuda", dtype=dtype) / k**0.5
                bias = torch.randn(c, device="cuda", dtype=dtype)
                state = torch.zeros(b, k - 1, c, device="cuda", dtype=dtype)
                out = torch.empty_like(x)
                x_nct = torch.randn(b, c, length + k - 1, device="cuda", dtype=dtype)
                w_ck = w.t().unsqueeze(1).contiguous()
                us = time_us(
                    {
                        "oasr": [
                            lambda a=(x, state, w, bias, out): conv1d.depthwise_conv1d_step(*a[:4], "silu", out=a[4])
                        ],
                        "torch": [lambda a=(x_nct, w_ck, bias, c): F.silu(F.conv1d(a[0], a[1], a[2], groups=a[3]))],
                    }
                )
                print(
                    f"  B={b} K={k} L={length}: oasr {us['oasr']:.2f}  torch {us['torch']:.2f}  "
                    f"({us['torch'] / us['oasr']:.2f}x)",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sections", default="sweep,fused,step")
    args = parser.parse_args()
    print(f"timing with profiling.harness.timing on {torch.cuda.get_device_name()}")
    copy_bw = measure_copy_bandwidth()
    sections = {"sweep": lambda: sweep(copy_bw), "fused": lambda: fused(copy_bw), "step": step}
    for name in args.sections.split(","):
        try:
            sections[name]()
        except Exception:
            print(f"section {name} failed:")
            traceback.print_exc()


if __name__ == "__main__":
    main()
