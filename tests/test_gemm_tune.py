"""The gemm autotuner (``OASR_AUTOTUNE=1``, ``oasr/jit/gemm_tune.py``), on CPU with an injected fake timer.

Its shape buckets (no cliff between neighbouring sizes); its store: one JSON file per GPU in the JIT cache folder,
a damaged or stale entry ignored and rewritten, two processes tuning at once both finishing with one entry, another
GPU getting entries of its own; the ops' wiring (the candidates it times run each backend; off, on CPU or without a
timer, the rule).
"""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest
import torch

from oasr import _backends
from oasr.jit import gemm_config, gemm_plan, gemm_tune
from profiling.harness import timing

PLAN = gemm_plan.rule(gemm_plan.Problem("gemm", 6000, 768, 3072, bias=True, activation="silu"))
KEY = "gemm/bfloat16/bias+silu/m8192_n768_k3072"
GPU = "NVIDIA H200"


class FakeTimer:
    """Times nothing: each candidate's seconds from ``seconds`` (others 9 us), the calls counted."""

    def __init__(self, oasr: float = 2e-6, cublas: float = 1e-6, sleep: float = 0.0, **others: float) -> None:
        self.seconds = {"oasr": oasr, "cublas": cublas, **others}
        self.sleep = sleep
        self.calls = 0

    def __call__(self, candidates):
        self.calls += 1
        time.sleep(self.sleep)
        return {name: self.seconds.get(name, 9e-6) for name in candidates}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A JIT cache folder of the test's own, the tuner on, no entry remembered."""
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path))
    monkeypatch.setenv("OASR_AUTOTUNE", "1")
    gemm_tune.forget()
    yield tmp_path
    gemm_tune.forget()


def candidates(plan=PLAN):
    """A callable per candidate of ``plan`` (the tuner is given these; the fake timer runs none)."""
    return {name: lambda: None for name in gemm_plan.candidates(plan)}


def test_buckets_cover_the_ranges_without_cliffs():
    assert [gemm_tune.bucket_m(m) for m in (0, 1, 16, 500, 1500, 6000, 32000, 65536, 10**6)] == [
        1, 1, 16, 512, 2048, 8192, 32768, 65536, 65536,
    ]  # fmt: skip
    assert gemm_tune.bucket_nk(700) == 640 and gemm_tune.bucket_nk(3000) == 3072 and gemm_tune.bucket_nk(100) == 256
    assert {gemm_tune.bucket_nk(b) for b in gemm_tune.NK_BUCKETS} == set(gemm_tune.NK_BUCKETS)
    steps = list(gemm_tune.NK_BUCKETS)
    previous = gemm_tune.bucket_nk(1)
    for size in range(2, 6000):  # monotone, one bucket at a time: an odd size sits with its neighbours
        bucket = gemm_tune.bucket_nk(size)
        assert steps.index(bucket) - steps.index(previous) in (0, 1), size
        previous = bucket
    assert gemm_tune.bucket_key(PLAN, "bfloat16") == KEY
    bmm = gemm_plan.rule(gemm_plan.Problem("bmm", 375, 64, 375, 64))
    assert gemm_tune.bucket_key(bmm, "float16") == "bmm/float16/plain/m512_n256_k384_b64"


def test_a_bucket_is_timed_once_and_recorded(cache):
    timer = FakeTimer(oasr=1e-6, cublas=3e-6)
    plan = gemm_tune.tuned(PLAN, "bfloat16", GPU, candidates(), timer)
    assert (plan.backend, plan.band, timer.calls) == ("oasr", "autotune", 1)
    assert "1.00 us" in plan.why and "cuBLAS 3.00 us" in plan.why and KEY in plan.why
    # the same bucket again, then in a fresh process (the memo forgotten): read, not timed
    neighbour = gemm_plan.rule(gemm_plan.Problem("gemm", 7000, 770, 3000, bias=True, activation="silu"))
    assert gemm_tune.tuned(neighbour, "bfloat16", GPU, candidates(), timer).backend == "oasr"
    gemm_tune.forget()
    assert gemm_tune.tuned(PLAN, "bfloat16", GPU, candidates(), timer).backend == "oasr" and timer.calls == 1
    data = json.loads((cache / "gemm_tune" / "NVIDIA_H200.json").read_text())
    assert list(data) == [KEY] and data[KEY]["gpu"] == GPU and data[KEY]["source"] == gemm_tune.source_hash()
    # another dtype, another epilogue: buckets of their own
    gemm_tune.tuned(PLAN, "float16", GPU, candidates(), timer)
    bare = gemm_plan.rule(gemm_plan.Problem("gemm", 6000, 768, 3072))
    gemm_tune.tuned(bare, "bfloat16", GPU, candidates(bare), timer)
    assert timer.calls == 3 and len(json.loads((cache / "gemm_tune" / "NVIDIA_H200.json").read_text())) == 3


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        json.dumps([1, 2]),
        json.dumps({KEY: {"choice": "magic", "seconds": {}}}),
        json.dumps({KEY: {"choice": "oasr", "seconds": {"oasr": 1, "cublas": 2}, "gpu": GPU, "source": "old"}}),
        json.dumps({KEY: {"choice": "oasr", "seconds": {"oasr": "fast"}, "gpu": GPU, "source": "?"}}),
    ],
    ids=["not json", "not a table", "unknown backend", "stale source", "bad seconds"],
)
def test_a_damaged_or_stale_entry_is_ignored_and_rewritten(cache, damage):
    path = cache / "gemm_tune" / "NVIDIA_H200.json"
    path.parent.mkdir(parents=True)
    path.write_text(damage)
    timer = FakeTimer()
    assert gemm_tune.tuned(PLAN, "bfloat16", GPU, candidates(), timer).backend == "cublas" and timer.calls == 1
    entry = json.loads(path.read_text())[KEY]
    assert entry["choice"] == "cublas" and entry["source"] == gemm_tune.source_hash()
    gemm_tune.forget()
    assert gemm_tune.cached(PLAN, "bfloat16", GPU).backend == "cublas"


def test_a_bare_long_k_product_also_times_the_long_k_configurations():
    bare = gemm_plan.rule(gemm_plan.Problem("gemm", 6000, 768, 3072))
    named = gemm_plan.candidates(bare)
    long_k = f"oasr:{gemm_config.LONG_K_PINGPONG.name}"
    assert set(named) == {"cublas", "oasr", long_k, f"oasr:{gemm_config.LONG_K_COOPERATIVE.name}"}
    assert set(gemm_plan.candidates(PLAN)) == {"cublas", "oasr"}  # fused: the rule's configuration and cuBLAS
    assert gemm_tune.bucket_key(bare, "bfloat16") == "gemm/bfloat16/plain/m8192_n768_k3072_long-k"
    below = gemm_plan.rule(gemm_plan.Problem("gemm", 6000, 768, 1900))  # K bucket 2048, no long-K candidates
    assert gemm_tune.bucket_key(below, "bfloat16") == "gemm/bfloat16/plain/m8192_n768_k2048"
    plan = gemm_tune.tuned(bare, "bfloat16", GPU, candidates(bare), FakeTimer(oasr=5e-6, cublas=4e-6, **{long_k: 3e-6}))
    assert (plan.backend, plan.config, plan.band) == ("oasr", gemm_config.LONG_K_PINGPONG, "autotune")
    assert "128x128x128_c1x1_pingpong_s0 3.00 us" in plan.why and "cuBLAS 4.00 us" in plan.why
    gemm_tune.forget()
    assert gemm_tune.cached(bare, "bfloat16", GPU).config == gemm_config.LONG_K_PINGPONG


def test_another_gpu_gets_its_own_entries(cache):
    h200, h100 = FakeTimer(oasr=1e-6, cublas=2e-6), FakeTimer(oasr=2e-6, cublas=1e-6)
    assert gemm_tune.tuned(PLAN, "bfloat16", GPU, candidates(), h200).backend == "oasr"
    assert gemm_tune.cached(PLAN, "bfloat16", "NVIDIA H100 80GB HBM3") is None
    assert gemm_tune.tuned(PLAN, "bfloat16", "NVIDIA H100 80GB HBM3", candidates(), h100).backend == "cublas"
    assert h200.calls == h100.calls == 1
    assert sorted(p.name for p in (cache / "gemm_tune").glob("*.json")) == [
        "NVIDIA_H100_80GB_HBM3.json",
        "NVIDIA_H200.json",
    ]
    gemm_tune.forget()
    assert gemm_tune.cached(PLAN, "bfloat16", GPU).backend == "oasr"


def _tune_in_a_process(oasr_seconds: float, start: multiprocessing.Barrier, results: multiprocessing.Queue) -> None:
    gemm_tune.forget()
    start.wait()  # both processes time at once
    plan = gemm_tune.tuned(PLAN, "bfloat16", GPU, candidates(), FakeTimer(oasr=oasr_seconds, sleep=0.3))
    results.put(plan.backend)


def test_two_processes_tuning_at_once_both_finish_with_one_entry(cache):
    context = multiprocessing.get_context("fork")  # (the children inherit the cache folder and the test's module)
    start, results = context.Barrier(2), context.Queue()
    # one process finds oasr faster, the other cuBLAS: whichever stores first, both end on its entry
    workers = [context.Process(target=_tune_in_a_process, args=(s, start, results)) for s in (0.5e-6, 2e-6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    backends = [results.get(timeout=5) for _ in workers]
    data = json.loads((cache / "gemm_tune" / "NVIDIA_H200.json").read_text())
    assert list(data) == [KEY] and backends == [data[KEY]["choice"]] * 2
    assert not list((cache / "gemm_tune").glob("*.tmp"))


def test_the_ops_tune_on_a_gpu_and_take_the_rule_otherwise(monkeypatch):
    """planned(): on a (stand-in) GPU the timer runs each backend through the op's own `run`; on CPU, switched off,
    while capturing a graph or without a timer, the rule's plan."""
    problem, ran = PLAN.problem, []

    def run(backend, config):
        ran.append((backend, config))

    def fake_timing(candidates):
        for backend in sorted(candidates):
            candidates[backend]()
        return {"oasr": 3e-6, "cublas": 1e-6}

    monkeypatch.setattr(_backends, "gpu_name", lambda device: "Stand-in GPU")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(gemm_tune, "TIMER", None)
    with pytest.warns(RuntimeWarning, match="no timer is registered"):
        assert _backends.planned(problem, torch.bfloat16, cuda, run) == PLAN
    monkeypatch.setattr(gemm_tune, "TIMER", fake_timing)
    plan = _backends.planned(problem, torch.bfloat16, cuda, run)
    assert (
        plan.backend == "cublas" and plan.band == "autotune" and ran == [("cublas", PLAN.config), ("oasr", PLAN.config)]
    )
    assert _backends.planned(problem, torch.bfloat16, torch.device("cpu"), run) == PLAN
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert _backends.planned(problem, torch.bfloat16, cuda, run) == PLAN
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setenv("OASR_AUTOTUNE", "0")
    assert _backends.planned(problem, torch.bfloat16, cuda, run) == PLAN and len(ran) == 2


def test_the_profilers_timer_is_registered():
    assert gemm_tune.TIMER is timing.candidate_seconds  # (importing the harness's timing registered it)
