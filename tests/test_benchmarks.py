"""Tests of the benchmark harness and of profiling.timing.

CPU tests cover the routine contract, the CLI's parsing, testlists, the CSV
schema, the rate helpers and the no-GPU exit; the routines' logic
(``registry_routine``) runs on CPU with its GPU pieces (input placement, timing,
ceiling) replaced. GPU tests run the real CLI and timing.
"""

from __future__ import annotations

import argparse
import inspect
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.oasr_benchmark import UsageError, build_parser, main, parse_command, read_testlist
from benchmarks.routines import CONTRACT, ROUTINE_REGISTRY, load_routine, registry_routine
from benchmarks.routines import activation as activation_routine
from benchmarks.routines import norm as norm_routine
from benchmarks.routines import scale as scale_routine
from benchmarks.routines.bench_utils import (
    CSV_COLUMNS,
    PROVENANCE_COLUMNS,
    BenchResult,
    Ceiling,
    OutputWriter,
    check_close,
    compute_bandwidth_tb_s,
    compute_gemm_tflops,
    dtype_size,
    gemm_ceiling,
    parse_dtype,
    plot_results,
    read_results,
    results_frame,
)
from profiling import timing
from profiling.ops import OPS, get_op
from profiling.timing import NoGPUError, TimingResult

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "benchmarks" / "oasr_benchmark.py"
CONFORMER_TESTLIST = REPO / "benchmarks" / "testlists" / "conformer.txt"
HAS_CUDA = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def _timing(*samples: float) -> TimingResult:
    return TimingResult(tuple(samples), "graph", 100, 4)


# ---------------------------------------------------------------------------
# Routine registry contract
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ROUTINE_REGISTRY))
def test_routine_contract(name):
    routine = load_routine(name)
    assert all(hasattr(routine, attr) for attr in CONTRACT)
    assert routine.SUBROUTINES and all(isinstance(s, str) for s in routine.SUBROUTINES)
    configs = routine.get_default_configs()
    assert set(routine.SUBROUTINES) <= set(configs)
    assert all(configs[s] and all(isinstance(c, dict) for c in configs[s]) for s in routine.SUBROUTINES)
    assert list(inspect.signature(routine.run_test).parameters) == ["args", "output"]
    parser = argparse.ArgumentParser()
    routine.parse_args(parser)  # adds its own flags without clashing with the CLI's
    build_parser(routine).parse_args(["--routine", name])


@pytest.mark.parametrize("name", sorted(ROUTINE_REGISTRY))
def test_registry_routines_round_trip_their_defaults_through_the_size_flag(name):
    """Every default config is an op config the routine's size flag can also ask for, and has a bench_*.py."""
    routine = load_routine(name)
    flag = routine.ROUTINE.size_flag
    for subroutine in routine.SUBROUTINES:
        op = get_op(subroutine)
        assert op.config_fields == flag.fields
        assert (REPO / "benchmarks" / f"bench_{subroutine}.py").read_text().count(
            f'run_standalone("{subroutine}")'
        ) == 1
        for config in routine.get_default_configs()[subroutine]:
            argv = ["--routine", name, "--subroutine", subroutine, f"--{flag.name}", *map(str, config.values())]
            assert flag.configs(getattr(parse_command(argv), flag.name)) == [config]


@pytest.mark.parametrize("name", sorted(ROUTINE_REGISTRY))
def test_run_standalone_is_the_cli_with_the_routine_fixed(name, monkeypatch, capsys):
    routine = load_routine(name)
    monkeypatch.setattr(sys, "argv", [f"bench_{name}.py", "--dry_run"])
    with pytest.raises(SystemExit) as exit_info:
        routine.run_standalone(routine.SUBROUTINES[0])
    assert exit_info.value.code == 0
    assert f"routine={name} subroutine={routine.SUBROUTINES[0]}" in capsys.readouterr().out


def test_load_routine_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown routine 'nope'; known routines: activation, norm, scale"):
        load_routine("nope")


def test_scale_default_configs_are_the_registry_sweep():
    sizes = [c["n"] for c in scale_routine.get_default_configs()["scale"]]
    assert sizes[0] * 2 == 4 * 1024 and sizes[-1] * 2 == 2**30  # fp16: 4 KiB .. 1 GiB
    assert scale_routine.get_default_configs("float32") == scale_routine.get_default_configs()  # no extra case


@pytest.mark.parametrize("routine", [activation_routine, norm_routine], ids=lambda r: r.ROUTINE.name)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_bct_defaults_are_the_registry_sweep_then_a_1_gib_input(routine, dtype):
    itemsize = parse_dtype(dtype).itemsize
    for subroutine, configs in routine.get_default_configs(dtype).items():
        op = get_op(subroutine)
        assert configs[:-1] == list(op.default_sweep) and {"b": 16, "t": 1500, "c": 1024} in configs
        large = configs[-1]
        input_width = 2 * large["c"] if subroutine == "glu" else large["c"]
        assert large["b"] * large["t"] * input_width * itemsize == 2**30, (subroutine, large)
        assert input_width == 1024 and large["t"] == (4096 if dtype == "float32" else 8192)


def test_routines_reject_ops_whose_config_fields_differ_from_the_size_flag():
    with pytest.raises(ValueError, match="op glu has config fields"):
        registry_routine.RegistryRoutine("bad", ("glu",), registry_routine.SIZE_FLAG)


# ---------------------------------------------------------------------------
# CLI parsing
# ---------------------------------------------------------------------------


def test_cli_parses_every_flag(tmp_path):
    argv = [
        "--routine", "scale", "--subroutine", "scale", "--backends", "cuda", "torch", "--dtype", "bf16",
        "--size", "4096", "65536", "--refcheck", "--allow_output_mismatch", "--num_iters", "7",
        "--dry_run_iters", "3", "--use_cuda_events", "-vv", "--compare", "--profile", "--target", "torch",
        "--output_path", str(tmp_path / "r.csv"), "--plot", str(tmp_path / "r.png"), "--dry_run",
    ]  # fmt: skip
    args = parse_command(argv)
    assert (args.routine, args.subroutine, args.backends, args.dtype) == (
        "scale",
        "scale",
        ["cuda", "torch"],
        "bfloat16",
    )
    assert args.size == [4096, 65536]
    assert args.refcheck and args.allow_output_mismatch and args.use_cuda_events and args.compare
    assert (args.num_iters, args.dry_run_iters, args.verbose) == (7, 3, 2)
    assert args.profile and args.target == "torch" and args.dry_run
    assert args.output_path.endswith("r.csv") and args.plot.endswith("r.png")
    assert parse_command(["--list"]).list
    assert parse_command(["--testlist", "t.txt"]).testlist == "t.txt"


def test_cli_parses_shapes():
    args = parse_command(["--routine", "norm", "--subroutine", "rms_norm", "--shape", "16", "1500", "1024"])
    assert (args.routine, args.subroutine, args.shape) == ("norm", "rms_norm", [[16, 1500, 1024]])
    argv = ["--routine", "activation", "--shape", "16", "1500", "1024", "--shape", "64", "250", "256"]
    args = parse_command(argv)
    assert args.subroutine == "glu" and args.shape == [[16, 1500, 1024], [64, 250, 256]]
    assert norm_routine.ROUTINE.size_flag.configs(args.shape) == [
        {"b": 16, "t": 1500, "c": 1024},
        {"b": 64, "t": 250, "c": 256},
    ]
    assert parse_command(["--routine", "norm"]).shape is None
    assert parse_command(["--routine", "norm"]).subroutine == "layer_norm"


def test_cli_defaults():
    args = parse_command(["--routine", "scale"])
    assert args.subroutine == "scale" and args.dtype == "float16" and args.backends is None and args.size is None
    assert (args.num_iters, args.dry_run_iters, args.verbose, args.target) == (30, 5, 0, "oasr")
    assert not (args.refcheck or args.compare or args.profile or args.use_cuda_events or args.dry_run)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--routine", "nope"], "unknown routine"),
        (["--routine", "scale", "--subroutine", "glu"], "has subroutines scale"),
        (["--routine", "scale", "--dtype", "int8"], "unknown dtype"),
        (["--routine", "scale", "--num_iters", "0"], "at least 1"),
        (["--routine", "scale", "--size", "many"], "invalid int value"),
        (["--routine", "scale", "--dry_run_i", "3"], "unrecognized arguments"),  # no abbreviations
        (["--routine", "scale", "--size", "0"], "sizes must be positive"),
        (["--routine", "norm", "--shape", "16", "1500"], "expected 3 arguments"),
        (["--routine", "norm", "--shape", "16", "-1", "1024"], "sizes must be positive"),
        (["--routine", "norm", "--shape", "1", "2", "x"], "invalid int value"),
        (["--routine", "norm", "--size", "4096"], "unrecognized arguments"),
        (["--routine", "scale", "--shape", "1", "2", "3"], "unrecognized arguments"),
        (["--routine", "norm", "--subroutine", "glu"], "has subroutines layer_norm, rms_norm, add_layer_norm"),
    ],
)
def test_cli_rejects_bad_flags(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_command(argv)


def test_cli_list_and_dry_run_need_no_gpu(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "scale: subroutines scale" in out and "activation: subroutines glu, swish" in out
    assert "norm: subroutines layer_norm, rms_norm, add_layer_norm, add_rms_norm" in out
    assert main(["--routine", "scale", "--size", "4096", "--compare", "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[DRY RUN] routine=scale subroutine=scale dtype=float16") and "size=4096" in out


def test_cli_usage_errors_are_one_line_exit_2(capsys):
    assert main([]) == 2
    assert (
        capsys.readouterr().err == "oasr_benchmark.py: error: --routine is required (or --list, or --testlist FILE)\n"
    )


# ---------------------------------------------------------------------------
# Testlists
# ---------------------------------------------------------------------------


def test_read_testlist_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("# header\n\n--routine scale --size 4096  # small\n  --routine scale --dtype 'bfloat16'\n")
    assert read_testlist(path) == [
        (3, ["--routine", "scale", "--size", "4096"]),
        (4, ["--routine", "scale", "--dtype", "bfloat16"]),
    ]


def test_testlist_dry_run(tmp_path, capsys):
    path = tmp_path / "lines.txt"
    path.write_text("--routine scale --size 4096\n--routine scale --dtype bf16 --profile --target torch\n")
    assert main(["--testlist", str(path), "--dry_run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "size=4096" in lines[0] and "dtype=bfloat16" in lines[1] and "target=torch" in lines[1]


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("--routine scale --bogus\n", [], "lines.txt:1: unrecognized arguments: --bogus"),
        ("# only\n--dtype bf16\n", [], "lines.txt:2: --routine is required"),
        ("--routine scale 'unclosed\n", [], "lines.txt:1: No closing quotation"),
        ("--routine scale\n", ["--compare"], "run flags belong in the file's lines"),
    ],
)
def test_testlist_errors_name_the_line(tmp_path, capsys, text, extra, message):
    path = tmp_path / "lines.txt"
    path.write_text(text)
    assert main(["--testlist", str(path), "--dry_run", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_conformer_testlist_covers_every_subroutine_in_fp16_and_bf16(capsys):
    runs = [parse_command(tokens, global_flags=False) for _, tokens in read_testlist(CONFORMER_TESTLIST)]
    expected = {
        (name, sub, dtype)
        for name in ROUTINE_REGISTRY
        for sub in load_routine(name).SUBROUTINES
        for dtype in ("float16", "bfloat16")
    }
    assert sorted((r.routine, r.subroutine, r.dtype) for r in runs) == sorted(expected)  # each once
    assert all(r.refcheck and r.compare and not r.profile for r in runs)
    assert all(getattr(r, load_routine(r.routine).ROUTINE.size_flag.name) is None for r in runs)  # defaults
    assert main(["--testlist", str(CONFORMER_TESTLIST), "--dry_run"]) == 0
    assert capsys.readouterr().out.count("[DRY RUN]") == len(expected)


def test_missing_testlist_is_a_usage_error(tmp_path, capsys):
    assert main(["--testlist", str(tmp_path / "absent.txt")]) == 2
    assert "cannot read testlist" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Helpers computed by hand
# ---------------------------------------------------------------------------


def test_rate_helpers_by_hand():
    assert compute_bandwidth_tb_s(2 * 2**20, 0.001) == pytest.approx(2.097152)  # 2 MiB in 1 us
    assert compute_bandwidth_tb_s(10**12, 1000.0) == pytest.approx(1.0)
    assert compute_gemm_tflops(4096, 4096, 4096, 1.0) == pytest.approx(137.438953472)
    assert compute_gemm_tflops(1000, 1000, 500, 1.0) == pytest.approx(1.0)
    assert [dtype_size(d) for d in ("float32", "fp16", "bfloat16", torch.float16)] == [4, 2, 2, 2]
    assert parse_dtype("bf16") is torch.bfloat16


def test_check_close():
    x = torch.tensor([1.0, 2.0, float("nan")], dtype=torch.float16)
    assert check_close(x, x.double()) == (True, 0.0)
    passed, diff = check_close(x, torch.tensor([1.0, 2.01, float("nan")], dtype=torch.float64))
    assert not passed and diff == pytest.approx(0.01)
    assert check_close(x, torch.tensor([1.0, 2.01, float("nan")]), rtol=0.01)[0]


def test_timing_result_statistics():
    result = _timing(*[float(v) for v in range(1, 12)])  # 1 .. 11
    assert result.median_ms == 6.0 and result.p10_ms == 2.0 and result.p90_ms == 10.0
    assert result.iqr_ms == 5.0 and result.iqr_rel == pytest.approx(5 / 6) and result.noisy
    assert result.std_ms == pytest.approx(math.sqrt(11.0))
    median, std = result  # the guide's bench_fn contract
    assert (median, std) == (result.median_ms, result.std_ms)
    quiet = _timing(1.0, 1.01, 0.99, 1.0)
    assert not quiet.noisy and "1.0000 ms median" in str(quiet)


def test_rotation_sets():
    l2 = 60 * 2**20
    assert timing.rotation_sets(32 * 2**20, l2_bytes=l2) == 4  # 16 MiB fp16 in + out
    assert timing.rotation_sets(2 * 2**30, l2_bytes=l2) == 1
    assert timing.rotation_sets(8192, l2_bytes=l2) == timing.MAX_INPUT_SETS
    assert timing.rotation_sets(8192, l2_bytes=l2, max_sets=10**6) == math.ceil(2 * l2 / 8192)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("method", ["graph", "events"])
def test_allocated_outputs_rotate_like_the_inputs(method):
    inputs = [torch.randn(1024, device="cuda") for _ in range(3)]
    addresses = []

    def allocating(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        addresses.append(y.data_ptr())
        return y

    timing.time_fn([lambda x=x: allocating(x) for x in inputs], warmup=1, iters=12, method=method, launches=12)
    # The last len(fns) results stay alive, so the allocator cannot hand the freed block straight back.
    assert len(set(addresses[-6:])) >= len(inputs)


def test_time_fn_validates_arguments_before_touching_the_gpu():
    with pytest.raises(ValueError, match="flush_l2 needs method='events'"):
        timing.time_fn(lambda: None, flush_l2=True)
    with pytest.raises(ValueError, match="at least one callable"):
        timing.time_fn([])
    with pytest.raises(ValueError, match="method must be"):
        timing.time_fn(lambda: None, method="wall")  # type: ignore[arg-type]


def test_time_interleaved_alternates_backends_and_pools_rounds(monkeypatch):
    calls = []

    def fake_time_fn(fns, *, warmup, iters, method, launches):
        calls.append((fns[0](), iters, launches))
        return timing.TimingResult(tuple([float(len(calls))] * iters), method, launches or 7, len(fns))

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    with pytest.warns(timing.NoisyTimingWarning, match="noisy timing of a, b"):  # rounds 3, 5, 7 differ
        results = timing.time_interleaved({"a": [lambda: "a"], "b": [lambda: "b", lambda: "b"]}, rounds=3, iters=10)
    assert [c[0] for c in calls] == ["a", "b"] * 4  # in turn, every round (the first discarded)
    assert [c[1] for c in calls] == [4] * 8  # ceil(10 / 3) samples per round
    assert [c[2] for c in calls] == [None, None] + [7] * 6  # launches fixed by each backend's first round
    assert results["a"].samples_ms == (3.0,) * 4 + (5.0,) * 4 + (7.0,) * 4
    assert (results["b"].launches_per_sample, results["b"].input_sets, results["b"].median_ms) == (7, 2, 6.0)
    calls.clear()
    with pytest.warns(timing.NoisyTimingWarning):  # 1 and 2
        kept = timing.time_interleaved({"a": [lambda: "a"]}, rounds=2, iters=2, discarded_rounds=0)
    assert len(calls) == 2 and kept["a"].samples_ms == (1.0, 2.0)
    calls.clear()
    with pytest.warns(timing.NoisyTimingWarning):  # the fake's samples grow round by round
        timing.time_interleaved(
            {"a": [lambda: "a"], "b": [lambda: "b"]}, rounds=2, iters=2, before_each=lambda: calls.append(("setup",))
        )
    assert [c[0] for c in calls] == ["setup", "a", "setup", "b"] * 3  # before every timing, discarded round too
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        timing.time_interleaved({"a": [lambda: None]}, rounds=0)
    with pytest.raises(ValueError, match="discarded_rounds must be >= 0"):
        timing.time_interleaved({"a": [lambda: None]}, discarded_rounds=-1)


def test_host_overhead_us_on_cpu():
    calls = []
    assert timing.host_overhead_us(lambda: calls.append(1), calls=50, warmup=2) > 0
    assert len(calls) == 52


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
@pytest.mark.parametrize(
    "call",
    [
        lambda: timing.time_fn(lambda: None),
        lambda: timing.time_interleaved({"torch": [lambda: None]}),
        timing.measure_copy_bandwidth,
        timing.measure_cublas_tflops,
        timing.l2_cache_bytes,
    ],
)
def test_timing_without_gpu_raises_no_gpu_error(call):
    with pytest.raises(NoGPUError, match=r"^no CUDA GPU: "):
        call()


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_cli_without_gpu_exits_1_with_one_sentence():
    proc = subprocess.run(
        [sys.executable, str(CLI), "--routine", "scale", "--refcheck"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("oasr_benchmark.py: no CUDA GPU: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
@pytest.mark.parametrize(
    "argv",
    [
        ["timing_drift.py"],
        ["output_reuse.py"],
        ["scale_after_large_op.py"],
        ["tune_kernels.py", "--ops", "scale", "--variant", "base=", "--after-large-check"],
    ],
)
def test_gpu_scripts_without_gpu_exit_1_with_one_sentence(argv):
    script = CLI.parent / argv[0]
    proc = subprocess.run([sys.executable, str(script), *argv[1:]], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith(f"{argv[0]}: no CUDA GPU: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------
# The routines' logic on CPU (GPU pieces replaced)
# ---------------------------------------------------------------------------


@pytest.fixture
def cpu_routines(monkeypatch):
    """Every routine's run_test on CPU tensors: torch stands in for oasr, timings and the ceiling are fixed."""

    def stand_in(torch_fn):
        def oasr_stand_in(inputs):
            return torch_fn(inputs)

        return oasr_stand_in

    for spec in OPS.values():
        monkeypatch.setitem(spec.backends, "oasr", stand_in(spec.backends["torch"]))
    monkeypatch.setattr(
        registry_routine, "op_input_sets", lambda op, cfg, dtype: [op.make_inputs(cfg, dtype, torch.device("cpu"), 0)]
    )

    def fake_bench_backends(fns, **kw):  # oasr (cuda) takes 0.5 ms, torch 1 ms
        return {b: _timing(*[0.5 if f[0].func.__name__ == "oasr_stand_in" else 1.0] * 3) for b, f in fns.items()}

    monkeypatch.setattr(registry_routine, "bench_backends", fake_bench_backends)
    monkeypatch.setattr(registry_routine, "memory_ceiling", lambda: Ceiling("copy_bandwidth", 4.0))


def test_scale_run_test_rows(cpu_routines, capsys):
    args = parse_command(["--routine", "scale", "--size", "1000000", "--backends", "cuda", "--refcheck", "--compare"])
    output = OutputWriter()
    scale_routine.run_test(args, output)
    cuda, torch_row = output.results  # --compare adds torch
    assert (cuda.backend, torch_row.backend, output.errors) == ("cuda", "torch", 0)
    assert cuda.bytes_moved == 4_000_000 and cuda.flops == 1_000_000 and cuda.shape == "[1000000]"
    assert cuda.bandwidth_tb_s == pytest.approx(4e6 / 0.5e-3 / 1e12)
    assert cuda.speedup_vs_torch == pytest.approx(2.0) and torch_row.speedup_vs_torch == pytest.approx(1.0)
    assert cuda.pct_of_ceiling == pytest.approx(100 * 0.008 / 4.0) and cuda.ceiling == "copy_bandwidth"
    assert cuda.refcheck == "pass" and 0 < cuda.max_diff < 0.01  # fp16 rounding
    out = capsys.readouterr().out
    assert "measured copy_bandwidth 4.000 TB/s" in out and out.count("[PERF]") == 2


def test_scale_run_test_reports_unknown_backends(cpu_routines, capsys):
    output = OutputWriter()
    scale_routine.run_test(parse_command(["--routine", "scale", "--size", "64", "--backends", "triton"]), output)
    assert output.errors == 1 and not output.results
    assert "unknown backend(s) triton" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("routine", "subroutine", "bytes_per_element", "dtype"),
    [
        ("norm", "add_rms_norm", 3 * 2, "float16"),  # read x and residual, write out (+ weight)
        ("norm", "layer_norm", 2 * 4, "float32"),
        ("activation", "glu", 3 * 2, "bfloat16"),  # read 2c, write c
        ("activation", "swish", 2 * 2, "float16"),
    ],
)
def test_bct_run_test_rows(cpu_routines, capsys, routine, subroutine, bytes_per_element, dtype):
    argv = ["--routine", routine, "--subroutine", subroutine, "--dtype", dtype, "--refcheck", "--compare"]
    output = OutputWriter()
    load_routine(routine).run_test(
        parse_command([*argv, "--shape", "2", "3", "64", "--shape", "1", "5", "128"]), output
    )
    assert output.errors == 0 and len(output.results) == 4
    cuda, torch_row = output.results[:2]
    assert (cuda.routine, cuda.subroutine, cuda.backend, torch_row.backend) == (routine, subroutine, "cuda", "torch")
    assert (cuda.shape, cuda.config, cuda.dtype) == ("[2,3,64]", "b=2,t=3,c=64", dtype)
    assert output.results[2].shape == "[1,5,128]"
    assert cuda.bytes_moved == get_op(subroutine).work({"b": 2, "t": 3, "c": 64}, parse_dtype(dtype)).bytes
    assert 2 * 3 * 64 * bytes_per_element <= cuda.bytes_moved <= 2 * 3 * 64 * bytes_per_element + 2 * 64 * 4
    assert cuda.speedup_vs_torch == pytest.approx(2.0) and torch_row.speedup_vs_torch == pytest.approx(1.0)
    assert cuda.pct_of_ceiling == pytest.approx(100 * cuda.bandwidth_tb_s / 4.0)
    assert cuda.refcheck == torch_row.refcheck == "pass"
    assert capsys.readouterr().out.count("[PERF]") == 4


def test_run_test_uses_the_defaults_of_the_run_dtype(cpu_routines, monkeypatch):
    seen = []
    monkeypatch.setattr(
        registry_routine.RegistryRoutine, "_run_config", lambda self, op, config, *a: seen.append(config)
    )
    norm_routine.run_test(parse_command(["--routine", "norm", "--subroutine", "rms_norm", "--dtype", "fp32"]), None)
    assert seen == norm_routine.get_default_configs("float32")["rms_norm"] and seen[-1]["t"] == 4096


def test_refcheck_failure_drops_the_config_unless_allowed(cpu_routines, monkeypatch, capsys):
    spec = get_op("swish")
    monkeypatch.setitem(spec.backends, "oasr", lambda inputs: spec.backends["torch"](inputs) + 1)
    argv = ["--routine", "activation", "--subroutine", "swish", "--shape", "2", "3", "8", "--refcheck"]
    output = OutputWriter()
    activation_routine.run_test(parse_command(argv), output)
    assert output.errors == 1 and not output.results
    assert "swish b=2,t=3,c=8 float16: cuda differ from the reference" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# CSV schema and plots
# ---------------------------------------------------------------------------


def _results() -> list[BenchResult]:
    rows = []
    for backend, median in (("cuda", 0.010), ("torch", 0.012)):
        for n in (2**20, 2**24):
            rows.append(BenchResult.from_timing(
                _timing(median, median * 1.01, median * 0.99),
                routine="scale", subroutine="scale", backend=backend, shape=f"[{n}]", dtype="float16",
                bandwidth_tb_s=compute_bandwidth_tb_s(4 * n, median), config=f"n={n}", bytes_moved=4 * n, flops=n,
                ceiling="copy_bandwidth", ceiling_value=4.2, pct_of_ceiling=50.0, refcheck="pass", max_diff=0.0,
            ))  # fmt: skip
    rows.append(BenchResult("scale", "scale", "cuda", "[64]", "float32", 0.002, 0.0))  # minimal row
    return rows


def test_csv_round_trip(tmp_path, capsys):
    path = tmp_path / "out" / "results.csv"
    writer = OutputWriter(path)
    for result in _results():
        writer.write_result(result)
    writer.finalize()
    assert f"wrote 5 rows to {path}" in capsys.readouterr().out
    frame = read_results(path)
    assert tuple(frame.columns) == CSV_COLUMNS and len(frame) == 5
    expected = results_frame(_results())
    for column in expected.columns:
        for got, want in zip(frame[column], expected[column], strict=True):
            if want is None or (isinstance(want, float) and math.isnan(want)):
                assert got is None or got != got or got == ""  # empty cell
            elif isinstance(want, float):
                assert got == pytest.approx(want, rel=1e-12)
            else:
                assert got == want, column
    assert frame["noisy"].tolist()[:4] == [False] * 4
    assert set(frame["gpu"]) == {"none" if not HAS_CUDA else torch.cuda.get_device_name()}
    assert frame["git_commit"].iloc[0] and frame["torch_version"].iloc[0] == torch.__version__


def test_read_results_rejects_other_csvs(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a benchmark CSV"):
        read_results(path)


def test_provenance_columns_come_from_collect():
    from profiling.provenance import collect

    assert set(PROVENANCE_COLUMNS) <= set(collect())


def test_readme_documents_every_csv_column():
    readme = (REPO / "benchmarks" / "README.md").read_text()
    assert [c for c in CSV_COLUMNS if f"`{c}`" not in readme] == []


def test_plot_results_writes_a_png(tmp_path):
    path = tmp_path / "bw.png"
    plot_results(results_frame(_results()[:4]), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------
# GPU (run on the H200)
# ---------------------------------------------------------------------------


@pytest.mark.gpu
@requires_gpu
def test_cli_scale_refcheck_compare(tmp_path, capsys):
    csv_path, png_path = tmp_path / "scale.csv", tmp_path / "scale.png"
    sizes = [4096, 2**24]
    argv = ["--routine", "scale", "--subroutine", "scale", "--backends", "cuda", "torch", "--refcheck", "--compare"]
    argv += ["--size", *map(str, sizes), "--output_path", str(csv_path), "--plot", str(png_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("[PERF]")]) == 2 * len(sizes)
    frame = read_results(csv_path)
    assert len(frame) == 4 and set(frame["refcheck"]) == {"pass"} and set(frame["method"]) == {"graph"}
    assert frame["gpu_slug"].iloc[0] != "none" and frame["ceiling"].iloc[0] == "copy_bandwidth"
    assert frame.loc[frame["backend"] == "torch", "speedup_vs_torch"].tolist() == [1.0, 1.0]
    big = frame[frame["config"] == f"n={2**24}"]
    assert big["pct_of_ceiling"].between(30, 120).all(), big[["backend", "pct_of_ceiling"]]
    assert png_path.stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.slow
@requires_gpu
def test_cli_default_sweep_subprocess(tmp_path):
    csv_path = tmp_path / "sweep.csv"
    argv = ["--routine", "scale", "--subroutine", "scale", "--backends", "cuda", "torch", "--refcheck", "--compare"]
    proc = subprocess.run(
        [sys.executable, str(CLI), *argv, "--output_path", str(csv_path)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    sizes = len(scale_routine.get_default_configs()["scale"])
    assert proc.stdout.count("[PERF]") == 2 * sizes
    assert len(read_results(csv_path)) == 2 * sizes


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize(
    ("routine", "subroutine"), [("norm", "add_rms_norm"), ("activation", "glu")], ids=["add_rms_norm", "glu"]
)
def test_cli_bct_refcheck_compare(tmp_path, capsys, routine, subroutine):
    csv_path = tmp_path / f"{subroutine}.csv"
    argv = ["--routine", routine, "--subroutine", subroutine, "--refcheck", "--compare", "--dtype", "bf16"]
    assert main([*argv, "--shape", "16", "1500", "1024", "--output_path", str(csv_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[PERF]")]
    assert len(lines) == 2 and all(f"{routine}/{subroutine}" in line and "[16,1500,1024]" in line for line in lines)
    assert all("x torch" in line and "% of copy_bandwidth" in line and "ref pass" in line for line in lines)
    frame = read_results(csv_path)
    assert frame["backend"].tolist() == ["cuda", "torch"] and set(frame["refcheck"]) == {"pass"}
    assert set(frame["shape"]) == {"[16,1500,1024]"} and set(frame["config"]) == {"b=16,t=1500,c=1024"}
    assert set(frame["dtype"]) == {"bfloat16"} and set(frame["ceiling"]) == {"copy_bandwidth"}
    work = get_op(subroutine).work({"b": 16, "t": 1500, "c": 1024}, torch.bfloat16)
    assert set(frame["bytes_moved"]) == {work.bytes}
    assert frame["pct_of_ceiling"].between(1, 120).all() and frame["speedup_vs_torch"].iloc[1] == 1.0


@pytest.mark.gpu
@requires_gpu
def test_cli_profile_mode(capsys):
    pytest.importorskip("nvtx")
    assert main(["--routine", "scale", "--size", "65536", "--profile", "--target", "oasr"]) == 0
    assert "oasr@scale:oasr:n=65536,dtype=float16/" in capsys.readouterr().out


@pytest.mark.gpu
@requires_gpu
def test_graph_and_events_agree_at_a_large_size():
    spec = get_op("scale")
    sets = timing.op_input_sets(spec, {"n": 2**26}, torch.float16)  # 256 MiB moved per launch
    fns = [lambda inputs=inputs: spec.backends["torch"](inputs) for inputs in sets]
    graph = timing.time_fn(fns, warmup=3, iters=20, method="graph")
    events = timing.time_fn(fns, warmup=3, iters=20, method="events")
    flushed = timing.time_fn(fns, warmup=3, iters=20, method="events", flush_l2=True)
    assert graph.method == "graph" and graph.launches_per_sample >= len(sets)
    assert 0.5 < events.median_ms / graph.median_ms < 2.0
    assert 0.5 < flushed.median_ms / graph.median_ms < 2.0


@pytest.mark.gpu
@requires_gpu
def test_time_interleaved_on_the_gpu():
    x = torch.randn(2**20, device="cuda")
    results = timing.time_interleaved({"mul": [lambda: x * 2], "add": [lambda: x + 1]}, rounds=2, iters=20)
    for result in results.values():
        assert len(result.samples_ms) == 20 and result.method == "graph" and result.median_ms > 0
    assert 0.2 < results["mul"].median_ms / results["add"].median_ms < 5


@pytest.mark.gpu
@requires_gpu
def test_measured_ceilings_are_plausible_and_cached():
    bandwidth = timing.measure_copy_bandwidth()
    assert 0.5 < bandwidth < 20 and timing.measure_copy_bandwidth() == bandwidth
    tflops = timing.measure_cublas_tflops()
    assert tflops > 10 and timing.measure_cublas_tflops() == tflops
    assert gemm_ceiling().name == "cublas_bfloat16" and gemm_ceiling().value == tflops
    assert timing.l2_cache_bytes() > 2**20
    assert timing.host_overhead_us(lambda: torch.empty(1, device="cuda").mul_(2)) > 0
