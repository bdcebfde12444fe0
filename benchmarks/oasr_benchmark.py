#!/usr/bin/env python3
"""Unified benchmark CLI: every family's ops against torch, one ``[PERF]`` line per size and backend.

Examples::

    python benchmarks/oasr_benchmark.py --list
    python benchmarks/oasr_benchmark.py --routine scale --subroutine scale --backends oasr torch --refcheck --compare
    python benchmarks/oasr_benchmark.py --routine scale --size 16777216 --dtype bfloat16 -vv --output_path scale.csv
    python benchmarks/oasr_benchmark.py --testlist lines.txt --output_path all.csv --plot all.png
    python benchmarks/oasr_benchmark.py --routine norm --subroutine rms_norm --refcheck --gpus all
    python benchmarks/oasr_benchmark.py --routine scale --gpus 2 --engine ray [--address auto]
    ncu --nvtx --nvtx-include 'oasr@scale:oasr:n=65536,dtype=float16/' \\
        python benchmarks/oasr_benchmark.py --routine scale --size 65536 --profile --target oasr

A routine is a kernel family (``oasr.jit.families.FAMILIES``) and its subroutines are
the family's ops in the harness (``profiling.harness.ops.OPS``): nothing here lists
them. An op whose size is one field ``n`` takes ``--size N [N ...]``; others take
``--shape`` with one value per size field (``--shape B T C``), repeatable.

A testlist holds one run per line (the run flags below, without ``python
...oasr_benchmark.py``); ``#`` starts a comment. With ``--testlist`` the command
line takes only the global flags. Exit codes: 0 success, 1 a failed run (no GPU,
reference mismatch), 2 a bad command line or testlist.

``--gpus all|N|0,1`` spreads every run's configs over several GPUs (one worker per GPU,
one config per task; ``profiling.scaleout``), with the local engine or Ray (``--engine
ray``, ``--address`` to join a cluster); rows then arrive in the order they finish and
carry the GPU they ran on.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import cli
from benchmarks.cli import GLOBAL_FLAGS, PROG, UsageError, _add_global_flags, _Parser
from profiling import commands

if __name__ == "__main__" and not cli.names_a_run(sys.argv[1:]):
    commands.starting(
        cli.build_parser(exits=True), sys.argv[1:]
    )  # the global --help and usage errors before torch loads

import torch

from benchmarks.output import OutputWriter, plot_results
from oasr.jit.families import FAMILIES
from profiling.harness.measure import measure
from profiling.harness.ops import Config, OpSpec, dtype_name, ops_of, parse_dtype
from profiling.harness.timing import NoGPUError, require_cuda
from profiling.nsight.naming import RangeName, profile_launches
from profiling.scaleout.engine import ENGINES
from profiling.scaleout.gpus import resolve
from profiling.scaleout.timing import SweepFailedError, measure_sweep

ROUTINES: dict[str, list[OpSpec]] = {f.name: ops_of(f) for f in FAMILIES if ops_of(f)}
"""Routine (family) -> its subroutines (the family's harness ops)."""
BACKEND_ALIASES = {"cuda": "oasr"}
"""Older testlists name oasr's kernels ``cuda``."""


def build_parser(op: OpSpec | None = None, *, global_flags: bool = True) -> argparse.ArgumentParser:
    """The CLI parser (:mod:`benchmarks.cli`); ``op`` adds its size flag."""
    return cli.build_parser(op.config_fields if op is not None else None, global_flags=global_flags)


def _subroutine(routine: str, subroutine: str | None) -> OpSpec:
    if routine not in ROUTINES:
        raise UsageError(f"unknown routine {routine!r}; known routines: {', '.join(ROUTINES)}")
    ops = {op.name: op for op in ROUTINES[routine]}
    name = subroutine or next(iter(ops))
    if name not in ops:
        raise UsageError(f"routine {routine} has subroutines {', '.join(ops)}, not {name}")
    return ops[name]


def parse_command(argv: Sequence[str], *, global_flags: bool = True) -> argparse.Namespace:
    """Parse and validate one command line (or, with ``global_flags=False``, one testlist line)."""
    probe = _Parser(add_help=False, allow_abbrev=False)
    probe.add_argument("--routine")
    probe.add_argument("--subroutine")
    known = probe.parse_known_args(argv)[0]
    op = _subroutine(known.routine, known.subroutine) if known.routine else None
    args = build_parser(op, global_flags=global_flags).parse_args(argv)
    args.op = op
    if global_flags and args.engine not in ENGINES:  # the parser knows no engines: it loads nothing
        raise UsageError(f"argument --engine: invalid choice: {args.engine!r} (choose from {', '.join(ENGINES)})")
    if op is None:
        return args
    args.subroutine = op.name
    try:
        args.dtype = dtype_name(parse_dtype(args.dtype))
    except ValueError as error:
        raise UsageError(str(error)) from error
    args.backends = [BACKEND_ALIASES.get(b, b) for b in args.backends or op.backends]
    if args.compare and "torch" in op.backends and "torch" not in args.backends:
        args.backends.append("torch")
    args.target = BACKEND_ALIASES.get(args.target, args.target)
    unknown = [b for b in [*args.backends, args.target] if b not in op.backends]
    if unknown:
        raise UsageError(f"{op.name} has backends {', '.join(op.backends)}, not {', '.join(unknown)}")
    if args.num_iters < 1 or args.dry_run_iters < 1 or args.rounds < 1:
        raise UsageError("--num_iters, --dry_run_iters and --rounds must be at least 1")
    if args.profile and importlib.util.find_spec("nvtx") is None:
        raise UsageError("--profile needs the nvtx package (pip install nvtx)")
    return args


def configs_of(args: argparse.Namespace) -> list[Config]:
    """The configs a run asks for: its size flag's, else the op's benchmark configs in its dtype."""
    op: OpSpec = args.op
    if args.sizes:
        return [dict(zip(op.config_fields, values, strict=True)) for values in args.sizes]
    return op.benchmark_configs(args.dtype)


def read_testlist(path: str | Path) -> list[tuple[int, list[str]]]:
    """``[(line_number, tokens), ...]`` of a testlist, skipping blank lines and ``#`` comments."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise UsageError(f"cannot read testlist {path}: {error.strerror}") from error
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as error:
            raise UsageError(f"{path}:{number}: {error}") from error
        if tokens:
            lines.append((number, tokens))
    return lines


def _runs(args: argparse.Namespace, argv: Sequence[str]) -> list[argparse.Namespace]:
    if not args.testlist:
        if args.routine is None:
            raise UsageError("--routine is required (or --list, or --testlist FILE)")
        return [args]
    global_only = _Parser(add_help=False, allow_abbrev=False)
    _add_global_flags(global_only)
    try:
        global_only.parse_args(argv)
    except UsageError as error:
        raise UsageError(f"with --testlist, run flags belong in the file's lines ({error})") from error
    runs = []
    for number, tokens in read_testlist(args.testlist):
        try:
            run = parse_command(tokens, global_flags=False)
        except UsageError as error:
            raise UsageError(f"{args.testlist}:{number}: {error}") from error
        if run.routine is None:
            raise UsageError(f"{args.testlist}:{number}: --routine is required")
        runs.append(run)
    return runs


def _print_routines() -> None:
    for routine, ops in ROUTINES.items():
        print(f"{routine}: subroutines {', '.join(op.name for op in ops)}")
        for op in ops:
            configs = op.benchmark_configs()
            print(f"  {op.name}: {len(configs)} default configs: {' '.join(op.config_label(c) for c in configs)}")


def _describe(run: argparse.Namespace) -> str:
    skip = {*GLOBAL_FLAGS, "op"} | (set() if run.profile else {"target"})
    flags = {k: v for k, v in vars(run).items() if k not in skip and v not in (None, False)}
    if "sizes" in flags:  # shown as the flag that gave them
        flag = "size" if run.op.config_fields == ("n",) else "shape"
        flags[flag] = [",".join(map(str, s)) for s in flags.pop("sizes")]
    return " ".join(f"{k}={' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in flags.items())


def run_one(
    run: argparse.Namespace,
    output: OutputWriter,
    gpus: str | None = None,
    engine: str = "local",
    address: str | None = None,
) -> None:
    """Time (or, with ``--profile``, run under NVTX ranges) every config of one run."""
    op: OpSpec = run.op
    configs = configs_of(run)
    if run.profile:
        for config in configs:
            inputs = op.make_inputs(config, parse_dtype(run.dtype), torch.device("cuda"), 0)
            name = RangeName(op.name, run.target, dict(config), run.dtype)
            profile_launches(name, lambda inputs=inputs: op.backends[run.target](inputs), warmup=run.dry_run_iters)
            output.info(f"profiled {name}; select with --nvtx --nvtx-include '{name.nvtx_filter()}'")
        return

    def emit(rows: list[dict]) -> None:
        failed = [r["backend"] for r in rows if r["refcheck"] == "fail"]
        if failed:
            output.error(f"{op.name} {rows[0]['config']} {run.dtype}: {', '.join(failed)} differ from the reference")
            if not run.allow_output_mismatch:
                return
        output.write_rows(rows)

    options = dict(
        rounds=run.rounds,
        warmup=run.dry_run_iters,
        iters=run.num_iters,
        method="events" if run.use_cuda_events else "graph",
        check=run.refcheck,
    )
    if gpus is None:
        measure(op, configs, [run.dtype], run.backends, on_rows=emit, **options)
        return
    try:
        frame = measure_sweep(
            op, configs, [run.dtype], run.backends, gpus=gpus, engine=engine, address=address, on_rows=emit, **options
        )
    except SweepFailedError as error:
        output.error(str(error))
        return
    output.info(frame.attrs["placement"])


def _main(argv: Sequence[str]) -> int:
    args = parse_command(argv)
    if args.list:
        _print_routines()
        return 0
    runs = _runs(args, argv)
    if args.dry_run:
        for run in runs:
            print(f"[DRY RUN] {_describe(run)}")
        return 0
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address joins a Ray cluster: it needs --engine ray")
    if args.address is None:
        require_cuda("benchmarking")
        if args.gpus is not None:
            try:
                resolve(args.gpus)
            except (ValueError, TypeError) as error:
                raise UsageError(f"--gpus {args.gpus}: {error}") from error
    output = OutputWriter(args.output_path, args.verbose)
    try:
        for run in runs:
            method = "CUDA events" if run.use_cuda_events else "CUDA graphs"
            samples = f"{run.num_iters} samples in {run.rounds} rounds"
            where = f", on GPUs {args.gpus} ({args.engine})" if args.gpus else ""
            output.write_header(f"{run.routine}/{run.subroutine} {run.dtype}, {method}, {samples}{where}")
            run_one(run, output, args.gpus, args.engine, args.address)
    finally:
        results = output.finalize()
    if args.plot and not results.empty:
        plot_results(results, args.plot)
        output.info(f"wrote plot {args.plot}")
    return 1 if output.errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; errors are reported in one line on stderr, never as a traceback."""
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except NoGPUError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the rows measured so far are in the CSV", file=sys.stderr)
        return 130


if __name__ == "__main__":
    commands.started()
    sys.exit(main())
