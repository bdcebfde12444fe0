"""Benchmark routines driven by the op registry: the one implementation behind every family module.

A family module (``scale.py``, ``activation.py``, ``norm.py``) only declares its
ops (``profiling.ops`` names, which are also its subroutines), its size flag and,
optionally, an extra large case; :class:`RegistryRoutine` provides the routine
contract of :mod:`benchmarks.routines` from that::

    ROUTINE = RegistryRoutine("norm", ("layer_norm", "rms_norm"), SHAPE_FLAG, large_case=gib_input_case())
    SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone = ROUTINE.contract()

Inputs, backends, the float64 reference, tolerances and the work model (bytes
moved, FLOP) all come from the op's :class:`~profiling.ops.OpSpec`. CLI backend
names are the family convention ``cuda`` (oasr's kernel, registry backend
``oasr``) and ``torch``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from benchmarks.routines.bench_utils import (
    BenchResult,
    Ceiling,
    OutputWriter,
    bench_backends,
    check_close,
    compute_bandwidth_tb_s,
    memory_ceiling,
    parse_dtype,
    profile_kernel,
    run_main,
)
from profiling.nvtx_ranges import RangeName
from profiling.ops import Config, Inputs, OpSpec, dtype_name, get_op
from profiling.timing import op_input_sets

BACKENDS: dict[str, str] = {"cuda": "oasr", "torch": "torch"}
"""CLI backend name -> op registry backend."""

GIB = 2**30

LargeCase = Callable[[OpSpec, torch.dtype], Config]
"""``(op, dtype) -> config`` of a case appended to an op's default sweep."""


class _SizeAction(argparse.Action):
    """Stores a size flag's values: one list (``nargs="+"``) or a list of tuples (repeatable, fixed ``nargs``)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        if any(v < 1 for v in values):
            raise argparse.ArgumentError(self, f"sizes must be positive, not {' '.join(map(str, values))}")
        if self.nargs == "+":
            setattr(namespace, self.dest, list(values))
        else:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), list(values)])


@dataclass(frozen=True)
class SizeFlag:
    """A routine's size flag and how its values become op configs.

    With one field (``--size N [N ...]``) each value is one config; with several
    (``--shape B T C``) the flag takes one value per field and may be repeated,
    each occurrence one config.
    """

    name: str  # flag without dashes, also the argparse dest
    fields: tuple[str, ...]  # config fields, in command-line order
    help: str

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        metavar = self.fields[0].upper() if len(self.fields) == 1 else tuple(f.upper() for f in self.fields)
        parser.add_argument(
            f"--{self.name}",
            type=int,
            nargs="+" if len(self.fields) == 1 else len(self.fields),
            action=_SizeAction,
            default=None,
            metavar=metavar,
            help=f"{self.help} (default: the routine's default configs)",
        )

    def configs(self, value: list[Any] | None) -> list[Config] | None:
        """The configs the parsed flag value asks for, or None when the flag was not given."""
        if value is None:
            return None
        if len(self.fields) == 1:
            return [{self.fields[0]: v} for v in value]
        return [dict(zip(self.fields, values, strict=True)) for values in value]


SIZE_FLAG = SizeFlag("size", ("n",), "element counts")
SHAPE_FLAG = SizeFlag("shape", ("b", "t", "c"), "batch, frames, channels; repeat for several shapes")


def gib_input_case(
    *, batch: int = 64, width: int = 1024, input_channels: Mapping[str, int] | None = None, nbytes: int = GIB
) -> LargeCase:
    """The large case of a ``[b, t, c]`` op: its input ``[batch, t, width]`` is exactly ``nbytes`` in every dtype.

    ``t = nbytes / (batch * width * itemsize)``: 8192 for fp16/bf16 and 4096 for fp32
    at the defaults. ``input_channels[op]`` is how many times ``c`` the input is wide
    (2 for GLU, whose ``c`` is the output width), so ``c = width / input_channels``.
    """
    channels = dict(input_channels or {})

    def case(op: OpSpec, dtype: torch.dtype) -> Config:
        return {"b": batch, "t": nbytes // (batch * width * dtype.itemsize), "c": width // channels.get(op.name, 1)}

    return case


class RegistryRoutine:
    """A benchmark routine over registry ops: the contract of :mod:`benchmarks.routines`, for any family.

    Parameters
    ----------
    name : str
        The routine (``--routine``), also the ``routine`` column of results.
    ops : sequence of str
        Op registry names; they are the subroutines, the first the default.
    size_flag : SizeFlag
        The routine's size flag.
    large_case : LargeCase, optional
        A case appended to every op's ``default_sweep`` (per dtype).
    """

    def __init__(self, name: str, ops: Sequence[str], size_flag: SizeFlag, *, large_case: LargeCase | None = None):
        self.name = name
        self.ops: dict[str, OpSpec] = {op: get_op(op) for op in ops}
        self.subroutines = list(self.ops)
        self.size_flag = size_flag
        self.large_case = large_case
        for op in self.ops.values():
            if op.config_fields != size_flag.fields:
                raise ValueError(
                    f"op {op.name} has config fields {op.config_fields}, --{size_flag.name} gives {size_flag.fields}"
                )

    def contract(self) -> tuple[list[str], Callable, Callable, Callable, Callable]:
        """``SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone`` for the family module."""
        return self.subroutines, self.parse_args, self.run_test, self.get_default_configs, self.run_standalone

    # -- the contract ---------------------------------------------------------------------------

    def get_default_configs(self, dtype: str | torch.dtype = "float16") -> dict[str, list[Config]]:
        """Per subroutine: the op's registry ``default_sweep``, then the large case (its shape may depend on dtype)."""
        dtype = parse_dtype(dtype)
        return {
            sub: [dict(c) for c in op.default_sweep] + ([self.large_case(op, dtype)] if self.large_case else [])
            for sub, op in self.ops.items()
        }

    def parse_args(self, parser: argparse.ArgumentParser) -> None:
        self.size_flag.add_to(parser)

    def run_test(self, args: argparse.Namespace, output: OutputWriter) -> None:
        op = self.ops[args.subroutine]
        dtype = parse_dtype(args.dtype)
        configs = self.size_flag.configs(getattr(args, self.size_flag.name))
        configs = configs or self.get_default_configs(dtype)[args.subroutine]
        if args.profile:
            self._profile(op, args, configs, dtype, output)
            return
        backends = list(args.backends or BACKENDS)
        unknown = [b for b in backends if b not in BACKENDS]
        if unknown:
            output.error(f"unknown backend(s) {', '.join(unknown)} for {self.name}; choose from {', '.join(BACKENDS)}")
            return
        ceiling = None
        if args.compare:
            backends += [] if "torch" in backends else ["torch"]
            ceiling = memory_ceiling()
            output.info(f"measured {ceiling} (device-to-device copy, this run)")

        for config in configs:
            self._run_config(op, config, dtype, backends, ceiling, args, output)

    def run_standalone(self, variant: str | None = None) -> None:
        """Entry of ``bench_<variant>.py``: the unified CLI with ``--routine <name> --subroutine <variant>``."""
        raise SystemExit(run_main(self.name, variant or self.subroutines[0]))

    # -- pieces ---------------------------------------------------------------------------------

    def _run_config(
        self,
        op: OpSpec,
        config: Config,
        dtype: torch.dtype,
        backends: list[str],
        ceiling: Ceiling | None,
        args: argparse.Namespace,
        output: OutputWriter,
    ) -> None:
        """Time and check one config; its inputs are freed on return (the large cases are GiBs)."""
        label = ",".join(f"{k}={config[k]}" for k in op.config_fields)
        sets, fns = self.setup(op, config, dtype)
        # Timed before the reference check: right after the float64 check of a 1 GiB case
        # the next timed launches ran 7-12% slow on the H200 (benchmarks/timing_drift.py).
        timings = bench_backends(
            {b: fns[b] for b in backends},
            rounds=args.rounds,
            dry_run_iters=args.dry_run_iters,
            num_iters=args.num_iters,
            use_cuda_events=args.use_cuda_events,
        )
        checks = refcheck(op, sets[0], backends, dtype) if args.refcheck else {}
        failed = [b for b, (passed, _) in checks.items() if not passed]
        if failed:
            output.error(f"{op.name} {label} {dtype_name(dtype)}: {', '.join(failed)} differ from the reference")
            if not args.allow_output_mismatch:
                return
        work = op.work(config, dtype)
        for backend, timing in timings.items():
            bandwidth = compute_bandwidth_tb_s(work.bytes, timing.median_ms)
            passed, max_diff = checks.get(backend, (None, None))
            output.write_result(
                BenchResult.from_timing(
                    timing,
                    routine=self.name,
                    subroutine=op.name,
                    backend=backend,
                    shape=f"[{','.join(str(config[k]) for k in op.config_fields)}]",
                    dtype=dtype_name(dtype),
                    bandwidth_tb_s=bandwidth,
                    config=label,
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

    @staticmethod
    def setup(
        op: OpSpec, config: Config, dtype: torch.dtype
    ) -> tuple[list[Inputs], dict[str, list[Callable[[], object]]]]:
        """Rotated input sets for ``config`` and, per CLI backend, one zero-argument callable per set."""
        sets = op_input_sets(op, config, dtype)
        fns = {cli: [partial(op.backends[name], inputs) for inputs in sets] for cli, name in BACKENDS.items()}
        return sets, fns

    @staticmethod
    def _profile(
        op: OpSpec, args: argparse.Namespace, configs: list[Config], dtype: torch.dtype, output: OutputWriter
    ) -> None:
        """One launch of ``args.target`` per config, each in its NVTX range, warm-up outside."""
        for config in configs:
            inputs = op.make_inputs(config, dtype, torch.device("cuda"), 0)
            name = RangeName(op.name, args.target, dict(config), dtype_name(dtype))
            profile_kernel(name, partial(op.backends[args.target], inputs), warmup=args.dry_run_iters)
            output.info(f"profiled {name}; select with --nvtx --nvtx-include '{name.nvtx_filter()}'")


def refcheck(op: OpSpec, inputs: Inputs, backends: list[str], dtype: torch.dtype) -> dict[str, tuple[bool, float]]:
    """``{backend: (passed, max_diff)}`` against the float64 reference, at the op's tolerance."""
    expected = op.reference(inputs)
    rtol, atol = op.tolerance(dtype)
    return {b: check_close(op.backends[BACKENDS[b]](inputs), expected, rtol=rtol, atol=atol) for b in backends}
