#!/usr/bin/env python3
"""Do two checkouts build the same kernels? Builds each family's default module (and the variants named with
``--variant``) from both trees, each into a JIT cache of its own, and compares the SASS of every kernel
(instructions only: addresses, encodings and line info dropped; kernels matched by their instruction bodies, since a
renamed template argument changes a kernel's name and nothing else). No GPU needed: cuobjdump reads the built
libraries. Prints one line per module and exits 1 when any differs.

    python scripts/compare_sass.py OTHER_CHECKOUT [--cuobjdump PATH] [--variant gemm:bf16:silu:direct ...]

A variant is ``family:dtype:epilogue:schedule`` for gemm (the rule's tiles for that schedule), or
``conv2d:dtype:activation`` for the implicit GEMM.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

_INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")

_BUILD = """
import sys
from oasr.jit import conv2d_config, gemm_config
from oasr.jit.families import CONV2D, FAMILIES, GEMM

SCHEDULES = {"direct": gemm_config.DIRECT, "tail": gemm_config.TAIL, "pingpong": gemm_config.MANY_WAVES}
specs = {family.name: family.jit_spec() for family in FAMILIES}
for text in sys.argv[1:]:
    family, dtype, *rest = text.split(":")
    dtype = {"bf16": "bfloat16", "f16": "float16"}[dtype]
    if family == "gemm":
        epilogue, schedule = rest
        specs[text] = GEMM.jit_spec(variant=gemm_config.gemm_variant(dtype, epilogue, SCHEDULES[schedule]))
    else:
        specs[text] = CONV2D.jit_spec(variant=conv2d_config.implicit_gemm_variant(dtype, rest[0] or None))
for name, spec in specs.items():
    spec.build()
    print(name, spec.build_dir / (spec.name + ".so"))
"""


def build(checkout: Path, cache: Path, variants: list[str]) -> dict[str, Path]:
    """{module: library} of ``checkout``'s builds in ``cache``."""
    env = {**os.environ, "OASR_JIT_DIR": str(cache), "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, *variants], cwd=checkout, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"compare_sass: building {checkout} failed:\n{done.stderr[-3000:]}")
    return {name: Path(path) for name, path in (line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)}


def kernels(cuobjdump: str, library: Path) -> list[str]:
    """The instruction bodies of every function in ``library``, sorted."""
    text = subprocess.run([cuobjdump, "-sass", str(library)], capture_output=True, text=True, check=True).stdout
    bodies: list[list[str]] = []
    for line in text.splitlines():
        if "Function :" in line:
            bodies.append([])
        elif bodies and (match := _INSTRUCTION.match(line)):
            bodies[-1].append(match.group(1))
    return sorted("\n".join(body) for body in bodies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the checkout to compare this one with")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    parser.add_argument("--variant", action="append", default=[], help="e.g. gemm:bf16:silu:direct, conv2d:bf16:relu")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as scratch:
        ours = build(here, Path(scratch) / "ours", args.variant)
        theirs = build(args.other.resolve(), Path(scratch) / "theirs", args.variant)
        differ = 0
        for name, library in ours.items():
            if name not in theirs:
                print(f"{name}: only in this checkout")
                continue
            a, b = kernels(args.cuobjdump, library), kernels(args.cuobjdump, theirs[name])
            same = a == b
            differ += not same
            # A kernel added beside unchanged ones (a new op of the family) is told apart from a changed one.
            kept = sum((Counter(a) & Counter(b)).values())
            detail = "" if same else f" ({kept} of the other's {len(b)} unchanged, {len(a) - kept} new or changed)"
            print(f"{name}: {len(a)} kernels, {'identical' if same else 'DIFFERENT'} SASS{detail}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
