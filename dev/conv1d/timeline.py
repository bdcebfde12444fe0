"""Where one call of the tensor-core kernel spends its time, block by block (issue 16; H200).

    python dev/conv1d/timeline.py [--variant diag-timeline] [--shape B T C K ...]

Builds ``variants/diag-timeline.patch``: production's kernel with thread 0 reading its SM clock at the end of each
phase and printing the readings when the block ends (``--variant diag-launch`` / ``diag-launch-long`` print only
when each block starts and compute nothing, with production's grid and with about half as many blocks). Runs each
shape (bf16, same padding, bias) three times and summarises the last call's blocks: when they start, the phases of
the set-up (the taps' and first tiles' copies landed, the taps written) and, per tile, the wait for its copies (from
the previous tile's stores), the transpose, warp 0's product, the barrier behind the other warps and the output
tile's stores. Cycles are thread 0's ``clock64``; us convert them at the clock the blocks ran at (cycles over
``%globaltimer`` ns, per block). The printing itself costs time at the end of each block, so the kernel's own
duration here is not production's.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dev.tune_kernels import child_output  # noqa: E402  (after the checkout is on the path)

CALLS = 3  # per shape; the last one's blocks are summarised
PHASES = ["copies landed", "taps written"] + [
    f"tile {n}: {phase}" for n in range(3) for phase in ("wait", "transpose", "product", "barrier", "stores")
]


def child(variant: str, shapes: list[tuple[int, int, int, int]]) -> None:
    """Runs in a subprocess: every line the kernels print goes to this process's stdout."""
    import torch

    import oasr
    from dev.conv1d.bench import build, through

    module = build([variant])[variant]
    libc = ctypes.CDLL(None)
    for b, t, c, k in shapes:
        x = torch.randn(b, t, c, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, c, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(c, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(b, t + 2 * (k // 2) - k + 1, c, device="cuda", dtype=torch.bfloat16)
        call = partial(oasr.depthwise_conv1d, x, w, bias, padding=k // 2, out=out)
        for _ in range(CALLS):
            through(module, call)()
            torch.cuda.synchronize()
        libc.fflush(None)
        print(f"SHAPE {b} {t} {c} {k}", flush=True)


def summarise(lines: list[str]) -> None:
    shape, rows = None, []

    def report():
        if shape is None or not rows:
            return
        # the last call's blocks: the rows with the latest starts, as many as one call has
        rows.sort(key=lambda r: r[3])
        last = rows[-len(rows) // CALLS :]
        start = min(r[3] for r in last)
        ghz = statistics.median(r[-1] / max(1, r[4] - r[3]) for r in last)
        print(f"\n{shape}: {len(last)} blocks, tiles per block {sorted({r[2] for r in last})}, clock ~{ghz:.2f} GHz")
        print(
            f"  blocks start within {max(r[3] for r in last) - start} ns and end within "
            f"{max(r[4] for r in last) - start} ns of the first start"
        )
        starts = sorted(r[3] - start for r in last)
        p90 = starts[9 * len(starts) // 10]
        print(f"  start offsets (ns): median {statistics.median(starts):.0f}, 90% of blocks by {p90}")
        if ghz <= 0:  # diag-launch: the blocks' starts only
            return
        print(f"  {'phase':<24}{'median cyc':>11}{'p10':>8}{'p90':>8}{'median us':>11}")
        ends = [r[5:] for r in last]
        for i, name in enumerate(PHASES):
            if i >= 2 and int(name.split()[1].rstrip(":")) >= min(r[2] for r in last):
                continue
            durations = [e[i] - (e[i - 1] if i > 0 else 0) for e in ends]  # from the previous phase's end
            q = statistics.quantiles(durations, n=10) if len(durations) > 1 else [durations[0]] * 9
            med = statistics.median(durations)
            print(f"  {name:<24}{med:>11.0f}{q[0]:>8.0f}{q[8]:>8.0f}{med / ghz / 1e3:>11.3f}")
        whole = statistics.median(r[-1] for r in last)
        print(f"  {'whole block':<24}{whole:>11.0f}{'':>16}{whole / ghz / 1e3:>11.3f}")

    for line in lines:
        if line.startswith("SHAPE"):
            report()
            shape, rows = tuple(map(int, line.split()[1:])), []
        elif line.startswith("TL "):
            rows.append([int(v) for v in line.split()[1:]])
    report()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="diag-timeline")
    parser.add_argument("--shape", nargs=4, type=int, action="append", metavar=("B", "T", "C", "K"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = [tuple(s) for s in (args.shape or [[16, 1500, 256, 31], [16, 1500, 512, 15], [1, 16, 512, 31]])]
    if args.child:
        child(args.variant, shapes)
        return 0
    lines = child_output(__file__, ["--variant", args.variant, *(v for s in shapes for v in ("--shape", *map(str, s)))])
    if lines is None:
        return 1
    # a shape's lines are printed before its marker: put the marker first
    grouped, pending = [], []
    for line in lines:
        if line.startswith("TL "):
            pending.append(line)
        elif line.startswith("SHAPE"):
            grouped += [line, *pending]
            pending = []
    summarise(grouped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
