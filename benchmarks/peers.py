#!/usr/bin/env python3
"""Oasr's ops against the libraries a kernel engineer would otherwise use, in one process, inside a time budget.

Examples::

    python benchmarks/peers.py --dry-run                       # what would run, and why a peer would not (no GPU)
    python benchmarks/peers.py --time-budget 300 --output reports/h200/peers.md
    python benchmarks/peers.py --ops rms_norm glu --dtypes bfloat16 --max-autotune

A routine of the benchmark harness: the ops are the harness's (:data:`profiling.harness.ops.OPS`), their
shapes its benchmark configs (the Conformer shapes of ``benchmarks/testlists/conformer.txt``), the peers
those of :mod:`benchmarks.peer_libraries`. For each op, shape and dtype it times oasr, the op's torch
baselines and every peer that computes the same function with the harness's one timer (CUDA-graph device
time over rotated input sets, backends in turn: :func:`profiling.harness.timing.time_interleaved`), then
checks each against the op's float64 reference with the one checker
(:func:`profiling.harness.correctness.compare`) on fresh inputs. A peer whose output differs is timed but
marked, and never counts as the best peer. A peer that is missing, fails, or does not take the dtype or
shape is a row with its reason.

The table: per shape and dtype, each backend's median time, the best peer, ``best peer / oasr`` (above 1:
oasr is faster) and the % of the ceiling, the time the op's work model needs at the ceilings measured in
the same process: its bytes at the device-to-device copy bandwidth and its tensor-core FLOP at the cuBLAS
BF16 rate, whichever is longer (``profiling/analysis/roofline.py``'s measured ceilings).

The budget: shapes are taken in rounds (every op's first shape, in both dtypes, then every op's second,
...), and a shape whose expected cost (the op's earlier shapes, else a prior) does not fit in what is left
is a ``skipped`` row: fewer shapes rather than a timeout. The Markdown and the CSV are rewritten after each
shape, so a stopped run keeps what it measured.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import html
import itertools
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
import torch

from benchmarks.peer_libraries import PEERS, Impl, Library, Peer, UnitContext, Unsupported, supports_dtype
from oasr.jit import core as jit_core
from oasr.jit.families import FAMILIES
from profiling import provenance
from profiling.harness import timing
from profiling.harness.correctness import compare
from profiling.harness.ops import OPS, Config, OpSpec, dtype_name, parse_dtype

PROG = "peers.py"
CHECK_SEED = 10_007
"""Seed of the inputs each backend is checked on (the timed sets use 0, 1, ...)."""
DEFAULT_BUDGET_S = 300.0
MARGIN_S = 10.0
"""Kept for writing the outputs at the end."""
PRIOR_UNIT_S = 20.0
"""Expected cost of an op's first shape before any was measured (JIT, Inductor's compiles, timing, check)."""
PRIOR_MAX_AUTOTUNE_S = 60.0
"""Added to the prior with ``--max-autotune`` (its autotuning compiles and times many kernels)."""
REASON_CHARS = 240

STATUSES = {
    "ok": "timed, output within tolerance of the float64 reference",
    "fail": "timed, but its output differs from the float64 reference (never the best peer)",
    "error": "raised an exception (build, compile, launch or capture)",
    "unsupported": "does not take this dtype, shape or layout",
    "missing": "its package does not import here",
    "lacks": "the library has no such function",
    "not requested": "slow: needs its command-line flag",
    "skipped": "not run: the time budget was spent",
    "absent": "the op is not in this checkout",
}
CSV_COLUMNS = (
    "op", "family", "config", "shape", "dtype", "backend", "kind", "status", "reason", "seconds", "p10_seconds",
    "p90_seconds", "iqr_rel", "noisy", "samples", "launches_per_sample", "input_sets", "first_call_seconds",
    "bytes", "flop", "ceiling_seconds", "pct_of_ceiling", "check", "max_abs_err",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------- plan


@dataclasses.dataclass(frozen=True)
class Unit:
    """One op at one shape in one dtype: what is timed together (``index``: the shape's place in the op's list)."""

    op: OpSpec
    config: Config
    dtype: str
    index: int

    @property
    def label(self) -> str:
        return f"{self.op.name} {self.op.config_label(self.config)} {self.dtype}"


def plan_units(ops: Sequence[OpSpec], dtypes: Sequence[str]) -> list[Unit]:
    """Every op's benchmark configs in each of ``dtypes`` it takes, in rounds: every op's first shape (each
    dtype), then every op's second, ... so that a budget cut leaves fewer shapes of every op, not fewer ops."""
    lists = {
        (op.name, dtype): _distinct(op.benchmark_configs(dtype)) for op in ops for dtype in dtypes if dtype in op.dtypes
    }
    depth = max((len(configs) for configs in lists.values()), default=0)
    return [
        Unit(op, configs[index], dtype, index)
        for index in range(depth)
        for op in ops
        for dtype in dtypes
        if (configs := lists.get((op.name, dtype))) is not None and index < len(configs)
    ]


def _distinct(configs: Sequence[Config]) -> list[Config]:
    """``configs`` without repeats (a large case that is also in the sweep is timed once)."""
    seen: list[Config] = []
    return [c for c in configs if c not in seen and not seen.append(c)]


def defer_waiting(units: Sequence[Unit], waits: Callable[[Unit], bool]) -> list[Unit]:
    """``units`` of one round with those that would wait for a peer's preparation (a JIT build still running)
    moved to the end, in order: the build goes on while the others are timed."""
    return [u for u in units if not waits(u)] + [u for u in units if waits(u)]


def absent_ops(peers: Sequence[Peer], ops: Mapping[str, OpSpec]) -> list[str]:
    """Ops the peers know that this checkout's harness does not have yet (e.g. attention before it lands)."""
    named = dict.fromkeys(name for peer in peers for name in [*peer.impls, *peer.lacks])
    return [name for name in named if name not in ops]


class Budget:
    """The time left, and what a shape of an op is expected to cost (its earlier shapes' mean, else a prior)."""

    def __init__(
        self,
        seconds: float,
        *,
        prior: float = PRIOR_UNIT_S,
        margin: float = MARGIN_S,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not seconds > 0:
            raise ValueError(f"--time-budget must be positive, not {seconds}")
        self.seconds, self.prior, self.margin = float(seconds), prior, margin
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.costs: dict[str, list[float]] = {}

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def estimate(self, key: str) -> float:
        costs = self.costs.get(key)
        return sum(costs) / len(costs) if costs else self.prior

    def record(self, key: str, seconds: float) -> None:
        self.costs.setdefault(key, []).append(seconds)

    def refuse(self, key: str) -> str | None:
        """None if a shape of ``key`` fits in what is left (less the margin), else the reason."""
        left, need = self.left() - self.margin, self.estimate(key)
        if need <= left:
            return None
        basis = "its earlier shapes took that long" if key in self.costs else "a first shape's prior"
        return (
            f"time budget: {max(left, 0):.0f} s left of {self.seconds:.0f}, this shape needs about {need:.0f} s "
            f"({basis})"
        )


# ---------------------------------------------------------------------------------------------- rows


def clean_reason(error: BaseException | str) -> str:
    """One line: an exception's type and first line of message (what a cell can hold)."""
    if isinstance(error, BaseException):
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        text = f"{type(error).__name__}: {first}" if first else type(error).__name__
        if isinstance(error, Unsupported):
            text = first
    else:
        text = " ".join(str(error).split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def ceiling_seconds(op: OpSpec, config: Config, dtype: str, copy_bytes_per_s: float, tensor_flop_per_s: float) -> float:
    """The work model's time at the measured ceilings: bytes at copy bandwidth, tensor FLOP at cuBLAS's rate."""
    work = op.work(config, parse_dtype(dtype))
    tensor = sum(flop for kind, flop in work.flops.items() if kind.startswith("tensor_"))
    return max(work.bytes / copy_bytes_per_s, tensor / tensor_flop_per_s if tensor else 0.0)


def base_row(unit: Unit, backend: str, kind: str, status: str, reason: str = "") -> dict[str, Any]:
    work = unit.op.work(unit.config, parse_dtype(unit.dtype))
    return {
        "op": unit.op.name,
        "family": unit.op.family.name,
        "config": unit.op.config_label(unit.config),
        "shape": "[" + ",".join(str(unit.config[k]) for k in unit.op.config_fields) + "]",
        "dtype": unit.dtype,
        "backend": backend,
        "kind": kind,
        "status": status,
        "reason": reason,
        "bytes": work.bytes,
        "flop": work.total_flops,
    }


def absent_row(op_name: str, peer: Peer) -> dict[str, Any]:
    return {
        "op": op_name,
        "backend": peer.name,
        "kind": "peer",
        "status": "absent",
        "reason": f"op {op_name} is not in this checkout's harness (profiling.harness.ops.OPS): skipped",
    }


# ---------------------------------------------------------------------------------------------- backends


@dataclasses.dataclass
class Backend:
    """A column of one unit: oasr, a torch baseline of the op, or a peer; ``make`` builds its launch per input
    set, ``reference`` is the float64 reference it is checked against."""

    name: str
    kind: str
    make: Callable[[dict], Callable[[], torch.Tensor]]
    reference: Callable[[dict], torch.Tensor]


class Peers:
    """The peers of a run, their libraries loaded once (a failure becomes every row's reason), what their
    ``prepare`` hooks build, and which are turned on."""

    def __init__(self, peers: Sequence[Peer], *, enabled_flags: Iterable[str] = ()) -> None:
        self.peers = list(peers)
        self.flags = set(enabled_flags)
        self.modules: dict[str, Any] = {}
        self.load_errors: dict[str, str] = {}
        self.prepared: dict[str, concurrent.futures.Future] = {}

    def load(self, library: Library) -> Any:
        if library.name not in self.modules and library.name not in self.load_errors:
            try:
                self.modules[library.name] = library.load()
            except Exception as error:  # ImportError, or a package that breaks on import
                reason = f"does not import ({clean_reason(error)})"
                if library.cannot_travel:
                    reason += f"; {library.cannot_travel}"
                self.load_errors[library.name] = reason
        return self.modules.get(library.name)

    def static_status(self, peer: Peer, op: OpSpec, dtype: str) -> tuple[str, str] | None:
        """(status, reason) when ``peer`` will not run ``op`` in ``dtype`` for a reason known before any
        tensor exists; None when it runs, and also when it is no column of this op at all."""
        if op.name in peer.lacks:
            return "lacks", peer.lacks[op.name]
        impl = peer.impls.get(op.name)
        if impl is None:
            return None
        if peer.optional_flag and peer.optional_flag not in self.flags:
            return "not requested", f"run with {peer.optional_flag} (slow to compile)"
        self.load(peer.library)
        if peer.library.name in self.load_errors:
            return "missing", f"{peer.library.distribution} {self.load_errors[peer.library.name]}"
        unsupported = supports_dtype(impl, dtype)
        if unsupported:
            return "unsupported", unsupported
        return None

    def columns(self, op: OpSpec) -> list[Peer]:
        """The peers that are a column of ``op``'s table: they compute it, or say why they do not."""
        return [p for p in self.peers if op.name in p.impls or op.name in p.lacks]

    def statuses(self, unit: Unit) -> list[tuple[Peer, tuple[str, str] | None]]:
        """Each peer column of ``unit``'s op with its static (status, reason), None for those that run."""
        return [(peer, self.static_status(peer, unit.op, unit.dtype)) for peer in self.columns(unit.op)]

    def start_preparing(self, pool: concurrent.futures.Executor) -> None:
        for library in dict.fromkeys(p.library for p in self.peers):
            if library.prepare is not None and self.load(library) is not None and library.name not in self.prepared:
                self.prepared[library.name] = pool.submit(library.prepare)

    def waits(self, unit: Unit) -> bool:
        """Whether a peer of ``unit`` would wait for its library's preparation, still running."""
        return any(
            not self.prepared[p.library.name].done()
            for p, static in self.statuses(unit)
            if static is None and p.library.name in self.prepared
        )

    def prepared_state(self, library: Library, timeout: float) -> Any:
        future = self.prepared.get(library.name)
        if future is None:
            return None
        try:
            return future.result(timeout=max(timeout, 0.0))
        except concurrent.futures.TimeoutError as error:
            raise Unsupported(
                f"{library.name}'s preparation (JIT build) had not finished in the time budget"
            ) from error
        except Exception as error:
            raise Unsupported(f"{library.name}'s preparation failed: {clean_reason(error)}") from error


def harness_backends(op: OpSpec) -> list[Backend]:
    """oasr and the op's torch baselines, as the harness runs them."""
    return [
        Backend(name, "oasr" if name == "oasr" else "baseline", _partial(fn), op.reference_for(name))
        for name, fn in op.backends.items()
    ]


def _partial(fn: Callable[[dict], torch.Tensor]) -> Callable[[dict], Callable[[], torch.Tensor]]:
    return lambda inputs: lambda: fn(inputs)


def peer_backend(peer: Peer, impl: Impl, ctx: UnitContext) -> Backend:
    reference = ctx.op.reference_for("torch") if impl.reference == "torch" else ctx.op.reference
    return Backend(peer.name, "peer", lambda inputs: impl.make(ctx, inputs), reference)


# ---------------------------------------------------------------------------------------------- one unit


@dataclasses.dataclass(frozen=True)
class Options:
    rounds: int = 3
    warmup: int = 5
    iters: int = 30


def check_backend(backend: Backend, make_inputs: Callable[[], dict], rtol: float, atol: float) -> dict[str, Any]:
    """``backend`` on fresh inputs against its float64 reference (taken before the launch, which may update its
    own copies in place), ``out`` poisoned with NaN first: :func:`compare`'s verdict and errors."""
    inputs = make_inputs()
    expected = backend.reference(inputs)
    launch = backend.make(inputs)
    if "out" in inputs and inputs["out"].is_floating_point():
        inputs["out"].fill_(float("nan"))
    return compare(launch(), expected, rtol, atol)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_unit(
    unit: Unit,
    peers: Peers,
    options: Options,
    ceilings: tuple[float, float],
    budget: Budget,
    *,
    device: str = "cuda",
    input_sets: Callable[[Unit], list[dict]] | None = None,
    timer: Callable[..., dict[str, timing.TimingResult]] = timing.time_interleaved,
) -> list[dict[str, Any]]:
    """Time and check every backend of ``unit``; one row each (a failure is its backend's row, not the unit's)."""
    op, dtype = unit.op, parse_dtype(unit.dtype)
    torch._dynamo.reset()  # each shape compiles on its own (static shapes, no recompile limit)
    sets = (input_sets or _input_sets)(unit)
    rows: dict[str, dict[str, Any]] = {}
    candidates: list[Backend] = list(harness_backends(op))
    for peer, static in peers.statuses(unit):
        if static is not None:
            rows[peer.name] = base_row(unit, peer.name, "peer", *static)
            continue
        try:
            prepared = peers.prepared_state(peer.library, budget.left() - budget.margin)
        except Unsupported as error:
            rows[peer.name] = base_row(unit, peer.name, "peer", "error", clean_reason(error))
            continue
        ctx = UnitContext(op, unit.config, dtype, peers.modules[peer.library.name], prepared)
        candidates.append(peer_backend(peer, peer.impls[op.name], ctx))

    launches: dict[str, list[Callable[[], torch.Tensor]]] = {}
    first_call: dict[str, float] = {}
    for backend in candidates:
        try:
            fns = [backend.make(inputs) for inputs in sets]
            start = time.perf_counter()
            fns[0]()  # JIT builds and compiles happen here, outside the timing
            _sync()
            first_call[backend.name] = time.perf_counter() - start
            launches[backend.name] = fns
        except Unsupported as error:
            rows[backend.name] = base_row(unit, backend.name, backend.kind, "unsupported", clean_reason(error))
        except Exception as error:
            rows[backend.name] = base_row(unit, backend.name, backend.kind, "error", clean_reason(error))

    results = _time_all(launches, options, timer, rows, unit, {b.name: b.kind for b in candidates})
    rtol, atol = op.tolerance(dtype)
    copy_bytes_per_s, tensor_flop_per_s = ceilings
    floor = ceiling_seconds(op, unit.config, unit.dtype, copy_bytes_per_s, tensor_flop_per_s)
    fresh = lambda: op.make_inputs(unit.config, dtype, torch.device(device), CHECK_SEED)  # noqa: E731
    for backend in candidates:
        if backend.name not in results:
            continue
        try:
            check = check_backend(backend, fresh, rtol, atol)
        except Exception as error:
            rows[backend.name] = base_row(unit, backend.name, backend.kind, "error", f"check: {clean_reason(error)}")
            continue
        result = results[backend.name]
        seconds = result.median_ms * 1e-3
        rows[backend.name] = base_row(unit, backend.name, backend.kind, "ok" if check["passed"] else "fail") | {
            "seconds": seconds,
            "p10_seconds": result.p10_ms * 1e-3,
            "p90_seconds": result.p90_ms * 1e-3,
            "iqr_rel": result.iqr_rel,
            "noisy": result.noisy,
            "samples": len(result.samples_ms),
            "launches_per_sample": result.launches_per_sample,
            "input_sets": result.input_sets,
            "first_call_seconds": first_call[backend.name],
            "ceiling_seconds": floor,
            "pct_of_ceiling": 100 * floor / seconds,
            "check": "pass" if check["passed"] else "fail",
            "max_abs_err": check["max_abs_err"],
        }
        if not check["passed"]:
            rows[backend.name]["reason"] = f"max abs error {check['max_abs_err']:.3g} past rtol {rtol:g}, atol {atol:g}"
    del sets, launches
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    order = [b.name for b in candidates] + [p.name for p in peers.columns(op)]
    return [rows[name] for name in dict.fromkeys(order) if name in rows]


def _input_sets(unit: Unit) -> list[dict]:
    return timing.op_input_sets(unit.op, unit.config, unit.dtype)


def _time_all(launches, options: Options, timer, rows, unit: Unit, kinds: Mapping[str, str]):
    """All backends in turn (the harness's interleaved rounds); if that fails, each alone, so that the one
    that fails (a launch that cannot be captured) gets the error row and the others their times."""
    settings = dict(rounds=options.rounds, warmup=options.warmup, iters=options.iters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", timing.NoisyTimingWarning)  # the noisy column says it
        try:
            return timer(launches, **settings) if launches else {}
        except Exception:
            results = {}
            for name, fns in launches.items():
                try:
                    results[name] = timer({name: fns}, **settings)[name]
                except Exception as error:
                    rows[name] = base_row(unit, name, kinds[name], "error", f"timing: {clean_reason(error)}")
            return results


# ---------------------------------------------------------------------------------------------- tables


def md_escape(text: object) -> str:
    """``text`` safe in a Markdown table cell and in the HTML it renders to: one line, HTML-escaped, the
    characters Markdown reads (``|``, backticks, ``*``, ``_``, brackets) backslash-escaped."""
    one_line = " ".join(str(text).split())
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", html.escape(one_line, quote=False))


def _us(seconds: float) -> str:
    return f"{1e6 * seconds:.2f}" if seconds is not None and math.isfinite(seconds) else "–"


def best_peer(group: pd.DataFrame) -> pd.Series | None:
    """The fastest backend other than oasr whose output passed the check, or None."""
    eligible = group[(group["kind"] != "oasr") & (group["status"] == "ok")]
    return None if eligible.empty else eligible.loc[eligible["seconds"].idxmin()]


def shape_table(frame: pd.DataFrame, op_name: str) -> pd.DataFrame:
    """One row per shape and dtype of ``op_name`` (in plan order): each backend's cell, the best peer,
    ``best / oasr`` and the two % of ceiling."""
    rows = frame[(frame["op"] == op_name) & frame["config"].notna()]
    backends = list(dict.fromkeys(rows["backend"]))
    table = []
    for (config, dtype), group in rows.groupby(["config", "dtype"], sort=False):
        by_backend = {r["backend"]: r for _, r in group.iterrows()}
        oasr = by_backend.get("oasr")
        best = best_peer(group)
        timed = oasr is not None and oasr["status"] in ("ok", "fail")
        line: dict[str, Any] = {"shape": config, "dtype": dtype}
        for name in backends:
            line[name] = _cell(by_backend.get(name))
        line["best peer"] = "–" if best is None else best["backend"]
        line["best / oasr"] = f"{best['seconds'] / oasr['seconds']:.2f}x" if timed and best is not None else "–"
        line["oasr % of ceiling"] = f"{oasr['pct_of_ceiling']:.0f}%" if timed else "–"
        line["best % of ceiling"] = "–" if best is None else f"{best['pct_of_ceiling']:.0f}%"
        table.append(line)
    return pd.DataFrame(table)


def _cell(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return ""
    if row["status"] == "ok":
        return _us(row["seconds"])
    if row["status"] == "fail":
        return f"{_us(row['seconds'])} ✗"
    return {"skipped": "skip", "not requested": "off"}.get(row["status"], "–")


def not_run(frame: pd.DataFrame, op_name: str) -> pd.DataFrame:
    """Per backend and reason, the shapes it did not run (or failed its check) on: what the cells leave out."""
    rows = frame[(frame["op"] == op_name) & ~frame["status"].isin(["ok"])]
    grouped = []
    for (backend, status, reason), group in rows.groupby(["backend", "status", "reason"], sort=False, dropna=False):
        shapes = [f"{c} {d}" for c, d in zip(group["config"], group["dtype"], strict=True) if isinstance(c, str)]
        total = int(((frame["op"] == op_name) & (frame["backend"] == backend)).sum())
        where = "all shapes" if len(shapes) == total or not shapes else "; ".join(shapes)
        grouped.append({"backend": backend, "status": status, "reason": reason, "where": where})
    return pd.DataFrame(grouped, columns=["backend", "status", "reason", "where"])


def summary(frame: pd.DataFrame, ops: Sequence[str]) -> pd.DataFrame:
    """Per op: shapes timed, the worst ``best peer / oasr`` with its shape and peer, and the peers that ran."""
    out = []
    for op_name in ops:
        rows = frame[frame["op"] == op_name]
        worst, where, timed = math.inf, "", 0
        for (config, dtype), group in rows[rows["config"].notna()].groupby(["config", "dtype"], sort=False):
            oasr = group[group["backend"] == "oasr"]
            if oasr.empty or oasr.iloc[0]["status"] not in ("ok", "fail"):
                continue
            timed += 1
            best = best_peer(group)
            if best is not None and best["seconds"] / oasr.iloc[0]["seconds"] < worst:
                worst = best["seconds"] / oasr.iloc[0]["seconds"]
                where = f"{config} {dtype} ({best['backend']})"
        ran = sorted(set(rows[(rows["kind"] == "peer") & (rows["status"] == "ok")]["backend"]))
        out.append(
            {
                "op": op_name,
                "shapes timed": timed,
                "worst best peer / oasr": f"{worst:.2f}x" if math.isfinite(worst) else "–",
                "at": where or "–",
                "peers that ran": ", ".join(ran) or "–",
            }
        )
    return pd.DataFrame(out)


def markdown_table(table: pd.DataFrame) -> str:
    if table.empty:
        return "*(nothing)*\n"
    header = "| " + " | ".join(md_escape(c) for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


def render_markdown(frame: pd.DataFrame, meta: Mapping[str, Any], peers: Sequence[Peer]) -> str:
    """The report: provenance, the per-op summary, then per op its table, what did not run and why, notes."""
    ops = list(dict.fromkeys(frame["op"])) if not frame.empty else []
    lines = ["# Oasr against its peers", ""]
    lines += [f"- {md_escape(key)}: {md_escape(value)}" for key, value in meta.items()]
    lines += [
        "",
        "Times are medians in µs of CUDA-graph device time per launch (the harness's timer, backends in turn). "
        "`best / oasr`: the fastest peer that passed the float64 check over oasr (above 1: oasr is faster). "
        "% of ceiling: the op's work model (bytes at the measured copy bandwidth, tensor FLOP at the measured "
        "cuBLAS rate, whichever is longer) over the time. ✗: output differs from the float64 reference; "
        "skip: the time budget ran out; off: needs its flag; –: did not run (why: under each table).",
        "",
        "## Summary",
        "",
        markdown_table(summary(frame, ops)),
    ]
    described = {p.name: p for p in peers}
    for op_name in ops:
        lines += [f"## {md_escape(op_name)}", ""]
        table = shape_table(frame, op_name)
        if not table.empty:
            lines.append(markdown_table(table))
        missing = not_run(frame, op_name)
        if not missing.empty:
            lines += ["Not run, or wrong:", "", markdown_table(missing)]
        notes = [
            f"- {md_escape(name)}: {described[name].impls[op_name].note}"  # the notes are this code's own text
            for name in dict.fromkeys(frame[frame["op"] == op_name]["backend"])
            if name in described and op_name in described[name].impls and described[name].impls[op_name].note
        ]
        if notes:
            lines += ["How the peers compute it:", "", *notes, ""]
    lines += ["## Peers", ""]
    lines += [f"- {md_escape(p.name)}: {p.description}" for p in peers]
    return "\n".join(lines) + "\n"


def write_outputs(
    rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], peers: Sequence[Peer], path: Path
) -> None:
    """The Markdown at ``path`` and the CSV beside it (``.csv``), each written whole through a temporary file."""
    frame = pd.DataFrame(list(rows), columns=list(CSV_COLUMNS))
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, text in ((path, render_markdown(frame, meta, peers)), (path.with_suffix(".csv"), None)):
        temporary = target.with_name(target.name + ".tmp")
        if text is None:
            frame.assign(**{k: str(v) for k, v in meta.items()}).to_csv(temporary, index=False)
        else:
            temporary.write_text(text)
        os.replace(temporary, target)


# ---------------------------------------------------------------------------------------------- the run


def provenance_lines(peers: Peers, extra: Mapping[str, Any]) -> dict[str, Any]:
    info = provenance.collect()
    meta = {
        "machine": f"{info['gpu']} (compute capability {info['compute_capability'] or '-'}, driver {info['driver']})",
        "commit": info["git_commit"],
        "date": info["date"],
        "torch": f"{info['torch_version']} (CUDA {info['cuda_runtime']}), nvcc {info['nvcc']}",
    }
    libraries = dict.fromkeys(p.library for p in peers.peers if p.library.distribution != "torch")
    meta["peer versions"] = ", ".join(f"{lib.distribution} {lib.version()}" for lib in libraries)
    return meta | dict(extra)


def prebuild_oasr(jobs: int) -> str:
    """Every family's default module, ``jobs`` at a time: one line for the report."""
    start = time.perf_counter()
    try:
        failures = jit_core.build_in_parallel([family.jit_spec() for family in FAMILIES], jobs)
    except Exception as error:  # no nvcc, no CUTLASS: each op's oasr row then says why
        return f"not done ({clean_reason(error)})"
    return f"{time.perf_counter() - start:.0f} s, {failures} failed"


def skipped_rows(unit: Unit, peers: Peers, reason: str) -> list[dict[str, Any]]:
    """A unit the budget leaves out: its harness backends and runnable peers ``skipped``, the others their
    static reason."""
    rows = [base_row(unit, b.name, b.kind, "skipped", reason) for b in harness_backends(unit.op)]
    for peer, static in peers.statuses(unit):
        rows.append(base_row(unit, peer.name, "peer", *(static or ("skipped", reason))))
    return rows


def dry_run(units: Sequence[Unit], peers: Peers, absent: Sequence[str]) -> int:
    """Print, per op and dtype, the shapes and backends that would be timed and why each other peer would not:
    nothing touches a GPU."""
    for (name, dtype), group in itertools.groupby(sorted(units, key=_op_order), key=lambda u: (u.op.name, u.dtype)):
        group = list(group)
        runs, skips = list(group[0].op.backends), []
        for peer, static in peers.statuses(group[0]):
            if static is None:
                runs.append(peer.name)
            else:
                skips.append(f"{peer.name} ({static[0]}: {static[1]})")
        shapes = " ".join(u.op.config_label(u.config) for u in group)
        print(f"[DRY RUN] {name} {dtype}, {len(group)} shapes: {', '.join(runs)}")
        print(f"          shapes: {shapes}")
        for skip in skips:
            print(f"          not {skip}")
    for name in absent:
        print(f"[DRY RUN] {name}: not in this checkout's harness; its peers are skipped")
    rounds = len({u.index for u in units})
    print(f"[DRY RUN] {len(units)} shapes x dtypes in {rounds} rounds (every op's first shape, then its second, ...)")
    return 0


def _op_order(unit: Unit) -> tuple[int, str, int]:
    return list(OPS).index(unit.op.name), unit.dtype, unit.index


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="+", metavar="OP", help=f"ops to run (default: all): {', '.join(OPS)}")
    parser.add_argument(
        "--peers", nargs="+", metavar="PEER", help=f"peers (default: all): {', '.join(p.name for p in PEERS)}"
    )
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"], help="default: float16 bfloat16")
    parser.add_argument(
        "--time-budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"finish inside this many seconds, with fewer shapes if need be (default {DEFAULT_BUDGET_S:.0f})",
    )
    parser.add_argument("--max-autotune", action="store_true", help="also Inductor's max-autotune (slow to compile)")
    parser.add_argument("--output", metavar="MD", help="write the tables as Markdown, and a CSV beside it")
    parser.add_argument("--dry-run", action="store_true", help="list what would run and why a peer would not (no GPU)")
    parser.add_argument("--rounds", type=int, default=3, help="backends timed in turn this many times (default 3)")
    parser.add_argument("--num-iters", type=int, default=30, help="timed samples per backend (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed launches before each timing (default 5)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel JIT builds (default: cores)")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = [name for name in args.ops or [] if name not in OPS]
    if unknown:
        parser.error(f"unknown op {', '.join(unknown)}; known: {', '.join(OPS)}")
    known_peers = {p.name for p in PEERS}
    unknown = [name for name in args.peers or [] if name not in known_peers]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)}; known: {', '.join(sorted(known_peers))}")
    try:
        args.dtypes = [dtype_name(parse_dtype(d)) for d in args.dtypes]
    except ValueError as error:
        parser.error(str(error))
    if not args.time_budget > 0 or min(args.rounds, args.num_iters, args.warmup, args.jobs) < 1:
        parser.error("--time-budget must be positive; --rounds, --num-iters, --warmup and --jobs at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    budget = Budget(args.time_budget, prior=PRIOR_UNIT_S + (PRIOR_MAX_AUTOTUNE_S if args.max_autotune else 0.0))
    chosen = [p for p in PEERS if args.peers is None or p.name in args.peers]
    peers = Peers(chosen, enabled_flags={"--max-autotune"} if args.max_autotune else ())
    ops = [OPS[name] for name in args.ops] if args.ops else list(OPS.values())
    units = plan_units(ops, args.dtypes)
    absent = absent_ops(chosen, OPS) if args.ops is None else []
    if args.dry_run:
        return dry_run(units, peers, absent)
    timing.require_cuda("the peers benchmark")
    output = Path(args.output) if args.output else None
    rows: list[dict[str, Any]] = [absent_row(name, p) for name in absent for p in chosen if name in p.impls]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="peers-prepare")
    try:
        with torch.no_grad():
            meta = _measure(args, budget, peers, units, rows, output, pool)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a build still running does not hold the outputs back
    if output:
        write_outputs(rows, meta, chosen, output)
        print(f"wrote {output} and {output.with_suffix('.csv')}")
    print(markdown_table(summary(pd.DataFrame(rows, columns=list(CSV_COLUMNS)), [op.name for op in ops])))
    return 0


def _measure(args, budget: Budget, peers: Peers, units: Sequence[Unit], rows: list, output: Path | None, pool):
    """Prepare (oasr's JIT modules here, the peers' in ``pool``), measure the ceilings, then every unit the
    budget allows, ``rows`` and the outputs growing as they go; returns the report's provenance lines."""
    peers.start_preparing(pool)  # FlashInfer's JIT builds, beside oasr's below
    oasr_build = prebuild_oasr(args.jobs)
    copy_bytes_per_s = timing.measure_copy_bandwidth() * 1e12
    tensor_flop_per_s = timing.measure_cublas_tflops() * 1e12
    meta = provenance_lines(
        peers,
        {
            "ceilings (measured here)": f"copy {copy_bytes_per_s / 1e12:.2f} TB/s, "
            f"cuBLAS BF16 {tensor_flop_per_s / 1e12:.0f} TFLOP/s",
            "timing": f"CUDA graphs, {args.num_iters} samples in {args.rounds} rounds (+1 discarded), "
            f"{args.warmup} warm-up launches",
            "oasr JIT prebuild": oasr_build,
        },
    )
    options = Options(rounds=args.rounds, warmup=args.warmup, iters=args.num_iters)
    done = skipped = 0
    for unit in _rounds(units, peers):
        refused = budget.refuse(unit.op.name)
        if refused:
            skipped += 1
            rows += skipped_rows(unit, peers, refused)
            continue
        start = time.monotonic()
        unit_rows = run_unit(unit, peers, options, (copy_bytes_per_s, tensor_flop_per_s), budget)
        budget.record(unit.op.name, time.monotonic() - start)
        done += 1
        rows += unit_rows
        print(_progress(unit, unit_rows, time.monotonic() - start, budget), flush=True)
        if output:
            write_outputs(rows, meta | _budget_line(budget, done, skipped, peers), peers.peers, output)
    return meta | _budget_line(budget, done, skipped, peers)


def _rounds(units: Sequence[Unit], peers: Peers) -> Iterable[Unit]:
    """The units, each round (shape index) reordered when it starts so that those waiting for a preparation
    come last (:func:`defer_waiting`)."""
    for index in dict.fromkeys(u.index for u in units):
        yield from defer_waiting([u for u in units if u.index == index], peers.waits)


def _budget_line(budget: Budget, done: int, skipped: int, peers: Peers) -> dict[str, str]:
    prepared = ", ".join(
        f"{name}: {'done' if f.done() and f.exception() is None else 'failed' if f.done() else 'running'}"
        for name, f in peers.prepared.items()
    )
    line = f"{budget.seconds:.0f} s, {budget.elapsed():.0f} s used; {done} shapes timed, {skipped} skipped"
    return {"time budget": line, "peer preparation": prepared or "none"}


def _progress(unit: Unit, rows: Sequence[Mapping[str, Any]], seconds: float, budget: Budget) -> str:
    cells = [f"{r['backend']} {_us(r['seconds'])}" if r["status"] in ("ok", "fail") else f"{r['backend']} {r['status']}"
             for r in rows]  # fmt: skip
    return f"[PEERS] {unit.label}: {', '.join(cells)} ({seconds:.1f} s, {budget.left():.0f} s left)"


if __name__ == "__main__":
    timing.run_gpu_script(main, __file__)
