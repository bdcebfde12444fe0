"""benchmarks/encoder.py and the harness it runs (profiling/harness/encoder.py): the workloads, the per-op breakdown
of a layer (on CPU through the torch stand-ins, with a stand-in timer), the recorded tables and the no-GPU exit. The
timings themselves need the GPU (the script's own run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_models import SMALL, features, pair, stand_ins  # noqa: F401  (stand_ins: a fixture)

from benchmarks import encoder as bench
from profiling.harness import encoder as harness

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
