#!/usr/bin/env python3
"""Time variants of oasr's kernels against torch: copies of include/ with a constant changed.

A variant is ``NAME=FILE:CONSTANT=VALUE[,FILE:CONSTANT=VALUE...]`` (``NAME=`` alone is
``include/`` as it is). The script copies ``include/`` to a temporary folder, rewrites
the one ``constexpr ... CONSTANT = ...;`` of ``FILE`` (a header under ``include/oasr/``,
by name or path) there, and builds each op's family module against the copy, as its
own JIT module ``<family>_<NAME>``. Each op is then timed on its benchmark configs (the
Conformer shapes and the 1 GiB case) next to torch, backends in turn, and the table
gives torch time / variant time per config (> 1: faster than torch). What was tried
this way, and what it measured: ``dev/memory_bound/RESULTS.md``.

    python dev/tune_kernels.py --ops layer_norm rms_norm --dtypes float16 bfloat16 \\
        --variant base= --variant units8=norm.cuh:kWarpMaxUnitsPerThread=8
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd
import torch

from oasr.jit.core import JitSpec, Variant, build_in_parallel
from oasr.jit.families import Family
from profiling.compare import with_module
from profiling.harness.correctness import refcheck
from profiling.harness.ops import OpSpec, dtype_name, get_op, parse_dtype
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

INCLUDE = Path(__file__).resolve().parents[1] / "include"
Edit = tuple[str, str, str]  # (header, constant, value)


def header(root: Path, name: str) -> Path:
    """The one header under ``root/oasr`` whose path ends with ``name`` (``norm.cuh``, ``common/vec.cuh``)."""
    found = [p for p in (root / "oasr").rglob("*") if p.is_file() and p.as_posix().endswith("/" + name)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} headers under include/oasr/ match {name!r} (need exactly one)")
    return found[0]


def definition(constant: str) -> re.Pattern[str]:
    """``[static] constexpr TYPE CONSTANT = ...;`` at the start of a line; group 1 ends at the ``=``."""
    return re.compile(rf"^(\s*(?:static\s+)?constexpr\s+[\w:<>]+\s+{re.escape(constant)}\s*=)[^;]*;", re.M)


def rewrite(root: Path, edit: Edit) -> tuple[Path, str]:
    """The header under ``root`` and its text with ``CONSTANT = VALUE``; ValueError unless it is defined once."""
    name, constant, value = edit
    path = header(root, name)
    text, count = definition(constant).subn(lambda m: f"{m.group(1)} {value};", path.read_text())
    if count != 1:
        raise ValueError(f"{name} has {count} definitions `constexpr ... {constant} = ...;` (need exactly one)")
    return path, text


def parse_variant(text: str) -> tuple[str, list[Edit]]:
    """``NAME=FILE:CONSTANT=VALUE,...`` -> (NAME, edits), each edit checked against ``include/``."""
    name, _, spec = text.partition("=")
    if not re.fullmatch(r"\w+", name):
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=FILE:CONSTANT=VALUE,... (NAME: letters, digits, _)")
    edits = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        match = re.fullmatch(r"([\w./]+):(\w+)=(.+)", item)
        if match is None:
            raise argparse.ArgumentTypeError(f"variant {name}: {item!r} is not FILE:CONSTANT=VALUE")
        edits.append(match.groups())
        try:
            rewrite(INCLUDE, edits[-1])  # fail now, not after the builds
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"variant {name}: {error}") from None
    return name, edits


def variant_include(name: str, edits: list[Edit]) -> Path:
    """A fresh copy of ``include/`` with ``edits`` applied, in a folder of the temp dir named for the variant.

    The folder's name and content make the module's JIT cache key: the same variant is
    built once, however many runs ask for it.
    """
    root = Path(tempfile.gettempdir()) / "oasr-variants" / name / "include"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(INCLUDE, root)
    for edit in edits:
        path, text = rewrite(root, edit)
        path.write_text(text)
    return root


def patch_base(patch: Path) -> str | None:
    """The commit an experiment's patch was made on, from its first line ``base: COMMIT ...`` (a patch that no longer
    applies to later trees records it); None for a patch of the current ``include/``."""
    with patch.open() as f:
        first = f.readline()
    return first.split()[1] if first.startswith("base: ") else None


def patched_include(patch: Path, commit: str | None = None) -> tuple[str, Path]:
    """``patch`` (a diff of ``include/``, paths ``a/include/...``) applied to a fresh copy of ``include/``, or of
    ``include/`` as ``commit`` has it, in a folder of the temp dir named for the patch file: (name, that copy). A
    patch that does not apply is a ValueError, which names the commit it was made on where the patch records one."""
    name = patch.name.removesuffix(".patch")
    root = Path(tempfile.gettempdir()) / "oasr-variants" / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if commit:
        archive = subprocess.run(["git", "-C", str(INCLUDE.parent), "archive", commit, "include"], capture_output=True)
        if archive.returncode != 0:
            raise ValueError(f"{patch.name}@{commit}: git archive failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    else:
        shutil.copytree(INCLUDE, root / "include")
    applied = subprocess.run(
        ["patch", "-s", "-F0", "--no-backup-if-mismatch", "-p1", "-d", str(root), "-i", str(patch.resolve())],
        capture_output=True,
    )
    if applied.returncode != 0:
        base = patch_base(patch)
        where = f" (it was made on {base}: run it in a worktree of that commit)" if base and not commit else ""
        raise ValueError(f"{patch.name} does not apply{where}: {applied.stdout.decode().strip()}")
    return name, root / "include"


def variant_spec(family: Family, name: str, include: Path, variant: Variant | None = None) -> JitSpec:
    """``family``'s module (of ``variant``, else the default one) built against the edited copy ``include`` of
    ``include/``, as the JIT module ``<family>_variant_<name>`` (with statics of its own, as every module:
    ``oasr.jit.core.COMMON_NVCC_FLAGS``)."""
    return family.jit_spec(variant=variant, name=f"{family.name}_variant_{name}", include_dir=include.resolve())


def build_all(specs: list[JitSpec]) -> None:
    """Builds ``specs`` in parallel, a core left free; a failed build ends the run (its log says why)."""
    if build_in_parallel(specs, max(1, min(len(specs), (os.cpu_count() or 2) - 1))):
        raise SystemExit(1)


def child_output(script: str, args: list[str]) -> list[str] | None:
    """The lines ``python script --child ARGS`` prints, its kernels' printf included (they reach the child's stdout,
    which the timeline scripts parse); None, after printing the end of its output, when it fails."""
    run = subprocess.run([sys.executable, script, "--child", *args], capture_output=True, text=True, env=os.environ)
    if run.returncode != 0:
        print(run.stdout[-2000:], run.stderr[-4000:], sep="\n")
        return None
    return run.stdout.splitlines()


def large_reference_check() -> None:
    """The float64 check of the 1 GiB fp16 ``add_rms_norm`` case, as the benchmark's ``--refcheck`` runs it.

    It leaves the GPU in the state that slowed small evict-first launches timed right
    after it (``dev/harness/scale_after_large_op.py``).
    """
    op, dtype = get_op("add_rms_norm"), torch.float16
    inputs = op.make_inputs(op.benchmark_configs(dtype)[-1], dtype, torch.device("cuda"), 0)
    refcheck(op, inputs, op.backends, dtype)
    torch.cuda.synchronize()


def tune(op: OpSpec, dtype: torch.dtype, modules: dict[str, Any], rounds: int, before_each: Any) -> pd.DataFrame:
    """Torch time / variant time of every variant on every benchmark config of ``op``."""
    rows = []
    for config in op.benchmark_configs(dtype):
        sets = op_input_sets(op, config, dtype)
        fns = {"torch": [partial(op.backends["torch"], s) for s in sets]}
        for name, module in modules.items():
            fns[name] = [partial(with_module, op.family, module, partial(op.backends["oasr"], s)) for s in sets]
        results = time_interleaved(fns, rounds=rounds, iters=10 * rounds, before_each=before_each)
        torch_ms = results["torch"].median_ms
        row = {"config": op.config_label(config, dtype), "torch_us": torch_ms * 1e3}
        rows.append(row | {name: torch_ms / results[name].median_ms for name in modules})
        del sets, fns
        torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", required=True, help="op names of profiling.harness.ops")
    parser.add_argument("--dtypes", nargs="+", default=["float16"])
    parser.add_argument("--variant", type=parse_variant, action="append", required=True, help="NAME=FILE:CONST=VALUE")
    parser.add_argument("--rounds", type=int, default=3, help="timings of each backend per config, taken in turn")
    parser.add_argument("--after-large-check", action="store_true", help="time each backend after the 1 GiB check")
    parser.add_argument("--build-only", action="store_true", help="build the variants' modules and stop (no GPU)")
    args = parser.parse_args()
    ops = [get_op(name) for name in args.ops]
    variants = dict(args.variant)
    if not args.build_only:
        require_cuda("tune_kernels")
    families = list(dict.fromkeys(op.family for op in ops))
    includes = {name: variant_include(name, edits) for name, edits in variants.items()}
    specs = {(f.name, v): f.jit_spec(name=f"{f.name}_{v}", include_dir=includes[v]) for f in families for v in variants}
    with ThreadPoolExecutor(max_workers=8) as pool:  # nvcc runs in subprocesses
        built = dict(zip(specs, pool.map(lambda spec: spec.build_and_load(), specs.values()), strict=True))
    if args.build_only:
        print(f"built {len(built)} modules: {', '.join(spec.name for spec in specs.values())}")
        return 0
    pd.set_option("display.width", 250)
    before_each = large_reference_check if args.after_large_check else None
    for dtype in map(parse_dtype, args.dtypes):
        for op in ops:
            modules = {v: built[(op.family.name, v)] for v in variants}
            table = tune(op, dtype, modules, args.rounds, before_each)
            print(f"\n{op.name} {dtype_name(dtype)}: torch time / variant time (> 1 is faster than torch)")
            print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            print("worst: " + "  ".join(f"{name} {table[name].min():.3f}" for name in variants))
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
