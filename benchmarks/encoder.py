#!/usr/bin/env python3
"""The Conformer encoder end to end (``oasr.models``) against torch on the same module and weights, in bfloat16.

::

    python benchmarks/encoder.py                                   # both configs, the three workloads, the breakdown
    python benchmarks/encoder.py --configs wenet --workloads 64x2.5s --max-autotune
    python benchmarks/encoder.py --no-compile --no-breakdown --output_path encoder.csv

Backends, one random state_dict (``oasr.models.random_state_dict``) in every one:

- ``oasr eager``: ``encoder(feats, lengths)``; ``oasr graph``: the same forward in a CUDA graph;
  ``oasr graphed()``: the runner (``encoder.graphed``: copy into the bucket, replay, copy out);
- ``torch eager`` / ``torch graph``: ``ReferenceConformerEncoder`` (plain torch, ESPnet's math), the baseline;
- ``torch.compile eager`` / ``graph``: the reference through ``torch.compile`` (mode ``default``; with
  ``--max-autotune`` also ``max-autotune-no-cudagraphs``: the harness makes the graph).

"eager" rows time each call with CUDA events, the host's launches included; "graph" rows time graph replays
(``profiling.harness.timing``, the one timing implementation). Every row gives microseconds per encoder call, RTFx
(seconds of audio per second of encoder time, 100 fbank frames a second) and the ratio to torch eager. ``--breakdown``
(on by default) times each op of the first layer alone on that layer's real inputs: the layer is traced into an FX
graph (dynamo, as ``torch.compile`` does) and every node that computes (not a view) is replayed in a CUDA graph.
Without a GPU the script exits with one line saying so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
import torch
from torch.utils._pytree import tree_map

from oasr.models import CONFIGS, ConformerEncoder, ReferenceConformerEncoder, random_state_dict
from oasr.models.reference import output_lengths
from profiling.harness.timing import require_cuda, run_gpu_script, time_fn, time_interleaved
from profiling.provenance import collect

FRAMES_PER_SECOND = 100
"""fbank frames per second of audio (10 ms hop)."""


@dataclass(frozen=True)
class Workload:
    """A batch of utterances, by their fbank frames."""

    name: str
    frames: tuple[int, ...]

    @property
    def audio_seconds(self) -> float:
        return sum(self.frames) / FRAMES_PER_SECOND


WORKLOADS = {
    w.name: w
    for w in (
        Workload("16x8-15s", tuple(round(1500 - 700 * i / 15) for i in range(16))),  # 15 s down to 8 s
        Workload("64x2.5s", (250,) * 64),
        Workload("1x60s", (6000,)),
    )
}
"""The issue's workloads (issue 52)."""
COMPILE_MODES = {"default": "default", "max-autotune": "max-autotune-no-cudagraphs"}
"""torch.compile modes by row label (max-autotune without its own CUDA graphs: the harness captures the graph)."""
COLUMNS = (
    "config", "workload", "backend", "method", "batch", "frames", "audio_seconds", "seconds", "p10_seconds",
    "p90_seconds", "iqr_rel", "rtfx", "speedup_vs_torch_eager",
)  # fmt: skip
"""The CSV's columns (base units), then the provenance's."""


def inputs(workload: Workload, config_input_dim: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ``[B, T, F]`` bfloat16 features on the GPU and their int64 lengths."""
    generator = torch.Generator().manual_seed(seed)
    feats = torch.randn(len(workload.frames), max(workload.frames), config_input_dim, generator=generator)
    return feats.to("cuda", torch.bfloat16), torch.tensor(workload.frames, device="cuda")


def build(name: str) -> tuple[ConformerEncoder, ReferenceConformerEncoder]:
    config = CONFIGS[name]
    state = random_state_dict(config)
    encoder, reference = ConformerEncoder(config), ReferenceConformerEncoder(config)
    encoder.load_state_dict(state)
    reference.load_state_dict(state)
    return encoder.to("cuda", torch.bfloat16), reference.to("cuda", torch.bfloat16)


def backends(
    encoder: ConformerEncoder,
    reference: ReferenceConformerEncoder,
    feats: torch.Tensor,
    lengths: torch.Tensor,
    compile_modes: Sequence[str],
) -> tuple[dict[str, Callable[[], object]], dict[str, Callable[[], object]]]:
    """(timed with events, timed as graph replays): the zero-argument calls of each backend."""
    runner = encoder.graphed(feats.shape[0], buckets=(feats.shape[1],))
    eager = {
        "oasr eager": lambda: encoder(feats, lengths),
        "oasr graphed()": lambda: runner(feats, lengths),
        "torch eager": lambda: reference(feats, lengths),
    }
    graph = {"oasr graph": eager["oasr eager"], "torch graph": eager["torch eager"]}
    for label in compile_modes:
        compiled = torch.compile(reference, mode=COMPILE_MODES[label], dynamic=False)  # (static shapes, per workload)
        eager[f"torch.compile {label} eager"] = graph[f"torch.compile {label} graph"] = lambda compiled=compiled: (
            compiled(feats, lengths)
        )
    return eager, graph


def time_workload(
    name: str, workload: Workload, models: tuple[ConformerEncoder, ReferenceConformerEncoder], args: argparse.Namespace
) -> list[dict[str, Any]]:
    encoder, reference = models
    feats, lengths = inputs(workload, encoder.config.input_dim)
    modes = [] if args.no_compile else ["default", *(["max-autotune"] if args.max_autotune else [])]
    with torch.no_grad():
        eager, graph = backends(encoder, reference, feats, lengths, modes)
        results = {**time_interleaved(eager, method="events", iters=args.iters)}
        results |= time_interleaved(graph, method="graph", iters=args.iters)
    base = results["torch eager"].median_ms
    rows = []
    for backend, result in results.items():
        seconds = result.median_ms * 1e-3
        rows.append(
            {
                "config": name,
                "workload": workload.name,
                "backend": backend,
                "method": result.method,
                "batch": feats.shape[0],
                "frames": feats.shape[1],
                "audio_seconds": workload.audio_seconds,
                "seconds": seconds,
                "p10_seconds": result.p10_ms * 1e-3,
                "p90_seconds": result.p90_ms * 1e-3,
                "iqr_rel": result.iqr_rel,
                "rtfx": workload.audio_seconds / seconds,
                "speedup_vs_torch_eager": base / result.median_ms,
            }
        )
    return rows


# ---------------------------------------------------------------------------
# Per-op breakdown of one layer
# ---------------------------------------------------------------------------


def _op_name(target: object) -> str:
    if isinstance(target, str):  # a tensor method
        return target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name.removeprefix("oasr::")
    return getattr(target, "__name__", str(target))


def _describe(args: Sequence[object]) -> str:
    """The shapes of the tensor arguments and the short scalar ones (an activation), in order."""
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append("x".join(map(str, a.shape)) or "scalar")
        elif isinstance(a, str):
            parts.append(a)
    return " ".join(parts)


def _new_storage(result: object, args: Sequence[object]) -> bool:
    """Whether ``result`` is a tensor in memory no argument holds (the node computed it; a view shares it)."""
    if not isinstance(result, torch.Tensor):
        return False
    pointers = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
    return result.untyped_storage().data_ptr() not in pointers


class _OpTimer(torch.fx.Interpreter):
    """Runs a traced layer node by node; times each oasr op and each node that writes new memory, on copies of its
    arguments (in-place writes then leave the run's own tensors as they were)."""

    def __init__(self, module: torch.fx.GraphModule, time_op: Callable[[Callable[[], object]], float]) -> None:
        super().__init__(module)
        self.time_op = time_op
        self.rows: list[dict[str, Any]] = []

    def _timed(self, target: object, call: Callable[..., object], args: tuple, kwargs: dict) -> object:
        result = call(*args, **kwargs)
        is_oasr = isinstance(target, torch._ops.OpOverload) and target.namespace == "oasr"
        if is_oasr or _new_storage(result, args):
            copies = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))
            seconds = self.time_op(lambda: call(*copies[0], **copies[1]))
            self.rows.append({"op": _op_name(target), "arguments": _describe(args), "seconds": seconds})
        return result

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> object:
        return self._timed(target, target, args, kwargs)

    def call_method(self, target: Any, args: tuple, kwargs: dict) -> object:
        return self._timed(target, lambda self_, *a, **k: getattr(self_, target)(*a, **k), args, kwargs)


def graph_seconds(fn: Callable[[], object]) -> float:
    """Device time of ``fn`` replayed in a CUDA graph (the harness's graph method), in seconds."""
    return time_fn(fn, method="graph", warmup=3, iters=20).median_ms * 1e-3


def layer_breakdown(
    encoder: ConformerEncoder,
    feats: torch.Tensor,
    lengths: torch.Tensor,
    time_op: Callable[[Callable[[], object]], float] = graph_seconds,
) -> tuple[pd.DataFrame, float]:
    """Each computing op of the first layer on its real inputs (``op``, ``arguments``, ``seconds``, ``share``), and
    the whole layer's time.

    The layer (``encoder.encoders[0]``) is traced by dynamo into one FX graph, which runs node by node; each oasr
    op, and each node that writes new memory, is timed alone by ``time_op`` on copies of its arguments.
    """
    captured: list[tuple[torch.fx.GraphModule, list[object]]] = []

    def recording_backend(gm: torch.fx.GraphModule, example_inputs: list[object]):
        captured.append((gm, list(example_inputs)))
        return gm.forward

    layer = encoder.encoders[0]
    with torch.no_grad():
        x, pos_emb = encoder.embed(feats.to(encoder.dtype))
        context = encoder.context(x.shape[1], pos_emb, output_lengths(lengths.to(torch.int64)))
        torch._dynamo.reset()
        torch.compile(layer, backend=recording_backend, fullgraph=True)(x, context)
        gm, example_inputs = captured[0]
        timer = _OpTimer(gm, time_op)
        timer.run(*example_inputs)
        layer_seconds = time_op(lambda: layer(x, context))
    table = pd.DataFrame(timer.rows, columns=["op", "arguments", "seconds"])
    table["share"] = table["seconds"] / table["seconds"].sum()
    return table, layer_seconds


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoder.py", description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--max-autotune", action="store_true", help="also torch.compile max-autotune (slow to build)")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--no-breakdown", action="store_true", help="leave the per-op breakdown out")
    parser.add_argument("--iters", type=int, default=30, help="samples per backend (default 30)")
    parser.add_argument("--output_path", type=Path, help="write the rows as CSV (base units, with provenance)")
    return parser


def print_rows(rows: Sequence[dict[str, Any]]) -> None:
    """One workload's rows, then the oasr encoder's host overhead (its eager time above its graph replay)."""
    print(f"{'config':<12} {'workload':<9} {'backend':<34} {'us':>10} {'RTFx':>8} {'x torch eager':>14}")
    for row in rows:
        us, rtfx, speedup = 1e6 * row["seconds"], row["rtfx"], row["speedup_vs_torch_eager"]
        print(f"{row['config']:<12} {row['workload']:<9} {row['backend']:<34} {us:10.1f} {rtfx:8.0f} {speedup:14.2f}")
    seconds = {row["backend"]: row["seconds"] for row in rows}
    print(f"oasr host overhead (eager - graph): {1e6 * (seconds['oasr eager'] - seconds['oasr graph']):.1f} us")


def print_breakdown(name: str, workload: Workload, table: pd.DataFrame, layer_seconds: float) -> None:
    print(f"\none layer of {name}, {workload.name} (batch {len(workload.frames)}, {max(workload.frames)} frames):")
    for row in table.itertuples():
        print(f"  {row.op:<22} {row.arguments:<44} {1e6 * row.seconds:9.1f} us {100 * row.share:5.1f}%")
    total = table["seconds"].sum()
    print(f"  {'sum of the ops':<67} {1e6 * total:9.1f} us; the layer in one graph: {1e6 * layer_seconds:.1f} us")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_cuda("benchmarks/encoder.py")
    provenance = collect()
    print(f"{provenance['gpu']}, torch {provenance['torch_version']}, commit {provenance['git_commit']}")
    rows: list[dict[str, Any]] = []
    for name in args.configs:
        models = build(name)
        for workload_name in args.workloads:
            workload = WORKLOADS[workload_name]
            rows += time_workload(name, workload, models, args)
            print_rows([r for r in rows if r["config"] == name and r["workload"] == workload_name])
            if not args.no_breakdown:
                table, layer_seconds = layer_breakdown(models[0], *inputs(workload, models[0].config.input_dim))
                print_breakdown(name, workload, table, layer_seconds)
        del models
        torch.cuda.empty_cache()
    if args.output_path:
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
        for key, value in provenance.items():
            frame[key] = value
        frame.to_csv(args.output_path, index=False)
        print(f"wrote {args.output_path}")
    return 0


if __name__ == "__main__":
    run_gpu_script(main, __file__)
