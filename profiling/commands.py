"""The workbench's command lines, parsed with the standard library alone.

A command's module (``profiling.compare``, ``profiling.nsight``, ``profiling.workbench.publish``) loads torch,
pandas and matplotlib, which takes seconds (more on a loaded machine). So that ``--help`` and a usage error
answer at once and Ctrl-C while it starts ends it with one line, each module begins with::

    if __name__ == "__main__":
        commands.starting(commands.compare_parser())

before its other imports, and its ``main`` parses with the same parser. What a parser cannot check without
those libraries (the op names, presets, engines) its command checks after loading them, as a usage error.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType

EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""
WORKTREE = "WORKTREE"
"""The state name of the working tree as it is (uncommitted edits included), in ``profiling.compare``."""
CONFIG_FORM = "field=int,... (e.g. n=65536, or b=16,t=1500,c=1024)"


def starting(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line), which exits on ``--help`` or a usage error; until
    :func:`started`, Ctrl-C ends the command with one line and :data:`EXIT_INTERRUPTED`, not a traceback from
    inside an import."""
    parser.parse_args(argv)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job that ignores Ctrl-C still does
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def started() -> None:
    """The command has loaded what it needs: Ctrl-C raises ``KeyboardInterrupt`` again (its cleanups run)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    print("interrupted (Ctrl-C) while starting: nothing was run", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def parse_config(text: str) -> dict[str, int]:
    """``"b=16,t=1500,c=1024"`` -> ``{"b": 16, "t": 1500, "c": 1024}``; argparse's error names the flag otherwise."""
    config: dict[str, int] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"{text!r} is not {CONFIG_FORM}")
        try:
            config[name] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: {name}={value!r} is not an integer; expected {CONFIG_FORM}"
            ) from None
    return config


def nsight_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m profiling.nsight`` (:func:`profiling.nsight.sweep.main`)."""
    parser = argparse.ArgumentParser(
        prog="python -m profiling.nsight",
        description="Profile an op's sweep under Nsight Compute (or replay the recordings without a GPU),\n"
        "then print its launch table, where the numbers come from, and the report files.",
        epilog="\n".join(
            [
                "Without --live or --replay: live when a CUDA GPU and ncu are present, else replay the",
                "recordings committed under reports/h200/profiles/. Profiles are cached under",
                "reports/<gpu>/profiles/ and reused while the kernel sources, preset and ncu settings match.",
                "",
                "examples:",
                "  python -m profiling.nsight --list",
                "  python -m profiling.nsight --op scale --dtypes float16,bfloat16 --config n=1048576 --replay",
            ]
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--op", metavar="OP", help="the op to profile (--list shows them)")
    what.add_argument("--list", action="store_true", help="list the ops, their config fields and backends")
    parser.add_argument("--preset", default="roofline", metavar="PRESET",
                        help="metric set: timing (durations and launch configuration), roofline (+ bytes, "
                        "FLOP, peaks and ncu's advice), source (+ per-source-line instructions and stall "
                        "samples), full (every section; for one launch in the ncu GUI); "
                        "default: %(default)s")  # fmt: skip
    parser.add_argument("--dtypes", default="float16",
                        help="comma-separated dtypes: float32, float16, bfloat16; default: %(default)s")  # fmt: skip
    parser.add_argument("--backends", default="oasr,torch",
                        help="comma-separated backends (the op's: --list); default: %(default)s")  # fmt: skip
    parser.add_argument("--config", action="append", type=parse_config, metavar="FIELD=INT,...",
                        help="one config of the sweep, e.g. n=65536 or b=16,t=1500,c=1024 (the op's fields: "
                        "--list); repeat for more; default: the op's default sweep")  # fmt: skip
    parser.add_argument("--force", action="store_true", help="profile again even where the cache has the entries")
    parser.add_argument("--expect-launches", type=parse_config, metavar="BACKEND=INT,...",
                        help="kernel launches each entry of a backend must hold, e.g. oasr=1: another count "
                        "is an error naming the entries (default: any)")  # fmt: skip
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--live", dest="live", action="store_true", default=None,
                      help="profile now with ncu (needs a CUDA GPU and Nsight Compute)")  # fmt: skip
    mode.add_argument("--replay", dest="live", action="store_false",
                      help="only replay the recordings committed under reports/, never run ncu")  # fmt: skip
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="limit for the ncu run (finished configs are kept on timeout); "
                        "default: the runner's, 900")  # fmt: skip
    parser.add_argument("--gpus", metavar="all|N|IDS",
                        help="spread the configs over GPUs, one ncu run per GPU: all, a count, or ids like 0,1 "
                        "(default: one ncu run on this process's GPU)")  # fmt: skip
    parser.add_argument("--engine", default="local", metavar="ENGINE",
                        help="with --gpus: local (a process per GPU, default) or ray (Ray tasks)")  # fmt: skip
    parser.add_argument("--address", help="with --engine ray: the Ray cluster to join (auto, ray://host:10001)")
    return parser


def compare_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m profiling.compare`` (:func:`profiling.compare.main`)."""
    parser = argparse.ArgumentParser(
        prog="python -m profiling.compare",
        description="Time an op's oasr kernel at two source states and say, per config, faster, slower or same.",
        epilog="Without a GPU (or with --replay) the recorded samples of the two states are compared; "
        "an unknown op or a state without recordings is named with what there is.",
    )
    parser.add_argument("--op", required=True, metavar="OP", help="the op (python -m profiling.nsight --list)")
    parser.add_argument("--base", required=True, help=f"git revision of the baseline ({WORKTREE}: the working tree)")
    parser.add_argument("--head", default=WORKTREE, help="git revision compared with it (default: the working tree)")
    parser.add_argument("--config", action="append", type=parse_config, metavar="FIELD=INT,...",
                        help="a config; repeat for more (default: the op's two largest)")  # fmt: skip
    parser.add_argument("--dtypes", default="float16", help="comma-separated dtypes (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=6, help="turns per state (default: %(default)s)")
    parser.add_argument("--iters", type=int, default=120, help="samples per state in all (default: %(default)s)")
    parser.add_argument("--replay", action="store_true", help="compare the recordings only, never time")
    return parser


def publish_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m profiling.workbench.publish`` (:func:`profiling.workbench.publish.main`)."""
    parser = argparse.ArgumentParser(
        prog="python -m profiling.workbench.publish",
        description="The main command: run every notebook headless, export HTML reports and the index.",
    )
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: notebooks/*.ipynb)")
    parser.add_argument("--gpus", metavar="all|N|IDS", help="live: run one notebook per GPU at a time on these "
                        "(all, a count, or ids like 0,1; default: all; 1 runs them one after the other)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="replay: run N notebooks at a time (default: 1, one after the other)")  # fmt: skip
    return parser


def crosscheck_parser() -> argparse.ArgumentParser:
    """The command line of ``benchmarks/ncu_crosscheck.py``."""
    parser = argparse.ArgumentParser(
        prog="ncu_crosscheck.py", description="Do the benchmark's times agree with Nsight Compute's gpu__time_duration?"
    )
    parser.add_argument("--op", default="scale", help="the op (default: %(default)s)")
    parser.add_argument("--dtype", default="float16", help="its dtype (default: %(default)s)")
    parser.add_argument("--min-bytes", type=int, default=16 * 2**20,
                        help="configs moving at least this many bytes (default: %(default)s)")  # fmt: skip
    parser.add_argument("--tolerance-pct", type=float, default=10.0,
                        help="largest difference that passes, in %% (default: %(default)s)")  # fmt: skip
    return parser


def host_overhead_parser() -> argparse.ArgumentParser:
    """The command line of ``benchmarks/host_overhead.py``."""
    parser = argparse.ArgumentParser(
        prog="host_overhead.py",
        description="Host cost of one call (argument checks, dispatch, launch) of each op, oasr and torch.",
    )
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32"],
                        help="dtypes to time (default: %(default)s)")  # fmt: skip
    return parser


def gemm_grid_parser() -> argparse.ArgumentParser:
    """The command line of ``benchmarks/gemm_grid.py``."""
    parser = argparse.ArgumentParser(
        prog="gemm_grid.py",
        description="oasr's gemm, gemm_glu and bmm, as each call's plan runs them, against cuBLAS and torch's unfused "
        "epilogues, over issue 54's grid of shapes.",
    )
    parser.add_argument("--m", type=int, nargs="+", help="the rows (default: 1 16 500 1500 6000 16000 24000 32000)")
    parser.add_argument("--d", type=int, nargs="+", help="the model widths d (default: 256 512 768 1024)")
    parser.add_argument("--parts", nargs="+", default=["plain", "bias+silu", "bias+gelu", "glu", "ffn", "bmm"],
                        choices=["plain", "bias+silu", "bias+gelu", "glu", "ffn", "bmm"],
                        help="what to time (default: all)")  # fmt: skip
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"], help="(default: %(default)s)")
    parser.add_argument("--no-odd", action="store_true", help="no odd-sized or issue-54 shapes (--m and --d imply it)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per row (default: %(default)s)")
    parser.add_argument("--iters", type=int, default=30, help="samples per backend per row (default: %(default)s)")
    parser.add_argument("--list", action="store_true", help="print the shapes and exit (no GPU needed)")
    parser.add_argument("--output", help="also write the rows to this CSV file")
    return parser


def generate_parser() -> argparse.ArgumentParser:
    """The command line of ``notebooks/generate.py``."""
    parser = argparse.ArgumentParser(
        prog="notebooks/generate.py", description="Writes the family notebooks from one template."
    )
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    return parser
