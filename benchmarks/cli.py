"""The benchmark CLI's parser (``benchmarks/oasr_benchmark.py``), in the standard library only: its global
``--help`` and usage errors answer before the benchmark loads torch (see :mod:`profiling.commands`). A run's size
flag depends on its op's config fields, which the benchmark adds once it has found the op."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PROG = "oasr_benchmark.py"
DESCRIPTION = "Unified benchmark CLI: every family's ops against torch, one ``[PERF]`` line per size and backend."
GLOBAL_FLAGS = ("list", "testlist", "dry_run", "output_path", "plot", "verbose", "gpus", "engine", "address")


class UsageError(Exception):
    """A bad command line or testlist line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class _SizeAction(argparse.Action):
    """``--size``: one list; ``--shape``: a list of tuples, one per occurrence."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        if any(v < 1 for v in values):
            raise argparse.ArgumentError(self, f"sizes must be positive, not {' '.join(map(str, values))}")
        if self.nargs == "+":
            setattr(namespace, self.dest, [[v] for v in values])
        else:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), list(values)])


def _add_size_flag(parser: argparse.ArgumentParser, fields: Sequence[str]) -> None:
    """``--size N [N ...]`` for ops sized by ``n`` alone, else ``--shape F1 F2 ...`` (repeatable)."""
    fields = tuple(fields)
    default = "default: the op's benchmark configs"
    if fields == ("n",):
        flag, nargs, metavar, text = "--size", "+", "N", f"element counts ({default})"
    else:
        flag, nargs, metavar = "--shape", len(fields), tuple(f.upper() for f in fields)
        text = f"{', '.join(fields)}; repeat for several shapes ({default})"
    parser.add_argument(flag, dest="sizes", type=int, nargs=nargs, action=_SizeAction, metavar=metavar, help=text)


def _add_global_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("global flags (command line only)")
    group.add_argument("--list", action="store_true", help="list routines, subroutines and default configs")
    group.add_argument("--testlist", metavar="FILE", help="run each line of FILE (one run's flags per line)")
    group.add_argument("--dry_run", action="store_true", help="print the runs without running them (no GPU needed)")
    group.add_argument("--output_path", metavar="CSV", help="write all results as CSV (schema: benchmarks/README.md)")
    group.add_argument("--plot", metavar="PNG", help="save bandwidth against size per backend")
    group.add_argument("-v", "--verbose", action="count", default=0, help="-v: p10/p90/std; -vv: timing details")
    group.add_argument("--gpus", metavar="all|N|IDS", help="spread each run over GPUs: all, a count, or ids like 0,1 "
                       "(default: this process's GPU)")  # fmt: skip
    group.add_argument("--engine", default="local", help="with --gpus: one process per GPU (local, default) or Ray "
                       "tasks (ray)")  # fmt: skip
    group.add_argument(
        "--address", metavar="ADDR", help="with --engine ray: the cluster to join (auto, ray://host:10001)"
    )


def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run flags (command line or testlist line)")
    group.add_argument("--routine", help="kernel family (--list shows the families and their ops)")
    group.add_argument("--subroutine", help="op of the family (default: its first)")
    group.add_argument("--backends", nargs="+", metavar="NAME", help="backends to time (default: all of the op's)")
    group.add_argument("--dtype", default="float16", help="float32, float16 or bfloat16 (default float16)")
    group.add_argument("--refcheck", action="store_true", help="check each backend against the reference, after timing")
    group.add_argument("--allow_output_mismatch", action="store_true", help="report backends that fail --refcheck")
    group.add_argument("--num_iters", type=int, default=30, help="timed samples (graph replays or launches)")
    group.add_argument("--dry_run_iters", type=int, default=5, help="warm-up launches, not timed")
    group.add_argument("--rounds", type=int, default=3, help="the backends are timed in turn this many times")
    group.add_argument("--use_cuda_events", action="store_true", help="per-launch CUDA events instead of CUDA graphs")
    group.add_argument("--compare", action="store_true", help="time torch too (speedup) even if not in --backends")
    group.add_argument("--profile", action="store_true", help="run --target once per config in NVTX ranges (for ncu)")
    group.add_argument("--target", default="oasr", help="backend that --profile runs (default oasr)")


def build_parser(
    fields: Sequence[str] | None = None, *, global_flags: bool = True, exits: bool = False
) -> argparse.ArgumentParser:
    """The CLI parser; ``fields`` (an op's config fields) adds its size flag. Its errors raise :class:`UsageError`
    (a testlist line names its line), or with ``exits`` end the command as argparse does (usage, status 2)."""
    kind = argparse.ArgumentParser if exits else _Parser
    parser = kind(prog=PROG, description=DESCRIPTION, allow_abbrev=False, add_help=global_flags)
    if global_flags:
        _add_global_flags(parser)
    _add_run_flags(parser)
    if fields is not None:
        _add_size_flag(parser, fields)
    return parser


def names_a_run(argv: Sequence[str]) -> bool:
    """Whether ``argv`` names a routine or a testlist (then its help and checks need the op list)."""
    return any(arg.split("=", 1)[0] in ("--routine", "--testlist") for arg in argv)
