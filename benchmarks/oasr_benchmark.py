#!/usr/bin/env python3
"""Unified benchmark CLI: every registered routine, one ``[PERF]`` line per size and backend.

Examples::

    python benchmarks/oasr_benchmark.py --list
    python benchmarks/oasr_benchmark.py --routine scale --subroutine scale --backends cuda torch --refcheck --compare
    python benchmarks/oasr_benchmark.py --routine scale --size 16777216 --dtype bfloat16 -vv --output_path scale.csv
    python benchmarks/oasr_benchmark.py --testlist lines.txt --output_path all.csv --plot all.png
    ncu --nvtx --nvtx-include 'oasr@scale:oasr:n=65536,dtype=float16/' \\
        python benchmarks/oasr_benchmark.py --routine scale --size 65536 --profile --target oasr

A testlist holds one run per line (the run flags below, without ``python
...oasr_benchmark.py``); ``#`` starts a comment. With ``--testlist`` the command
line takes only the global flags. Exit codes: 0 success, 1 a failed run (no GPU,
reference mismatch, unknown backend), 2 a bad command line or testlist.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.routines import ROUTINE_REGISTRY, load_routine
from benchmarks.routines.bench_utils import OutputWriter, parse_dtype, plot_results, results_frame
from profiling.ops import dtype_name
from profiling.timing import NoGPUError, require_cuda

PROG = "oasr_benchmark.py"
GLOBAL_FLAGS = ("list", "testlist", "dry_run", "output_path", "plot", "verbose")


class UsageError(Exception):
    """A bad command line or testlist line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _add_global_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("global flags (command line only)")
    group.add_argument("--list", action="store_true", help="list routines, subroutines and default configs")
    group.add_argument("--testlist", metavar="FILE", help="run each line of FILE (one run's flags per line)")
    group.add_argument("--dry_run", action="store_true", help="print the runs without running them (no GPU needed)")
    group.add_argument("--output_path", metavar="CSV", help="write all results as CSV (schema: benchmarks/README.md)")
    group.add_argument("--plot", metavar="PNG", help="save bandwidth (or TFLOP/s) against size per backend")
    group.add_argument("-v", "--verbose", action="count", default=0, help="-v: p10/p90/std; -vv: timing details")


def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run flags (command line or testlist line)")
    group.add_argument("--routine", help=f"kernel family: {', '.join(sorted(ROUTINE_REGISTRY))}")
    group.add_argument("--subroutine", help="kernel of the family (default: its first)")
    group.add_argument("--backends", nargs="+", metavar="NAME", help="backends to time (default: all of the routine)")
    group.add_argument("--dtype", default="float16", help="float32, float16 or bfloat16 (default float16)")
    group.add_argument("--refcheck", action="store_true", help="check each backend against the reference, after timing")
    group.add_argument("--allow_output_mismatch", action="store_true", help="report backends that fail --refcheck")
    group.add_argument("--num_iters", type=int, default=30, help="timed samples (graph replays or launches)")
    group.add_argument("--dry_run_iters", type=int, default=5, help="warm-up launches, not timed")
    group.add_argument("--rounds", type=int, default=3, help="the backends are timed in turn this many times")
    group.add_argument("--use_cuda_events", action="store_true", help="per-launch CUDA events instead of CUDA graphs")
    group.add_argument("--compare", action="store_true", help="add speedup over torch and %% of a measured ceiling")
    group.add_argument("--profile", action="store_true", help="run --target once per config in NVTX ranges (for ncu)")
    group.add_argument("--target", choices=["oasr", "torch"], default="oasr", help="backend that --profile runs")


def build_parser(routine: ModuleType | None = None, *, global_flags: bool = True) -> argparse.ArgumentParser:
    """The CLI parser; ``routine`` adds its own flags (e.g. ``--size``)."""
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0], allow_abbrev=False, add_help=global_flags)
    if global_flags:
        _add_global_flags(parser)
    _add_run_flags(parser)
    if routine is not None:
        routine.parse_args(parser)
    return parser


def parse_command(argv: Sequence[str], *, global_flags: bool = True) -> argparse.Namespace:
    """Parse and validate one command line (or, with ``global_flags=False``, one testlist line)."""
    probe = _Parser(add_help=False, allow_abbrev=False)
    probe.add_argument("--routine")
    routine_name = probe.parse_known_args(argv)[0].routine
    try:
        routine = load_routine(routine_name) if routine_name else None
    except ValueError as error:
        raise UsageError(str(error)) from error
    args = build_parser(routine, global_flags=global_flags).parse_args(argv)
    if routine is None:
        return args
    args.subroutine = args.subroutine or routine.SUBROUTINES[0]
    if args.subroutine not in routine.SUBROUTINES:
        raise UsageError(
            f"routine {routine_name} has subroutines {', '.join(routine.SUBROUTINES)}, not {args.subroutine}"
        )
    try:
        args.dtype = dtype_name(parse_dtype(args.dtype))
    except ValueError as error:
        raise UsageError(str(error)) from error
    if args.num_iters < 1 or args.dry_run_iters < 1 or args.rounds < 1:
        raise UsageError("--num_iters, --dry_run_iters and --rounds must be at least 1")
    if args.profile and importlib.util.find_spec("nvtx") is None:
        raise UsageError("--profile needs the nvtx package (pip install nvtx)")
    return args


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
    for name in sorted(ROUTINE_REGISTRY):
        routine = load_routine(name)
        print(f"{name}: subroutines {', '.join(routine.SUBROUTINES)}")
        for subroutine, configs in routine.get_default_configs().items():
            labels = [",".join(f"{k}={v}" for k, v in config.items()) for config in configs]
            print(f"  {subroutine}: {len(configs)} default configs: {' '.join(labels)}")


def _describe(run: argparse.Namespace) -> str:
    skip = set(GLOBAL_FLAGS) | (set() if run.profile else {"target"})
    flags = {k: v for k, v in vars(run).items() if k not in skip and v not in (None, False)}
    return " ".join(f"{k}={' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in flags.items())


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
    require_cuda("benchmarking")
    output = OutputWriter(args.output_path, args.verbose)
    for run in runs:
        method = "CUDA events" if run.use_cuda_events else "CUDA graphs"
        samples = f"{run.num_iters} samples in {run.rounds} rounds"
        output.write_header(f"{run.routine}/{run.subroutine} {run.dtype}, {method}, {samples}")
        load_routine(run.routine).run_test(run, output)
    results = output.finalize()
    if args.plot and results:
        plot_results(results_frame(results), args.plot)
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


if __name__ == "__main__":
    sys.exit(main())
