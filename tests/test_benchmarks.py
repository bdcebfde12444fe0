"""Tests of the benchmark CLI (benchmarks/), of the harness's measure/compare, and of profiling.harness.timing.

CPU tests cover the routines (derived from the families and the harness's ops),
the CLI's parsing, testlists, the one result schema and its CSV, the one
correctness checker and the no-GPU exits; :func:`measure` and the whole CLI run
on CPU with their GPU pieces (input placement, timing, copy bandwidth) replaced.
GPU tests run the real CLI and timing.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from benchmarks import gemm_grid, oasr_benchmark
from benchmarks.oasr_benchmark import (
    ROUTINES,
    UsageError,
    build_parser,
    configs_of,
    main,
    parse_command,
    read_testlist,
    run_one,
)
from benchmarks.output import (
    CSV_COLUMNS,
    PROVENANCE_COLUMNS,
    TEXT_COLUMNS,
    OutputWriter,
    perf_line,
    plot_results,
    read_results,
)
from oasr.jit.families import FAMILIES
from profiling.harness import measure as measure_module
from profiling.harness import timing
from profiling.harness.correctness import COLUMNS as CORRECTNESS_COLUMNS
from profiling.harness.correctness import check_op, compare, refcheck
from profiling.harness.measure import RESULT_COLUMNS, columns_for, measure
from profiling.harness.ops import OPS, dtype_name, get_op, ops_of, parse_dtype
from profiling.harness.timing import NoGPUError, TimingResult

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "benchmarks" / "oasr_benchmark.py"
CONFORMER_TESTLIST = REPO / "benchmarks" / "testlists" / "conformer.txt"
HAS_CUDA = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
BCT_OPS = [name for name, op in OPS.items() if op.config_fields == ("b", "t", "c")]


def _timing(*samples: float) -> TimingResult:
    return TimingResult(tuple(samples), "graph", 100, 4)


def _size_argv(op, config) -> list[str]:
    """The size flag asking for ``config``: ``--size N`` or ``--shape B T C``."""
    flag = "--size" if op.config_fields == ("n",) else "--shape"
    return [flag, *(str(config[field]) for field in op.config_fields)]


# ---------------------------------------------------------------------------
# Routines: the families, with their harness ops as subroutines
# ---------------------------------------------------------------------------


def test_routines_are_the_families_with_their_harness_ops():
    assert list(ROUTINES) == [family.name for family in FAMILIES if ops_of(family)]
    for family in FAMILIES:
        assert ROUTINES.get(family.name, []) == ops_of(family)
    assert sorted(op.name for ops in ROUTINES.values() for op in ops) == sorted(OPS)  # every op, once


@pytest.mark.parametrize("name", list(OPS))
def test_every_benchmark_config_round_trips_through_the_size_flag(name):
    """Every default config is one the op's size flag can ask for, in every dtype."""
    op = get_op(name)
    routine = op.family.name
    for dtype in op.dtypes:
        for config in op.benchmark_configs(dtype):
            args = parse_command(
                ["--routine", routine, "--subroutine", name, "--dtype", dtype, *_size_argv(op, config)]
            )
            assert args.op is op and args.subroutine == name and configs_of(args) == [config]
        defaults = parse_command(["--routine", routine, "--subroutine", name, "--dtype", dtype])
        assert defaults.sizes is None and configs_of(defaults) == op.benchmark_configs(dtype)


def test_size_flag_follows_the_op_config_fields():
    scale_help = build_parser(get_op("scale")).format_help()
    assert "--size N [N ...]" in scale_help and "--shape" not in scale_help
    norm_help = build_parser(get_op("rms_norm")).format_help()
    assert "--shape B T C" in norm_help and "--size" not in norm_help
    assert "--size" not in build_parser().format_help()  # no op, no size flag


def test_unknown_routine_names_the_known_ones():
    known = ", ".join(ROUTINES)
    with pytest.raises(UsageError, match=f"unknown routine 'nope'; known routines: {known}$"):
        parse_command(["--routine", "nope"])


def test_scale_defaults_are_the_harness_sweep():
    sizes = [c["n"] for c in configs_of(parse_command(["--routine", "scale"]))]
    assert sizes == [c["n"] for c in get_op("scale").default_sweep]
    assert sizes[0] * 2 == 4 * 1024 and sizes[-1] * 2 == 2**30  # fp16: 4 KiB .. 1 GiB
    assert configs_of(parse_command(["--routine", "scale", "--dtype", "float32"])) == configs_of(
        parse_command(["--routine", "scale"])
    )  # no extra case


@pytest.mark.parametrize("name", BCT_OPS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_bct_defaults_are_the_harness_sweep_then_a_1_gib_input(name, dtype):
    op = get_op(name)
    configs = configs_of(parse_command(["--routine", op.family.name, "--subroutine", name, "--dtype", dtype]))
    assert configs[:-1] == list(op.default_sweep) and {"b": 16, "t": 1500, "c": 1024} in configs
    large = configs[-1]
    input_width = 2 * large["c"] if name == "glu" else large["c"]
    assert large["b"] * large["t"] * input_width * parse_dtype(dtype).itemsize == 2**30, large
    assert input_width == 1024 and large["t"] == (4096 if dtype == "float32" else 8192)


# ---------------------------------------------------------------------------
# CLI parsing
# ---------------------------------------------------------------------------


def test_cli_parses_every_flag(tmp_path):
    argv = [
        "--routine", "scale", "--subroutine", "scale", "--backends", "cuda", "torch", "--dtype", "bf16",
        "--size", "4096", "65536", "--refcheck", "--allow_output_mismatch", "--num_iters", "7",
        "--dry_run_iters", "3", "--rounds", "2", "--use_cuda_events", "-vv", "--compare", "--profile",
        "--target", "torch", "--output_path", str(tmp_path / "r.csv"), "--plot", str(tmp_path / "r.png"),
        "--dry_run",
    ]  # fmt: skip
    args = parse_command(argv)
    assert (args.routine, args.subroutine, args.backends, args.dtype) == (
        "scale",
        "scale",
        ["oasr", "torch"],
        "bfloat16",
    )
    assert args.op is get_op("scale")
    assert args.sizes == [[4096], [65536]] and configs_of(args) == [{"n": 4096}, {"n": 65536}]
    assert args.refcheck and args.allow_output_mismatch and args.use_cuda_events and args.compare
    assert (args.num_iters, args.dry_run_iters, args.rounds, args.verbose) == (7, 3, 2, 2)
    assert args.profile and args.target == "torch" and args.dry_run
    assert args.output_path.endswith("r.csv") and args.plot.endswith("r.png")
    assert parse_command(["--list"]).list
    assert parse_command(["--testlist", "t.txt"]).testlist == "t.txt"


def test_cli_parses_shapes():
    args = parse_command(["--routine", "norm", "--subroutine", "rms_norm", "--shape", "16", "1500", "1024"])
    assert (args.routine, args.subroutine, args.sizes) == ("norm", "rms_norm", [[16, 1500, 1024]])
    argv = ["--routine", "activation", "--shape", "16", "1500", "1024", "--shape", "64", "250", "256"]
    args = parse_command(argv)
    assert args.subroutine == "glu" and args.sizes == [[16, 1500, 1024], [64, 250, 256]]
    assert configs_of(args) == [{"b": 16, "t": 1500, "c": 1024}, {"b": 64, "t": 250, "c": 256}]
    assert parse_command(["--routine", "norm"]).sizes is None
    assert parse_command(["--routine", "norm"]).subroutine == "layer_norm"  # the family's first op


def test_cli_defaults():
    args = parse_command(["--routine", "scale"])
    assert args.subroutine == "scale" and args.dtype == "float16" and args.sizes is None
    assert args.backends == list(get_op("scale").backends) == ["oasr", "torch"]  # all of the op's
    assert (args.num_iters, args.dry_run_iters, args.rounds, args.verbose, args.target) == (30, 5, 3, 0, "oasr")
    assert not (args.refcheck or args.compare or args.profile or args.use_cuda_events or args.dry_run)


def test_backends_are_the_harness_names_cuda_an_alias_and_compare_adds_torch():
    def backends(*argv: str) -> list[str]:
        return parse_command(["--routine", "scale", *argv]).backends

    assert backends("--backends", "cuda") == backends("--backends", "oasr") == ["oasr"]
    assert backends("--backends", "oasr", "--compare") == ["oasr", "torch"]
    assert backends("--backends", "torch", "--compare") == ["torch"]  # not twice
    assert backends("--compare") == ["oasr", "torch"]
    assert parse_command(["--routine", "scale", "--profile", "--target", "cuda"]).target == "oasr"


def test_profile_needs_nvtx(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)  # find_spec("nvtx") -> None
    with pytest.raises(UsageError, match="--profile needs the nvtx package"):
        parse_command(["--routine", "scale", "--profile"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--routine", "nope"], "unknown routine"),
        (["--routine", "scale", "--subroutine", "glu"], "routine scale has subroutines scale, not glu"),
        (["--routine", "scale", "--dtype", "int8"], "unknown dtype"),
        (["--routine", "scale", "--num_iters", "0"], "at least 1"),
        (["--routine", "scale", "--dry_run_iters", "0"], "at least 1"),
        (["--routine", "scale", "--rounds", "0"], "at least 1"),
        (["--routine", "scale", "--size", "many"], "invalid int value"),
        (["--routine", "scale", "--dry_run_i", "3"], "unrecognized arguments"),  # no abbreviations
        (["--routine", "scale", "--size", "0"], "sizes must be positive"),
        (["--routine", "scale", "--backends", "triton"], "scale has backends oasr, torch, not triton"),
        (["--routine", "scale", "--target", "triton"], "scale has backends oasr, torch, not triton"),
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
    assert "  scale: 10 default configs: n=2048 n=8192" in out and "b=64,t=8192,c=1024" in out
    assert main(["--routine", "scale", "--size", "4096", "--compare", "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[DRY RUN] routine=scale subroutine=scale backends=oasr torch dtype=float16")
    assert "size=4096" in out and "compare=True" in out and out.count("\n") == 1


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
    assert len(lines) == 2 and "size=4096" in lines[0]
    assert "dtype=bfloat16" in lines[1] and "target=torch" in lines[1]


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
        (routine, op.name, dtype)
        for routine, ops in ROUTINES.items()
        for op in ops
        for dtype in ("float16", "bfloat16")
    }
    assert sorted((r.routine, r.subroutine, r.dtype) for r in runs) == sorted(expected)  # each once
    assert all(r.refcheck and r.compare and not r.profile for r in runs)
    assert all(r.sizes is None and "torch" in r.backends for r in runs)  # defaults, compared with torch
    assert main(["--testlist", str(CONFORMER_TESTLIST), "--dry_run"]) == 0
    assert capsys.readouterr().out.count("[DRY RUN]") == len(expected)


def test_missing_testlist_is_a_usage_error(tmp_path, capsys):
    assert main(["--testlist", str(tmp_path / "absent.txt")]) == 2
    assert "cannot read testlist" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# The one correctness checker
# ---------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


def test_compare_passes_nan_and_inf_only_where_the_reference_holds_them():
    reference = torch.tensor([1.0, 2.0, NAN, INF, -INF], dtype=torch.float64)
    same = compare(reference.to(torch.float16), reference, 1e-3, 1e-3)
    assert same == {"max_abs_err": 0.0, "max_rel_err": 0.0, "err_over_tol": 0.0, "passed": True}
    for bad in (
        [NAN, 2.0, NAN, INF, -INF],  # a poisoned, unwritten output
        [1.0, 2.0, 0.0, INF, -INF],  # a number where the reference is NaN
        [1.0, 2.0, NAN, -INF, -INF],  # the wrong infinity
        [INF, 2.0, NAN, INF, -INF],  # an overflow
    ):
        result = compare(torch.tensor(bad, dtype=torch.float32), reference, 1e-3, 1e-3)
        assert not result["passed"], bad
        assert result["max_abs_err"] == 0.0  # errors only over positions where both are finite


def test_compare_tolerance_and_errors_by_hand():
    reference = torch.tensor([1.0, 2.0, -4.0], dtype=torch.float64)
    result = compare(torch.tensor([1.0, 2.01, -4.0], dtype=torch.float64), reference, 1e-3, 1e-3)
    assert not result["passed"]  # 0.01 > 1e-3 + 1e-3 * 2
    assert result["max_abs_err"] == pytest.approx(0.01) and result["max_rel_err"] == pytest.approx(0.01 / 4)
    assert result["err_over_tol"] == pytest.approx(0.01 / (1e-3 + 1e-3 * 2))  # > 1: what failed
    assert compare(torch.tensor([1.0, 2.01, -4.0]), reference, rtol=0.01, atol=0.0)["passed"]
    empty = compare(torch.empty(0), torch.empty(0, dtype=torch.float64), 1e-3, 1e-3)
    assert empty == {"max_abs_err": 0.0, "max_rel_err": 0.0, "err_over_tol": 0.0, "passed": True}


def test_relative_error_is_bounded_on_near_zero_references_and_err_over_tol_decides():
    """Issue 58: a reference holding 1e-300 made the old element-wise relative error 1e303 on a passing row."""
    reference = torch.tensor([1e-300, 0.0, 2.0, -4.0], dtype=torch.float64)
    result = reference + torch.tensor([1e-4, -2e-4, 1e-3, 0.0], dtype=torch.float64)
    check = compare(result, reference, rtol=1e-3, atol=1e-3)
    assert check["passed"] and check["max_rel_err"] == pytest.approx(1e-3 / 4)
    assert check["err_over_tol"] == pytest.approx(1e-3 / (1e-3 + 2e-3)) and check["err_over_tol"] <= 1
    for tight in (1e-5, 1e-4, 2e-4):
        strict = compare(result, reference, rtol=0.0, atol=tight)
        assert strict["passed"] == (strict["err_over_tol"] <= 1)
    zeros = torch.zeros(3, dtype=torch.float64)
    assert compare(zeros, zeros, 1e-3, 1e-3)["max_rel_err"] == 0.0


def test_parse_dtype_and_dtype_name():
    assert [parse_dtype(d) for d in ("fp32", "float", "half", "fp16", "bf16")] == [
        torch.float32,
        torch.float32,
        torch.float16,
        torch.float16,
        torch.bfloat16,
    ]
    assert parse_dtype(torch.bfloat16) is torch.bfloat16 and dtype_name(torch.float16) == "float16"
    assert [parse_dtype(d).itemsize for d in ("float32", "float16", "bfloat16")] == [4, 2, 2]
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        parse_dtype("int8")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


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


def test_run_gpu_script_turns_no_gpu_into_one_line():
    def no_gpu() -> int:
        raise NoGPUError("no CUDA GPU: torch.cuda.is_available() is False")

    with pytest.raises(SystemExit) as info:
        timing.run_gpu_script(no_gpu, "/somewhere/probe.py")
    assert info.value.code == "probe.py: no CUDA GPU: torch.cuda.is_available() is False"
    with pytest.raises(SystemExit) as info:
        timing.run_gpu_script(lambda: 3, "probe.py")
    assert info.value.code == 3


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_cli_without_gpu_exits_1_with_one_sentence():
    proc = subprocess.run(
        [sys.executable, str(CLI), "--routine", "scale", "--refcheck"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("oasr_benchmark.py: no CUDA GPU: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_gemm_grid_spans_the_autotuners_buckets():
    """Issue 54's grid: at least 60 shapes, every M of the issue, the d, 2d, 3d, 4d pairs, every N and K bucket."""
    from oasr.jit.gemm_tune import NK_BUCKETS, bucket_m, bucket_nk

    shapes = gemm_grid.grid()
    assert len(shapes) >= 60 and len(set(shapes)) == len(shapes)
    assert {s.m for s in shapes} >= set(gemm_grid.MS) == {1, 16, 500, 1500, 6000, 16000, 24000, 32000}
    for d in (256, 512, 768, 1024):
        assert {(s.n, s.k) for s in shapes} >= {(d, d), (2 * d, d), (3 * d, d), (4 * d, d), (d, 4 * d)}
    assert {bucket_nk(s.n) for s in shapes} | {bucket_nk(s.k) for s in shapes} == set(NK_BUCKETS)
    assert {bucket_m(s.m) for s in shapes} >= {1, 16, 512, 2048, 8192, 16384, 32768}
    assert {(6000, 768, 3072), (6000, 512, 512), (4000, 768, 768), (12000, 3072, 768)} <= set(shapes)  # issue 54's
    assert len(gemm_grid.grid(ms=(16,), ds=(256,), odd=False)) == len(gemm_grid.PAIRS)
    attention = gemm_grid.attention_shapes()
    assert {(name, t) for name, _, t, _, _ in attention} == {
        (n, t) for n in ("scores", "context") for t in (188, 250, 375, 750)
    }


def test_gemm_grid_lists_without_a_gpu_and_refuses_to_time_without_one():
    script = str(Path(gemm_grid.__file__))
    listed = subprocess.run(
        [sys.executable, script, "--list", "--m", "16"], capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0 and listed.stdout.startswith("20 gemm shapes (M x N x K): 16x256x256 ")
    if HAS_CUDA:
        return
    proc = subprocess.run([sys.executable, script, "--m", "16"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("gemm_grid.py: no CUDA GPU: ") and proc.stderr.count("\n") == 1


def test_gemm_grid_summary_reads_its_rows():
    rows = [
        {"part": "plain", "x": 1.0, "against": "cuBLAS", "fused_cost": None},
        {"part": "plain", "x": 4.0, "against": "cuBLAS", "fused_cost": None},
        {"part": "bias+silu", "x": 1.5, "against": "torch unfused", "fused_cost": 1.02},
    ]
    assert gemm_grid.summary(rows) == [
        "plain: 2 rows, geomean x 2.000 against cuBLAS, min 1.000",
        "bias+silu: 1 rows, geomean x 1.500 against torch unfused, min 1.500, fused cost max 1.020 (geomean 1.020)",
    ]


# ---------------------------------------------------------------------------
# measure() and the CLI on CPU (GPU pieces replaced)
# ---------------------------------------------------------------------------


@pytest.fixture
def cpu_harness(monkeypatch):
    """measure() on CPU: torch stands in for oasr; oasr times 0.5 ms, torch 1 ms; the copy runs at 4 TB/s.

    Returns the list of the fake timing calls: (backends, keyword arguments).
    """
    timed: list[tuple[list[str], dict]] = []

    def stand_in(torch_fn):
        def oasr_stand_in(inputs):
            return torch_fn(inputs)

        return oasr_stand_in

    for spec in OPS.values():
        monkeypatch.setitem(spec.backends, "oasr", stand_in(spec.backends["torch"]))
    monkeypatch.setattr(
        timing, "op_input_sets", lambda op, cfg, dtype: [op.make_inputs(cfg, dtype, torch.device("cpu"), 0)]
    )

    def fake_time_interleaved(fns, **kwargs):
        timed.append((list(fns), kwargs))
        results = {}
        for backend, calls in fns.items():
            for call in calls:
                call()  # every backend runs on its inputs
            oasr = calls[0].func.__name__ == "oasr_stand_in"
            results[backend] = _timing(*[0.5 if oasr else 1.0] * 3)
        return results

    monkeypatch.setattr(timing, "time_interleaved", fake_time_interleaved)
    monkeypatch.setattr(timing, "measure_copy_bandwidth", lambda: 4.0)
    return timed


def test_measure_rows_by_hand(cpu_harness):
    op = get_op("scale")
    table = measure(op, [{"n": 1_000_000}], ["float16"], check=True, rounds=2, warmup=1, iters=9, method="events")
    assert list(table.columns) == columns_for(op) == [*RESULT_COLUMNS[:4], "n", *RESULT_COLUMNS[4:]]
    assert cpu_harness == [(["oasr", "torch"], {"rounds": 2, "warmup": 1, "iters": 9, "method": "events"})]
    oasr, torch_row = table.to_dict("records")
    assert (oasr["op"], oasr["family"], oasr["backend"], torch_row["backend"]) == ("scale", "scale", "oasr", "torch")
    assert (oasr["config"], oasr["n"], oasr["dtype"]) == ("n=1000000", 1_000_000, "float16")
    assert oasr["bytes"] == 4_000_000 and oasr["flop"] == 1_000_000 and oasr["seconds"] == pytest.approx(0.5e-3)
    assert oasr["bandwidth_bytes_per_s"] == pytest.approx(4e6 / 0.5e-3)
    assert oasr["flop_per_s"] == pytest.approx(1e6 / 0.5e-3)
    assert oasr["speedup_vs_torch"] == pytest.approx(2.0) and torch_row["speedup_vs_torch"] == pytest.approx(1.0)
    assert oasr["copy_bytes_per_s"] == 4e12 and oasr["pct_of_copy"] == pytest.approx(100 * 8e9 / 4e12)
    assert (oasr["samples"], oasr["method"], oasr["launches_per_sample"], oasr["input_sets"]) == (3, "graph", 100, 4)
    assert oasr["iqr_rel"] == 0.0 and not oasr["noisy"] and oasr["p10_seconds"] == oasr["p90_seconds"]
    assert oasr["refcheck"] == torch_row["refcheck"] == "pass" and 0 < oasr["max_abs_err"] < 0.01  # fp16 rounding


@pytest.mark.parametrize(
    ("name", "bytes_per_element", "dtype"),
    [
        ("add_rms_norm", 3 * 2, "float16"),  # read x and residual, write out (+ weight)
        ("layer_norm", 2 * 4, "float32"),
        ("glu", 3 * 2, "bfloat16"),  # read 2c, write c
        ("swish", 2 * 2, "float16"),
    ],
)
def test_measure_bct_rows_stream_per_config(cpu_harness, name, bytes_per_element, dtype):
    op = get_op(name)
    batches: list[list[dict]] = []
    configs = [{"b": 2, "t": 3, "c": 64}, {"b": 1, "t": 5, "c": 128}]
    table = measure(op, configs, [dtype], check=True, on_rows=batches.append)
    assert [len(b) for b in batches] == [2, 2] and table.to_dict("records") == [*batches[0], *batches[1]]
    assert list(table.columns) == columns_for(op) and list(table.columns)[4:7] == ["b", "t", "c"]
    first = batches[0][0]
    assert (first["config"], first["b"], first["t"], first["c"]) == ("b=2,t=3,c=64", 2, 3, 64)
    assert first["bytes"] == op.work(configs[0], parse_dtype(dtype)).bytes
    assert 2 * 3 * 64 * bytes_per_element <= first["bytes"] <= 2 * 3 * 64 * bytes_per_element + 2 * 64 * 4
    assert batches[1][0]["config"] == "b=1,t=5,c=128"
    assert set(table["refcheck"]) == {"pass"} and table["speedup_vs_torch"].tolist() == [2.0, 1.0, 2.0, 1.0]


def test_measure_times_before_the_reference_check(cpu_harness, monkeypatch):
    events: list[str] = []
    real_refcheck = measure_module.refcheck

    def recording_refcheck(*args):
        events.append(f"check after {len(cpu_harness)} timings")
        return real_refcheck(*args)

    monkeypatch.setattr(measure_module, "refcheck", recording_refcheck)
    measure(get_op("scale"), [{"n": 64}, {"n": 128}], ["float32"], check=True)
    assert events == ["check after 1 timings", "check after 2 timings"]
    events.clear()
    unchecked = measure(get_op("scale"), [{"n": 64}], ["float32"])
    assert events == [] and set(unchecked["refcheck"]) == {""} and unchecked["max_abs_err"].isna().all()


def test_measure_without_torch_has_no_speedup_and_rejects_unknown_backends(cpu_harness):
    table = measure(get_op("swish"), [{"b": 1, "t": 2, "c": 8}], ["float16", "bfloat16"], ["oasr"])
    assert list(table["backend"]) == ["oasr", "oasr"] and list(table["dtype"]) == ["float16", "bfloat16"]
    assert table["speedup_vs_torch"].isna().all()
    with pytest.raises(ValueError, match="op 'swish' has no backend triton; it has oasr, torch"):
        measure(get_op("swish"), [{"b": 1, "t": 2, "c": 8}], ["float16"], ["oasr", "triton"])
    assert len(cpu_harness) == 2  # the bad call timed nothing


def test_refcheck_and_check_op_catch_an_unwritten_output(cpu_harness, monkeypatch):
    op = get_op("rms_norm")
    inputs = op.make_inputs({"b": 2, "t": 3, "c": 64}, torch.bfloat16, torch.device("cpu"), 0)
    checks = refcheck(op, inputs, ["oasr", "torch"], torch.bfloat16)
    assert set(checks) == {"oasr", "torch"} and all(c["passed"] for c in checks.values())
    table = check_op(op, [{"b": 2, "t": 3, "c": 64}, {"b": 1, "t": 1, "c": 8}], device="cpu")
    assert list(table.columns) == CORRECTNESS_COLUMNS and len(table) == 2 * 3 * 2 and table["passed"].all()
    assert set(table["config"]) == {"b=2,t=3,c=64", "b=1,t=1,c=8"}
    assert table.loc[table["dtype"] == "bfloat16", ["rtol", "atol"]].drop_duplicates().values.tolist() == [
        list(op.tolerance("bfloat16"))
    ]
    monkeypatch.setitem(op.backends, "oasr", lambda inputs: inputs["out"])  # launches nothing: NaN poison stays
    table = check_op(op, [{"b": 2, "t": 3, "c": 64}], dtypes=["float32"], device="cpu")
    assert table.set_index("backend")["passed"].to_dict() == {"oasr": False, "torch": True}


BF16_ROUNDING = 2.0**-8 + 2.0**-24
"""The relative error of one rounding to bfloat16 (8 significant bits), reached through float32 as torch converts."""


def test_refcheck_holds_each_backend_to_a_reference_that_rounds_where_it_rounds():
    # The bf16 front end on CPU, each backend's roundings simulated: torch's cuDNN path stores each conv's output
    # before adding the bias (two roundings), oasr adds it before its one rounding. The sums are float64, as the
    # references', so that no CPU's summation order (threads, oneDNN) moves a value across a rounding boundary:
    # each backend is then exactly one output rounding from its reference.
    op = get_op("conv2d_subsampling")
    bf16 = torch.bfloat16
    inputs = op.make_inputs({"b": 2, "t": 1500, "f": 80, "d": 256}, bf16, torch.device("cpu"), 0)

    def conv(x, w, b, cudnn):  # relu(conv2d(x, w) + b), stride 2, stored in bf16
        if cudnn:
            y = F.conv2d(x.double(), w.double(), stride=2).to(bf16).double() + b.double()[:, None, None]
        else:
            y = F.conv2d(x.double(), w.double(), b.double(), stride=2)
        return F.relu(y).to(bf16)

    def front_end(cudnn, weight2=lambda w: w):
        def run(i):
            y1 = conv(i["x"][:, None], i["weight1"], i["bias1"], cudnn)
            y2 = conv(y1, weight2(i["weight2"]), i["bias2"], cudnn)
            return y2.transpose(1, 2).flatten(2)

        return run

    broken = front_end(True, lambda w: w.transpose(2, 3))  # torch's arithmetic on the wrong filter taps
    backends = {"oasr": front_end(False), "torch": front_end(True), "torch_nchw": broken}
    simulated = dataclasses.replace(op, backends=backends)
    checks = refcheck(simulated, inputs, list(backends), bf16)
    passed = {name: check["passed"] for name, check in checks.items()}
    assert passed == {"oasr": True, "torch": True, "torch_nchw": False}  # the broken one fails torch's reference
    assert max(checks["oasr"]["max_rel_err"], checks["torch"]["max_rel_err"]) <= BF16_ROUNDING  # one output rounding
    # Against oasr's reference torch's extra roundings, summed by the second conv, exceed the bf16 tolerance (the
    # H200 table's "fail" at 0.022-0.025, dev/conv2d/RESULTS.md), and oasr fails torch's.
    for backend, other in (("torch", "oasr"), ("oasr", "torch")):
        swapped = dataclasses.replace(simulated, backend_references={backend: op.reference_for(other)})
        assert not refcheck(swapped, inputs, [backend], bf16)[backend]["passed"]


def test_run_one_writes_perf_lines_and_rows(cpu_harness, capsys):
    args = parse_command(["--routine", "scale", "--size", "1000000", "--backends", "cuda", "--refcheck", "--compare"])
    output = OutputWriter()
    run_one(args, output)
    oasr, torch_row = output.rows  # --compare adds torch
    assert (oasr["backend"], torch_row["backend"], output.errors) == ("oasr", "torch", 0)
    assert oasr["speedup_vs_torch"] == pytest.approx(2.0) and oasr["refcheck"] == "pass"
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[PERF]")]
    assert len(lines) == 2 and lines[0].startswith("[PERF] scale/scale") and "n=1000000" in lines[0]
    assert "2.00x torch" in lines[0] and "0.2% of copy" in lines[0] and "ref pass" in lines[0]


def test_run_one_uses_the_defaults_of_the_run_dtype(cpu_harness, monkeypatch):
    seen = []
    monkeypatch.setattr(oasr_benchmark, "measure", lambda op, configs, dtypes, *a, **kw: seen.append((configs, dtypes)))
    run_one(parse_command(["--routine", "norm", "--subroutine", "rms_norm", "--dtype", "fp32"]), OutputWriter())
    ((configs, dtypes),) = seen
    assert dtypes == ["float32"] and configs == get_op("rms_norm").benchmark_configs("float32")
    assert configs[-1]["t"] == 4096


def test_refcheck_failure_drops_the_config_unless_allowed(cpu_harness, monkeypatch, capsys):
    spec = get_op("swish")
    monkeypatch.setitem(spec.backends, "oasr", lambda inputs: spec.backends["torch"](inputs) + 1)
    argv = ["--routine", "activation", "--subroutine", "swish", "--shape", "2", "3", "8", "--refcheck"]
    output = OutputWriter()
    run_one(parse_command(argv), output)
    assert output.errors == 1 and not output.rows
    assert "[ERROR] swish b=2,t=3,c=8 float16: oasr differ from the reference" in capsys.readouterr().out
    allowed = OutputWriter()
    run_one(parse_command([*argv, "--allow_output_mismatch"]), allowed)
    assert allowed.errors == 1 and [r["refcheck"] for r in allowed.rows] == ["fail", "pass"]


def test_main_on_cpu_writes_the_csv_and_the_plot(cpu_harness, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(oasr_benchmark, "require_cuda", lambda what: None)
    csv_path, png_path = tmp_path / "out" / "norm.csv", tmp_path / "norm.png"
    argv = ["--routine", "norm", "--subroutine", "add_rms_norm", "--dtype", "bf16", "--refcheck", "--compare"]
    argv += ["--shape", "2", "3", "64", "--shape", "1", "5", "128"]
    assert main([*argv, "--output_path", str(csv_path), "--plot", str(png_path)]) == 0
    out = capsys.readouterr().out
    assert "=== norm/add_rms_norm bfloat16, CUDA graphs, 30 samples in 3 rounds ===" in out
    assert out.count("[PERF]") == 4 and f"wrote 4 rows to {csv_path}" in out and f"wrote plot {png_path}" in out
    frame = read_results(csv_path)
    assert frame["shape"].tolist() == ["[2,3,64]", "[2,3,64]", "[1,5,128]", "[1,5,128]"]
    assert frame["backend"].tolist() == ["oasr", "torch"] * 2 and set(frame["refcheck"]) == {"pass"}
    assert set(frame["family"]) == {"norm"} and set(frame["dtype"]) == {"bfloat16"}
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_main_exits_1_on_a_reference_mismatch(cpu_harness, monkeypatch, capsys):
    monkeypatch.setattr(oasr_benchmark, "require_cuda", lambda what: None)
    spec = get_op("scale")
    monkeypatch.setitem(spec.backends, "oasr", lambda inputs: spec.backends["torch"](inputs) * 2)
    assert main(["--routine", "scale", "--size", "64", "--refcheck"]) == 1
    assert "[ERROR] scale n=64 float16: oasr differ from the reference" in capsys.readouterr().out


def test_testlist_runs_share_one_csv(cpu_harness, monkeypatch, tmp_path):
    monkeypatch.setattr(oasr_benchmark, "require_cuda", lambda what: None)
    path = tmp_path / "lines.txt"
    path.write_text(
        "--routine scale --size 64 128\n--routine activation --subroutine glu --shape 2 3 8 --backends oasr\n"
    )
    assert main(["--testlist", str(path), "--output_path", str(tmp_path / "all.csv")]) == 0
    frame = read_results(tmp_path / "all.csv")
    assert frame["op"].tolist() == ["scale"] * 4 + ["glu"] and frame["shape"].tolist()[-1] == "[2,3,8]"


def test_an_interrupted_run_keeps_the_rows_so_far(cpu_harness, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(oasr_benchmark, "require_cuda", lambda what: None)

    def measure_then_interrupt(op, configs, dtypes, backends, **kwargs):
        measure(op, configs[:1], dtypes, backends, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(oasr_benchmark, "measure", measure_then_interrupt)
    csv_path = tmp_path / "partial.csv"
    assert main(["--routine", "scale", "--size", "64", "128", "--output_path", str(csv_path)]) == 130
    assert "interrupted; the rows measured so far are in the CSV" in capsys.readouterr().err
    assert read_results(csv_path)["config"].tolist() == ["n=64", "n=64"]


# ---------------------------------------------------------------------------
# Output: [PERF] lines, the CSV schema, plots
# ---------------------------------------------------------------------------


@pytest.fixture
def rows(cpu_harness) -> list[dict]:
    """Measured rows of scale at two sizes, oasr and torch, unchecked (NaN max_abs_err)."""
    return measure(get_op("scale"), [{"n": 2**20}, {"n": 2**24}], ["float16"]).to_dict("records")


def test_perf_line_fields(rows):
    line = perf_line(rows[0])
    assert line.startswith("[PERF] scale/scale") and "oasr" in line and "float16" in line and "n=1048576" in line
    assert "500.00 us" in line and "IQR  0.0%" in line and "2.00x torch" in line and "% of copy" in line
    assert "ref" not in line and "TFLOP/s" not in line and "NOISY" not in line and "p10" not in line
    verbose = perf_line({**rows[0], "refcheck": "pass", "noisy": True}, verbose=2)
    assert "ref pass" in verbose and "p10 500.00 p90 500.00 std 0.00 us" in verbose
    assert "3 samples, graph x100, 4 sets" in verbose and verbose.endswith("NOISY")
    heavy = perf_line({**rows[0], "flop": 10 * rows[0]["bytes"], "speedup_vs_torch": math.nan})
    assert "TFLOP/s" in heavy and "x torch" not in heavy  # compute-heavy: the FLOP rate; no torch row


def test_csv_is_written_as_rows_arrive_and_round_trips(rows, tmp_path, capsys):
    path = tmp_path / "out" / "results.csv"
    writer = OutputWriter(path)
    writer.write_rows(rows[:2])
    assert len(path.read_text().splitlines()) == 3  # header + 2 rows, before the run ends
    writer.write_rows(rows[2:])
    frame_back = writer.finalize()
    assert f"wrote 4 rows to {path}" in capsys.readouterr().out and len(frame_back) == 4
    frame = read_results(path)
    assert tuple(frame.columns) == CSV_COLUMNS and len(frame) == 4
    for column in RESULT_COLUMNS:
        for got, want in zip(frame[column], (r[column] for r in rows), strict=True):
            if isinstance(want, float) and math.isnan(want):
                assert math.isnan(got), column  # an empty cell
            elif isinstance(want, float):
                assert got == pytest.approx(want, rel=1e-12), column
            else:
                assert got == want, column
    assert frame["shape"].tolist() == ["[1048576]", "[1048576]", "[16777216]", "[16777216]"]
    assert frame["noisy"].tolist() == [False] * 4
    assert set(frame["gpu"]) == {"none" if not HAS_CUDA else torch.cuda.get_device_name()}
    assert frame["git_commit"].iloc[0] and frame["torch_version"].iloc[0] == torch.__version__


def test_csv_columns_are_the_result_schema_then_shape_and_provenance():
    assert (*RESULT_COLUMNS, "shape", *PROVENANCE_COLUMNS) == CSV_COLUMNS
    assert set(TEXT_COLUMNS) <= set(CSV_COLUMNS) and len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)


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


def test_plot_results_writes_a_png(rows, tmp_path):
    path = tmp_path / "bw.png"
    plot_results(pd.DataFrame(rows), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no results to plot"):
        plot_results(pd.DataFrame(columns=list(RESULT_COLUMNS)), path)


# ---------------------------------------------------------------------------
# GPU (run on the H200)
# ---------------------------------------------------------------------------


@pytest.mark.gpu
@requires_gpu
def test_cli_scale_refcheck_compare(tmp_path, capsys):
    csv_path, png_path = tmp_path / "scale.csv", tmp_path / "scale.png"
    sizes = [4096, 2**24]
    argv = ["--routine", "scale", "--subroutine", "scale", "--backends", "oasr", "torch", "--refcheck", "--compare"]
    argv += ["--size", *map(str, sizes), "--output_path", str(csv_path), "--plot", str(png_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("[PERF]")]) == 2 * len(sizes)
    frame = read_results(csv_path)
    assert len(frame) == 4 and set(frame["refcheck"]) == {"pass"} and set(frame["method"]) == {"graph"}
    assert frame["gpu_slug"].iloc[0] != "none" and (frame["copy_bytes_per_s"] > 0).all()
    assert frame.loc[frame["backend"] == "torch", "speedup_vs_torch"].tolist() == [1.0, 1.0]
    big = frame[frame["config"] == f"n={2**24}"]
    assert big["pct_of_copy"].between(30, 120).all(), big[["backend", "pct_of_copy"]]
    assert png_path.stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.slow
@requires_gpu
def test_cli_default_sweep_subprocess(tmp_path):
    csv_path = tmp_path / "sweep.csv"
    argv = ["--routine", "scale", "--subroutine", "scale", "--backends", "oasr", "torch", "--refcheck", "--compare"]
    proc = subprocess.run(
        [sys.executable, str(CLI), *argv, "--output_path", str(csv_path)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    sizes = len(get_op("scale").benchmark_configs())
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
    assert len(lines) == 2 and all(f"{routine}/{subroutine}" in line and "b=16,t=1500,c=1024" in line for line in lines)
    assert all("x torch" in line and "% of copy" in line and "ref pass" in line for line in lines)
    frame = read_results(csv_path)
    assert frame["backend"].tolist() == ["oasr", "torch"] and set(frame["refcheck"]) == {"pass"}
    assert set(frame["shape"]) == {"[16,1500,1024]"} and set(frame["config"]) == {"b=16,t=1500,c=1024"}
    assert set(frame["dtype"]) == {"bfloat16"} and set(frame["family"]) == {routine}
    work = get_op(subroutine).work({"b": 16, "t": 1500, "c": 1024}, torch.bfloat16)
    assert set(frame["bytes"]) == {work.bytes}
    assert frame["pct_of_copy"].between(1, 120).all() and frame["speedup_vs_torch"].iloc[1] == 1.0


@pytest.mark.gpu
@requires_gpu
def test_cli_profile_mode(capsys):
    pytest.importorskip("nvtx")
    assert main(["--routine", "scale", "--size", "65536", "--profile", "--target", "oasr"]) == 0
    assert "oasr@scale:oasr:n=65536,dtype=float16/" in capsys.readouterr().out


@pytest.mark.gpu
@requires_gpu
def test_measure_on_the_gpu_checks_after_timing():
    table = measure(get_op("rms_norm"), [{"b": 16, "t": 1500, "c": 1024}], ["bfloat16"], check=True)
    assert table["backend"].tolist() == ["oasr", "torch"] and set(table["refcheck"]) == {"pass"}
    assert (table["seconds"] > 0).all() and table["pct_of_copy"].between(1, 120).all()


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
    assert timing.l2_cache_bytes() > 2**20
    assert timing.host_overhead_us(lambda: torch.empty(1, device="cuda").mul_(2)) > 0
