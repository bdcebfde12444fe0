"""The issue's table for the kernels production launches, read off a bench.py run that timed both block widths.

    python dev/attention/final_table.py dev/attention/results/bench_e7b5e12_h200.txt

In that run (e7b5e12) production launched every form on blocks of 8 warps and ``oasr:narrow`` on 4. Production now
(``include/oasr/attention.cuh``'s ``LaunchBlocks``) takes 8 for the shifted form at D = 128 and 4 for the rest: the
same kernels, so each row here is the run's ``oasr`` row (shifted, D = 128) or its ``oasr:narrow`` row (the rest),
with the peers of the same run, their x = peer time / oasr time (> 1: oasr faster) and the issue's three targets.
"""

from __future__ import annotations

import sys
from pathlib import Path

PEERS = {
    "attention": ("sdpa:flash", "sdpa:cudnn", "sdpa:efficient"),
    "rel_pos_attention": ("espnet", "espnet+sdpa", "flex"),
}


def rows(path: Path) -> dict[tuple[str, str, str], dict[str, tuple[float, float]]]:
    """(shape, keys, op) -> backend -> (us, TFLOP/s), for the timed rows."""
    table: dict[tuple[str, str, str], dict[str, tuple[float, float]]] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0].startswith("(") and fields[2] in PEERS and fields[4] != "-":
            table.setdefault((fields[0], fields[1], fields[2]), {})[fields[3]] = (float(fields[4]), float(fields[5]))
    return table


def production(shape: str, op: str) -> str:
    """The backend of the run whose kernel production launches now."""
    return "oasr" if op == "rel_pos_attention" and shape.endswith(",128)") else "oasr:narrow"


def main(path: Path) -> None:
    table = rows(path)
    print(f"# from {path} (see this script's docstring)")
    print(f"{'shape (B,T,H,D)':<16} {'keys':<7} {'op':<18} {'us':>8} {'TFLOP/s':>8}  peers: x = peer time / oasr time")
    verdicts = []
    for (shape, keys, op), backends in table.items():
        us, tflops = backends[production(shape, op)]
        peers = [(p, backends[p][0] / us) for p in PEERS[op] if p in backends]
        cells = "  ".join(f"{p:>10} x{x:4.2f}" for p, x in peers)
        print(f"{shape:<16} {keys:<7} {op:<18} {us:8.2f} {tflops:8.1f}  {cells}")
        best, ratio = min(peers, key=lambda item: item[1])
        need = 3.0 if op == "rel_pos_attention" else 1.0
        verdicts.append(
            f"{shape} {keys} {op}: x{ratio:.2f} of the best peer ({best}), target x{need:.1f}: "
            f"{'met' if ratio >= need else 'MISSED'}"
        )
        if op == "rel_pos_attention":
            plain = table[(shape, keys, "attention")][production(shape, "attention")][0]
            verdicts.append(
                f"{shape} {keys} rel_pos / attention: {us / plain:.2f}x, target <= 1.7x: "
                f"{'met' if us / plain <= 1.7 else 'MISSED'}"
            )
    print("\n" + "\n".join(verdicts))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
