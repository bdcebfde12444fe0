"""The Conformer encoder (``oasr.models``) measured and checked as a whole: workloads, timing against torch, the per-op
breakdown of a layer and the layer-by-layer errors against the float64 reference.

``benchmarks/encoder.py`` (the command line, which records the results) and the workbench's model page
(:mod:`profiling.workbench.model`, live) both run these functions, so the two measure the same way.

Backends, one random state_dict (``oasr.models.random_state_dict``) in every one:

- ``oasr eager``: ``encoder(feats, lengths)``; ``oasr graph``: the same forward in a CUDA graph;
  ``oasr graphed()``: the runner (``encoder.graphed``: copy into the bucket, replay, copy out);
- ``torch eager`` / ``torch graph``: ``ReferenceConformerEncoder`` (plain torch, ESPnet's math), the baseline;
- ``torch.compile <mode> eager`` / ``graph``: the reference through ``torch.compile`` (mode ``default``; optionally
  ``max-autotune-no-cudagraphs``: the harness makes the graph).

"eager" rows time each call with CUDA events, the host's launches included; "graph" rows time graph replays
(:mod:`profiling.harness.timing`, the one timing implementation). Every row gives seconds per encoder call, RTFx
(seconds of audio per second of encoder time, 100 fbank frames a second) and its speedups over torch eager, torch in a
CUDA graph and ``torch.compile`` (default mode, timed the row's way: events or graph).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch.utils._pytree import tree_map

from oasr.models import CONFIGS, ConformerEncoder, ReferenceConformerEncoder, random_state_dict
from oasr.models.reference import attention_mask, key_mask, output_lengths

from .timing import time_fn, time_interleaved

FRAMES_PER_SECOND = 100
"""fbank frames per second of audio (10 ms hop)."""
RECORDINGS = "encoder"
"""The folder of the recorded tables, ``reports/<gpu>/encoder/``: ``<config>.speed.csv`` and
``<config>.breakdown.csv``, each with its provenance sidecar (``.json``)."""
SPEED, BREAKDOWN = "speed", "breakdown"
"""The two recorded tables of a configuration."""


@dataclass(frozen=True)
class Workload:
    """A batch of utterances, by their fbank frames."""

    name: str
    frames: tuple[int, ...]

    @property
    def audio_seconds(self) -> float:
        return sum(self.frames) / FRAMES_PER_SECOND

    @classmethod
    def uniform(cls, batch: int, seconds: float) -> Workload:
        """``batch`` utterances of ``seconds`` each (``"16x2.5s"``).

        Raises
        ------
        ValueError
            ``batch`` below 1, or ``seconds`` shorter than one output frame (7 input frames).
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"Workload.uniform: `batch` must be an int >= 1, got {batch!r}")
        frames = round(seconds * FRAMES_PER_SECOND) if isinstance(seconds, (int, float)) else 0
        if frames < 7:
            raise ValueError(f"Workload.uniform: `seconds` must be at least 0.07 (7 fbank frames), got {seconds!r}")
        return cls(f"{batch}x{seconds:g}s", (frames,) * batch)


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
SPEED_COLUMNS = (
    "config", "workload", "backend", "method", "batch", "frames", "audio_seconds", "seconds", "p10_seconds",
    "p90_seconds", "iqr_rel", "rtfx", "speedup_vs_torch_eager", "speedup_vs_torch_graph", "speedup_vs_torch_compile",
)  # fmt: skip
"""The speed table's columns, in base units."""
BREAKDOWN_COLUMNS = ("config", "workload", "op", "arguments", "seconds", "share", "layer_seconds")
"""The per-op breakdown's columns: one row per computing op of the first layer; ``layer_seconds`` is the whole layer
in one graph."""


def inputs(workload: Workload, input_dim: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ``[B, T, F]`` bfloat16 features on the GPU and their int64 lengths."""
    generator = torch.Generator().manual_seed(seed)
    feats = torch.randn(len(workload.frames), max(workload.frames), input_dim, generator=generator)
    return feats.to("cuda", torch.bfloat16), torch.tensor(workload.frames, device="cuda")


def build(name: str) -> tuple[ConformerEncoder, ReferenceConformerEncoder]:
    """The oasr encoder of the named configuration and its torch reference, one random state_dict, bfloat16 on the
    GPU."""
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
    name: str,
    workload: Workload,
    models: tuple[ConformerEncoder, ReferenceConformerEncoder],
    compile_modes: Sequence[str] = ("default",),
    iters: int = 30,
) -> list[dict[str, Any]]:
    """Every backend on ``workload``: one row per backend (:data:`SPEED_COLUMNS`).

    Parameters
    ----------
    name : str
        The configuration's name (the rows' ``config``).
    workload : Workload
        The batch.
    models : (ConformerEncoder, ReferenceConformerEncoder)
        As :func:`build` returns them.
    compile_modes : sequence of str
        Labels of :data:`COMPILE_MODES` to time through ``torch.compile`` (empty: none).
    iters : int
        Samples per backend.
    """
    unknown = [mode for mode in compile_modes if mode not in COMPILE_MODES]
    if unknown:
        raise ValueError(f"time_workload: `compile_modes` {unknown} unknown; the modes are {list(COMPILE_MODES)}")
    encoder, reference = models
    feats, lengths = inputs(workload, encoder.config.input_dim)
    with torch.no_grad():
        eager, graph = backends(encoder, reference, feats, lengths, compile_modes)
        results = {**time_interleaved(eager, method="events", iters=iters)}
        results |= time_interleaved(graph, method="graph", iters=iters)
    seconds = {backend: result.median_ms * 1e-3 for backend, result in results.items()}
    compiled = {
        "events": seconds.get("torch.compile default eager"),
        "graph": seconds.get("torch.compile default graph"),
    }
    return [
        {
            "config": name,
            "workload": workload.name,
            "backend": backend,
            "method": result.method,
            "batch": feats.shape[0],
            "frames": feats.shape[1],
            "audio_seconds": workload.audio_seconds,
            "seconds": seconds[backend],
            "p10_seconds": result.p10_ms * 1e-3,
            "p90_seconds": result.p90_ms * 1e-3,
            "iqr_rel": result.iqr_rel,
            "rtfx": workload.audio_seconds / seconds[backend],
            "speedup_vs_torch_eager": seconds["torch eager"] / seconds[backend],
            "speedup_vs_torch_graph": seconds["torch graph"] / seconds[backend],
            # against torch.compile timed the same way (both eager, or both in a graph); NaN without it
            "speedup_vs_torch_compile": (compiled[result.method] or math.nan) / seconds[backend],
        }
        for backend, result in results.items()
    ]


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


def breakdown(name: str, workload: Workload, encoder: ConformerEncoder) -> pd.DataFrame:
    """:func:`layer_breakdown` of ``encoder`` on ``workload``'s inputs, as rows of :data:`BREAKDOWN_COLUMNS`."""
    table, layer_seconds = layer_breakdown(encoder, *inputs(workload, encoder.config.input_dim))
    table = table.assign(config=name, workload=workload.name, layer_seconds=layer_seconds)
    return table[list(BREAKDOWN_COLUMNS)]


# ---------------------------------------------------------------------------
# Correctness, layer by layer
# ---------------------------------------------------------------------------


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.double() - expected).norm() / expected.norm()).item()


def layer_errors(
    encoder: ConformerEncoder,
    reference: ReferenceConformerEncoder,
    feats: torch.Tensor,
    lengths: torch.Tensor,
    torch_reference: ReferenceConformerEncoder | None = None,
) -> pd.DataFrame:
    """The oasr encoder against the float64 ``reference``, stage by stage: the front end, then each layer on the same
    input (the reference's previous output, rounded to the encoder's dtype), then the whole encoder.

    Each row: ``stage``, ``max_abs_err`` and ``rel_err`` (Frobenius, over the valid frames) of oasr, and, with
    ``torch_reference`` (the same module in the encoder's dtype), ``torch_rel_err``: torch's own rounding, the scale
    oasr's error is judged against.
    """
    dtype = encoder.dtype
    out_lengths = output_lengths(lengths.to(torch.int64))
    rows = []

    def row(stage: str, actual: torch.Tensor, expected: torch.Tensor, own: torch.Tensor | None) -> None:
        valid = key_mask(out_lengths, expected.shape[1])
        actual, expected = actual[valid], expected[valid]
        rows.append(
            {
                "stage": stage,
                "max_abs_err": (actual.double() - expected).abs().max().item(),
                "rel_err": _relative_error(actual, expected),
                "torch_rel_err": math.nan if own is None else _relative_error(own[valid], expected),
            }
        )

    with torch.no_grad():
        x, pos_emb = reference.embed(feats.double())
        own = torch_reference.embed(feats.to(dtype))[0] if torch_reference is not None else None
        row("front end", encoder.embed(feats.to(dtype))[0], x, own)
        frames = x.shape[1]
        mask = attention_mask(out_lengths, frames, None, None, x.device)
        valid = key_mask(out_lengths, frames)
        context = encoder.context(frames, pos_emb.to(dtype), out_lengths)
        own_pos = pos_emb.to(dtype)
        for index, (layer, reference_layer) in enumerate(zip(encoder.encoders, reference.encoders, strict=True)):
            stored = x.to(dtype)
            x = reference_layer(stored.double(), pos_emb, mask, valid)
            own = None if torch_reference is None else torch_reference.encoders[index](stored, own_pos, mask, valid)
            row(f"layer {index}", layer(stored, context), x, own)
        expected, _ = reference(feats.double(), lengths)
        own = None if torch_reference is None else torch_reference(feats.to(dtype), lengths)[0]
        row("encoder", encoder(feats, lengths)[0], expected, own)
    return pd.DataFrame(rows)


def reference_stages(reference: ReferenceConformerEncoder, feats: torch.Tensor, lengths: torch.Tensor) -> pd.DataFrame:
    """What the reference computes, stage by stage, in its own dtype and on its own device: per stage the output's
    shape and its RMS over the valid frames (no comparison: a look at the module on a machine that cannot run
    oasr's kernels)."""
    out_lengths = output_lengths(lengths.to(torch.int64))
    dtype = reference.after_norm.weight.dtype
    rows = []
    with torch.no_grad():
        x, pos_emb = reference.embed(feats.to(dtype))
        frames = x.shape[1]
        mask = attention_mask(out_lengths, frames, None, None, x.device)
        valid = key_mask(out_lengths, frames)
        stages = [("front end", x)]
        for index, layer in enumerate(reference.encoders):
            x = layer(x, pos_emb, mask, valid)
            stages.append((f"layer {index}", x))
        stages.append(("after_norm", reference.after_norm(x)))
        for stage, out in stages:
            rows.append(
                {"stage": stage, "shape": "x".join(map(str, out.shape)), "rms": out[valid].pow(2).mean().sqrt().item()}
            )
    return pd.DataFrame(rows)
