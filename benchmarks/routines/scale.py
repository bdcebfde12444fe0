"""Scale family benchmark routines: ``x * factor``, oasr's kernel (``cuda``) against ``torch.mul`` (``torch``).

Inputs, backends, reference and work model come from the op registry
(:data:`profiling.ops.SCALE`); ``--size`` is the element count ``n``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from benchmarks.routines.bench_utils import (
    BenchResult,
    OutputWriter,
    bench_fn,
    check_close,
    compute_bandwidth_tb_s,
    memory_ceiling,
    parse_dtype,
    profile_kernel,
    run_main,
)
from profiling.nvtx_ranges import RangeName
from profiling.ops import Config, Inputs, dtype_name, get_op
from profiling.timing import op_input_sets

SUBROUTINES = ["scale"]
BACKENDS: dict[str, str] = {"cuda": "oasr", "torch": "torch"}
"""CLI backend name -> op registry backend."""

SCALE = get_op("scale")


def get_default_configs() -> dict[str, list[dict[str, Any]]]:
    """The registry's sweep: 4 KiB .. 1 GiB of fp16 input, every 4x."""
    return {"scale": [dict(config) for config in SCALE.default_sweep]}


def parse_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size", type=int, nargs="+", default=None, metavar="N", help="element counts (default: the registry sweep)"
    )


def setup_scale(config: Config, dtype: torch.dtype) -> tuple[list[Inputs], dict[str, list[Callable[[], object]]]]:
    """Rotated input sets for ``config`` and, per CLI backend, one zero-argument callable per set."""
    sets = op_input_sets(SCALE, config, dtype)
    fns = {cli: [partial(SCALE.backends[name], inputs) for inputs in sets] for cli, name in BACKENDS.items()}
    return sets, fns


def run_test(args: argparse.Namespace, output: OutputWriter) -> None:
    dtype = parse_dtype(args.dtype)
    configs = [{"n": n} for n in args.size] if args.size else get_default_configs()[args.subroutine]
    if args.profile:
        _profile(args, configs, dtype, output)
        return
    backends = list(args.backends or BACKENDS)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        output.error(f"unknown backend(s) {', '.join(unknown)} for scale; choose from {', '.join(BACKENDS)}")
        return
    ceiling = None
    if args.compare:
        backends += [] if "torch" in backends else ["torch"]
        ceiling = memory_ceiling()
        output.info(f"measured {ceiling} (device-to-device copy, this run)")

    for config in configs:
        sets, fns = setup_scale(config, dtype)
        checks = _refcheck(sets[0], backends) if args.refcheck else {}
        failed = [b for b, (passed, _) in checks.items() if not passed]
        if failed:
            output.error(f"scale n={config['n']} {dtype_name(dtype)}: {', '.join(failed)} differ from the reference")
            if not args.allow_output_mismatch:
                continue
        timings = {
            b: bench_fn(
                fns[b], dry_run_iters=args.dry_run_iters, num_iters=args.num_iters, use_cuda_events=args.use_cuda_events
            )
            for b in backends
        }
        work = SCALE.work(config, dtype)
        for backend, timing in timings.items():
            bandwidth = compute_bandwidth_tb_s(work.bytes, timing.median_ms)
            passed, max_diff = checks.get(backend, (None, None))
            output.write_result(
                BenchResult.from_timing(
                    timing,
                    routine="scale",
                    subroutine=args.subroutine,
                    backend=backend,
                    shape=f"[{config['n']}]",
                    dtype=dtype_name(dtype),
                    bandwidth_tb_s=bandwidth,
                    config=f"n={config['n']}",
                    bytes_moved=work.bytes,
                    flops=work.total_flops,
                    speedup_vs_torch=timings["torch"].median_ms / timing.median_ms if "torch" in timings else None,
                    ceiling=ceiling.name if ceiling else "",
                    ceiling_value=ceiling.value if ceiling else None,
                    pct_of_ceiling=100 * bandwidth / ceiling.value if ceiling else None,
                    refcheck="" if passed is None else ("pass" if passed else "fail"),
                    max_diff=max_diff,
                )
            )


def _refcheck(inputs: Inputs, backends: list[str]) -> dict[str, tuple[bool, float]]:
    """``{backend: (passed, max_diff)}`` against the float64 reference, at the op's tolerance."""
    expected = SCALE.reference(inputs)
    rtol, atol = SCALE.tolerance(inputs["x"].dtype)
    return {b: check_close(SCALE.backends[BACKENDS[b]](inputs), expected, rtol=rtol, atol=atol) for b in backends}


def _profile(args: argparse.Namespace, configs: list[Config], dtype: torch.dtype, output: OutputWriter) -> None:
    """One launch of ``args.target`` per config, each in its NVTX range, warm-up outside."""
    for config in configs:
        inputs = SCALE.make_inputs(config, dtype, torch.device("cuda"), 0)
        name = RangeName(SCALE.name, args.target, dict(config), dtype_name(dtype))
        profile_kernel(name, partial(SCALE.backends[args.target], inputs), warmup=args.dry_run_iters)
        output.info(f"profiled {name}; select with --nvtx --nvtx-include '{name.nvtx_filter()}'")


def run_standalone(variant: str = "scale") -> None:
    """Entry of ``bench_scale.py``: the unified CLI with ``--routine scale --subroutine <variant>``."""
    raise SystemExit(run_main("scale", variant))
