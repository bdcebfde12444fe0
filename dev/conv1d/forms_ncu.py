"""The conv1d kernel's forms under Nsight Compute: plain + bias, + SiLU, mask + SiLU, all-true mask + SiLU (issue 16).

    ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \\
        python dev/conv1d/forms_ncu.py > forms.txt          # on the GPU machine
    python dev/conv1d/forms_ncu.py --summarise forms.txt   # anywhere: one row per launch of the kernel

Each form runs three times at (16, 1500, 256, 31) and (16, 1500, 512, 15), bf16, same padding, in that order, so
the summary's rows follow it. The instruction counts tell a form's work apart from its time
(``RESULTS.md``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SHAPES = ((16, 1500, 256, 31), (16, 1500, 512, 15))
FORMS = ("plain", "silu", "mask_silu", "ones_silu")
REPEATS = 3


def launch() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import torch

    from oasr import conv1d

    for b, t, c, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(b, t, c, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(k, c, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5
        bias = torch.randn(c, device="cuda", dtype=torch.bfloat16, generator=g)
        lengths = torch.randint(int(0.8 * t), t + 1, (b,), device="cuda", generator=g)
        masks = {
            "mask_silu": torch.arange(t, device="cuda")[None] < lengths[:, None],
            "ones_silu": torch.ones(b, t, dtype=torch.bool, device="cuda"),
        }
        out = torch.empty_like(x)
        for form in FORMS:
            activation = None if form == "plain" else "silu"
            for _ in range(REPEATS):
                conv1d.depthwise_conv1d(x, w, bias, k // 2, activation, mask=masks.get(form), out=out)
    torch.cuda.synchronize()


def summarise(path: Path) -> None:
    rows: list[dict[str, str]] = []
    for line in path.read_text().splitlines():
        if "Context" in line and "(" in line:
            rows.append({"kernel": line.strip().split("(")[0]})
        elif rows and (m := re.match(r"\s+(\S+)\s+\S*\s+([\d,.]+)$", line)):
            rows[-1][m.group(1)] = m.group(2)
    rows = [r for r in rows if "Conv1d" in r["kernel"]]
    labels = [(shape, form) for shape in SHAPES for form in FORMS for _ in range(REPEATS)]
    print(f"{'(B, T, C, K)':>20} {'form':>10} {'us':>7} {'warp instructions':>18} {'registers':>9}")
    for (shape, form), row in zip(labels, rows, strict=False):
        print(
            f"{shape!s:>20} {form:>10} {row.get('gpu__time_duration.sum', '?'):>7} "
            f"{row.get('smsp__inst_executed.sum', '?'):>18} {row.get('launch__registers_per_thread', '?'):>9}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summarise", type=Path, metavar="NCU_OUTPUT", help="summarise ncu's output instead")
    args = parser.parse_args()
    if args.summarise:
        summarise(args.summarise)
    else:
        launch()


if __name__ == "__main__":
    main()
