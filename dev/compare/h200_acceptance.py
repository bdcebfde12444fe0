#!/usr/bin/env python3
"""Acceptance of ``python -m profiling.compare`` on a GPU: 10 compares of scale against its ~10% slower
variant (``scale_slow.cuh``) must each say "slower" with a ratio in RATIO_RANGE, and 10 compares of
scale against itself must each say "same". Prints the counts (and every run), writes the runs to
``--csv``, exits 1 unless both are 10 of 10.

    python dev/compare/h200_acceptance.py --csv $OUT/compare_acceptance.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from slowed import slowed_state  # noqa: E402

from oasr.jit.families import SCALE  # noqa: E402
from profiling.compare import (  # noqa: E402
    WORKTREE,
    State,
    build_state,
    compare_samples,
    stand_in,
    state_hash,
    time_modules,
)
from profiling.harness.ops import get_op  # noqa: E402
from profiling.harness.timing import require_cuda, run_gpu_script  # noqa: E402
from profiling.provenance import REPO_ROOT  # noqa: E402

CONFIG = {"n": 2**26}
"""128 MiB of fp16 read and 128 MiB written: DRAM-bound, ~60 us a launch on the H200."""
RATIO_RANGE = (1.05, 1.20)
"""The extra pass moves 10% more bytes, plus one more launch: expected ~1.10-1.12."""
RUNS = 10


def check_slowed(op, module) -> None:
    """The slowed kernel still computes scale (its extra pass rewrites the same values)."""
    inputs = op.make_inputs(CONFIG, torch.float16, torch.device("cuda"), 0)
    with stand_in(SCALE, module):
        got = op.backends["oasr"](inputs)
    assert torch.equal(got, op.backends["torch"](dict(inputs, out=torch.empty_like(inputs["x"]))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, help="write every run here")
    args = parser.parse_args()
    require_cuda("the compare acceptance")
    op = get_op("scale")
    base = State(WORKTREE, REPO_ROOT, state_hash(SCALE, REPO_ROOT))
    modules = {"base": build_state(SCALE, base), "slowed": build_state(SCALE, slowed_state())}
    check_slowed(op, modules["slowed"])
    pairs = {"slowed": ("base", "slowed"), "unchanged": ("base", "base")}
    rows = []
    for run in range(RUNS):
        for case, (left, right) in pairs.items():
            timed = {"a": modules[left], "b": modules[right]}
            samples = next(iter(time_modules(op, [CONFIG], ["float16"], timed).values()))
            result = compare_samples(samples["a"], samples["b"])
            rows.append({"case": case, "run": run, **vars(result)} | {"samples": len(samples["a"])})
            print(f"run {run} {case:>9}: {result.verdict:<6} ratio {result.ratio:.4f} "
                  f"[{result.ci_low:.4f}, {result.ci_high:.4f}] p={result.p_value:.2g}", flush=True)  # fmt: skip
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False)
    slowed = table[table["case"] == "slowed"]
    right = ((slowed["verdict"] == "slower") & slowed["ratio"].between(*RATIO_RANGE)).sum()
    same = (table.loc[table["case"] == "unchanged", "verdict"] == "same").sum()
    print(f"slowed variant: 'slower' with ratio in {RATIO_RANGE} in {right} of {RUNS} runs "
          f"(median ratio {slowed['ratio'].median():.4f})")  # fmt: skip
    print(f"unchanged: 'same' in {same} of {RUNS} runs")
    return 0 if right == RUNS and same == RUNS else 1


if __name__ == "__main__":
    run_gpu_script(main, __file__)
