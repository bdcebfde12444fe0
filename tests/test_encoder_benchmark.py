"""benchmarks/encoder.py and the harness it runs (profiling/harness/encoder.py): the workloads, the per-op breakdown
of a layer (on CPU through the torch stand-ins, with a stand-in timer), the recorded tables and the no-GPU exit. The
timings themselves need the GPU (the script's own run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_models import ENCODER_RTOL, SMALL, features, loaded, pair, stand_ins  # noqa: F401  (stand_ins: a fixture)

from benchmarks import encoder as bench
from oasr.models import ConformerEncoder, ReferenceConformerEncoder
from profiling.harness import encoder as harness
from profiling.harness.timing import TimingResult

SCRIPT = Path(bench.__file__)


def test_workloads_are_the_issues():
    long, short, single = (harness.WORKLOADS[n] for n in ("16x8-15s", "64x2.5s", "1x60s"))
    assert len(long.frames) == 16 and max(long.frames) == 1500 and min(long.frames) == 800
    assert len(set(long.frames)) == 16  # spread
    assert short.frames == (250,) * 64 and short.audio_seconds == 160.0
    assert single.frames == (6000,) and single.audio_seconds == 60.0


def test_layer_breakdown_lists_every_op_of_a_layer(stand_ins):  # noqa: F811
    encoder, _ = pair(SMALL.replace(layers=1), torch.bfloat16)
    timed: list[object] = []

    def fake_time(fn):  # runs the op once (it must run on its copies) and calls it 1 us
        fn()
        timed.append(fn)
        return 1e-6

    table, layer_seconds = harness.layer_breakdown(encoder, features(2, 61), torch.tensor([61, 30]), fake_time)
    ops = list(table["op"])
    assert ops.count("gemm") == 8 and ops.count("add_layer_norm") == 4
    assert {"layer_norm", "gemm_glu", "depthwise_conv1d"} <= set(ops)
    assert "view" not in ops and "getitem" not in ops  # views compute nothing
    assert abs(table["share"].sum() - 1) < 1e-9 and layer_seconds == 1e-6
    assert len(timed) == len(table) + 1
    silu = table[(table["op"] == "gemm") & table["arguments"].str.contains("silu")]
    assert len(silu) == 2 and silu["arguments"].iloc[0].startswith("2x14x128 256x128 256")


def test_without_a_gpu_the_script_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, str(SCRIPT), "--configs", "wenet"], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "encoder.py: no CUDA GPU: benchmarks/encoder.py needs an NVIDIA GPU, and torch.cuda.is_available() is False."
    )


def test_layer_errors_compare_every_stage_with_the_float64_reference(stand_ins):  # noqa: F811
    """The live correctness cell's function, on CPU through the stand-ins: one row per stage, oasr's error of the
    order of torch's own in the same dtype."""
    encoder, reference = pair(SMALL, torch.bfloat16)
    own = loaded(ReferenceConformerEncoder, SMALL, torch.bfloat16)
    errors = harness.layer_errors(encoder, reference, features(3, 61), torch.tensor([61, 40, 7]), own)
    assert list(errors["stage"]) == ["front end", "layer 0", "layer 1", "encoder"]
    assert (errors["rel_err"] < ENCODER_RTOL[torch.bfloat16]).all() and (errors["torch_rel_err"] > 0).all()
    encoder_row = errors.iloc[-1]
    assert encoder_row["rel_err"] <= 1.25 * encoder_row["torch_rel_err"]


def test_reference_stages_show_what_the_reference_computes():
    _, reference = pair(SMALL, torch.bfloat16)
    stages = harness.reference_stages(reference, features(1, 61), torch.tensor([61]))
    assert list(stages["stage"]) == ["front end", "layer 0", "layer 1", "after_norm"]
    assert set(stages["shape"]) == {"1x14x128"} and (stages["rms"] > 0).all()


def test_each_speed_row_divides_its_baselines_timed_the_same_way(monkeypatch):
    """time_workload's arithmetic, with the GPU's parts faked: the speedup over torch.compile compares a graph row
    with torch.compile in a graph, an eager row with it eager."""
    made_up_ms = {"oasr eager": 4.0, "oasr graphed()": 2.5, "torch eager": 8.0, "torch.compile default eager": 6.0,
                  "oasr graph": 2.0, "torch graph": 5.0, "torch.compile default graph": 3.0}  # fmt: skip

    def fake_interleaved(fns, method, iters):
        return {name: TimingResult((made_up_ms[name],), method, 1, 1) for name in fns}

    def fake_backends(encoder, reference, feats, lengths, modes):
        eager = {n: None for n in made_up_ms if n.endswith(("eager", "()"))}
        return eager, {n: None for n in made_up_ms if n not in eager}

    monkeypatch.setattr(harness, "inputs", lambda workload, dim: (torch.zeros(64, 250, dim), None))
    monkeypatch.setattr(harness, "backends", fake_backends)
    monkeypatch.setattr(harness, "time_interleaved", fake_interleaved)
    models = (ConformerEncoder(SMALL), None)
    rows = {r["backend"]: r for r in harness.time_workload("small", harness.WORKLOADS["64x2.5s"], models)}
    assert all(list(row) == list(harness.SPEED_COLUMNS) for row in rows.values())
    graph, eager = rows["oasr graph"], rows["oasr eager"]
    assert graph["seconds"] == 2e-3 and graph["rtfx"] == pytest.approx(160 / 2e-3)
    assert (graph["speedup_vs_torch_eager"], graph["speedup_vs_torch_graph"]) == (4.0, 2.5)
    assert graph["speedup_vs_torch_compile"] == 1.5 and eager["speedup_vs_torch_compile"] == 1.5
    assert (graph["batch"], graph["frames"], graph["method"]) == (64, 250, "graph")
