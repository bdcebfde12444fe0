"""Time every candidate gemm/bmm configuration on the issue's shapes next to cuBLAS (through torch).

    python dev/gemm/tune.py --build [--jobs 14]      # build every module the sweep uses, in parallel
    python dev/gemm/tune.py [--csv tune.csv]         # the sweep (H100/H200): one table per op, then the best per shape
    python dev/gemm/tune.py --epilogue [--csv e.csv] # the epilogue study (below); `--build --epilogue` builds just it
    python dev/gemm/tune.py --sass                   # the study's modules' SASS: registers, CALLs, branches, MUFU ops
    python dev/gemm/tune.py --wave [--csv w.csv]     # issue 17's wave study (below); `--build --wave` builds just it

Device time is CUDA-graph replay (``REPEAT`` calls captured in one graph, the median of ``SAMPLES``
replays, per call: hot L2, no launch gaps); eager latency is host wall time per call of a loop of
eager calls (launch and Python included), reported apart. Each configuration's result is checked
against cuBLAS's before it is timed (``ok`` column). ``oasr/jit/gemm_config.py``'s rule is read off
the best configuration per shape of this sweep's H200 run (``RESULTS.md``); ``gemm_chosen`` rows show
what the rule picks. The candidates are ``candidates.py``'s.

The epilogue study: the fused bias+SiLU epilogue (CUTLASS's LinCombPerColBiasEltAct visitor tree) ran
at about half the bare GEMM's speed in the d238755 run, slowest with ping-pong. :data:`EPILOGUE_VARIANTS`
splits the cost (the bias broadcast: a synchronous gmem->smem load and a barrier per tile in
Sm90RowBroadcast; a cheap activation; SiLU) and tries fixes: ``--use_fast_math`` and a wider epilogue
sub-tile (``dev/gemm/epilogue.cu``). At 7d8b06f the sigmoid as one ``tanh.approx`` won every shape
(``RESULTS.md``, where ``silu`` is CUTLASS's IEEE-divide SiLU, ``silu_fast`` the ``__expf`` and
``__fdividef`` form and ``silu_tanh`` the tanh one): production's SiLU (``oasr::gemm::Silu``) is the tanh form
for both dtypes (``common/math.cuh``'s ``fast_silu``). Each is timed next to cuBLAS and torch.

The wave study (issue 17): 8000x256x256 (x0.94 of cuBLAS, 126 tiles of 128x128 with 4 K blocks each)
and 1500x2048x512 (x0.84, 192 tiles: 1.45 waves) were below the x0.95 target at 7d8b06f.
``WAVE_CANDIDATES`` (one-wave tiles, multicast, fewer K blocks, two CTAs per SM) are timed
there next to the rule's current picks, on :data:`WAVE_SHAPES` (the two, the shapes sharing their rule
bands, the other two targets), each first checked against a float64 reference. ``bash dev/gemm/h200.sh
wave`` builds its 11 modules, runs the tests and it: ~3 min on 16 cores.
"""

# ruff: noqa: B023  (each lambda is timed before its loop variables move on)
from __future__ import annotations

import argparse
import csv
import dataclasses
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dev.gemm.candidates import BMM_CANDIDATES, CANDIDATES, FUSED_CANDIDATES, WAVE_CANDIDATES  # (after the path)
from oasr import bmm as oasr_bmm
from oasr import gemm as oasr_gemm
from oasr import gemm_glu
from oasr.jit import gemm_config
from oasr.jit.core import JitSpec, Variant, build_in_parallel
from oasr.jit.families import BMM, GEMM
from profiling.compare import stand_in

gemm_module = sys.modules["oasr.gemm"]
bmm_module = sys.modules["oasr.bmm"]
C = gemm_config.GemmConfig
HERE = Path(__file__).resolve().parent

GEMM_SHAPES = [  # (M, N, K): the targets, then upstream Oasr's gemm list (benchmarks/routines/gemm.py)
    (8000, 256, 256),
    (8000, 1024, 256),
    (8000, 256, 1024),
    (1500, 2048, 512),
    (1500, 512, 2048),
    (16000, 512, 512),
    (24000, 2048, 512),
    (16000, 256, 256),
    (16000, 2048, 256),
    (16000, 256, 2048),
    (16000, 2048, 512),
    (16000, 512, 2048),
    (32000, 256, 256),
    (32000, 512, 512),
]
FUSED_SHAPES = [(8000, 256, 256), (8000, 1024, 256), (1500, 2048, 512), (16000, 512, 512)]
GLU_SHAPES = [(16000, 512, 256), (8000, 2048, 512)]  # (M, 2N, K): the Conformer's pointwise conv before GLU
BMM_SHAPES = [  # (batch, M, N, K, layout): scores (nt, keys K-major) and context (nn, values N-major)
    (64, 375, 375, 64, "nt"),
    (64, 376, 376, 64, "nt"),
    (64, 375, 64, 375, "nn"),
    (256, 200, 200, 64, "nt"),
    (512, 400, 400, 64, "nt"),
    (512, 200, 200, 64, "nt"),
    (64, 200, 200, 64, "nt"),
    (8, 375, 375, 64, "nt"),  # one wave of 128x128 tiles (72)
    (4, 375, 375, 64, "nt"),  # under half a wave (36)
    (8, 375, 64, 375, "nn"),
]


@dataclasses.dataclass(frozen=True)
class EpilogueVariant:
    """One row of the epilogue study: a production epilogue, with or without a bias, built as it is or
    with extra nvcc flags (``dev_source``: from ``dev/gemm/epilogue.cu`` instead of ``csrc/gemm.cu``)."""

    name: str
    epilogue: str
    bias: bool
    flags: tuple[str, ...] = ()
    dev_source: bool = False
    ping_pong_too: bool = False  # also timed with 128x128 ping-pong tiles


EPILOGUE_VARIANTS = (
    EpilogueVariant("plain", "plain", False, ping_pong_too=True),  # the bare CUTLASS GEMM
    EpilogueVariant("bias", "bias", True),  # + the bias broadcast alone
    EpilogueVariant("relu", "relu", True),  # + a one-instruction activation
    EpilogueVariant("silu", "silu", True, ping_pong_too=True),  # production: + one tanh.approx an element
    EpilogueVariant("silu_nobias", "silu", False, ping_pong_too=True),  # a null bias: no bias loads
    EpilogueVariant("gelu_tanh", "gelu_tanh", True),  # one tanh.approx an element too
    EpilogueVariant("silu_fastmath", "silu", True, ("--use_fast_math",), ping_pong_too=True),
    EpilogueVariant("plain_epi64", "plain", False, ("-DOASR_GEMM_DEV_EPI_TILE_N=64",), True),
    EpilogueVariant("silu_epi64", "silu", True, ("-DOASR_GEMM_DEV_EPI_TILE_N=64",), True),
)
EPILOGUE_CONFIGS = (gemm_config.FUSED_NARROW, gemm_config.FUSED_WIDE)  # the fused rule's CUTLASS picks


def epilogue_spec(variant: EpilogueVariant, config: gemm_config.GemmConfig) -> JitSpec:
    """The module of ``variant`` at ``config`` (bf16); a production one is the family's own module."""
    base = gemm_config.gemm_variant("bfloat16", variant.epilogue, config)
    if variant.flags:
        base = Variant(name=f"{base.name}_dev_{variant.name}", cuda_cflags=(*base.cuda_cflags, *variant.flags))
    spec = GEMM.jit_spec(variant=base)
    if variant.dev_source:
        spec = dataclasses.replace(spec, sources=[HERE / "epilogue.cu", *spec.sources[1:]])
    return spec


def epilogue_cases() -> list[tuple[EpilogueVariant, gemm_config.GemmConfig]]:
    cases = [(v, c) for c in EPILOGUE_CONFIGS for v in EPILOGUE_VARIANTS]
    return cases + [(v, gemm_config.MANY_WAVES) for v in EPILOGUE_VARIANTS if v.ping_pong_too]


WAVE_SHAPES = [(8000, 256, 256), (1500, 2048, 512), (8000, 256, 1024), (8000, 1024, 256), (16000, 512, 512)]
"""Issue 17's two shapes, 8000x256x1024 (in 8000x256x256's band of the rule: one wave of 128x128 tiles)
and the other two targets (where a new pick must not lose)."""


def wave_configs(fused: bool = False) -> list[gemm_config.GemmConfig]:
    """The rule's current picks for :data:`WAVE_SHAPES` (``fused``: for a bias + SiLU), then
    ``WAVE_CANDIDATES`` (``fused``: and :data:`FUSED_CANDIDATES`)."""
    picks = [gemm_config.choose(m, n, k, fused=fused) for m, n, k in WAVE_SHAPES]
    return list(dict.fromkeys([*picks, *WAVE_CANDIDATES, *(FUSED_CANDIDATES if fused else ())]))


REPEAT, SAMPLES = 20, 15


def sweep_specs() -> list[JitSpec]:
    """The sweep's modules: every candidate (bf16), bare, with bias + SiLU and as bmm of both layouts, and the rule's
    picks (the ``gemm_chosen`` rows)."""
    gv, bv = gemm_config.gemm_variant, gemm_config.bmm_variant
    specs = [GEMM.jit_spec(variant=gv("bfloat16", "plain", c)) for c in (*CANDIDATES, *gemm_config.PICKS)]
    specs += [GEMM.jit_spec(variant=gv("bfloat16", "silu", c)) for c in FUSED_CANDIDATES]
    specs += [GEMM.jit_spec(variant=gv("bfloat16", "glu", gemm_config.DIRECT))]
    specs += [BMM.jit_spec(variant=bv("bfloat16", nn, c)) for nn in (False, True) for c in BMM_CANDIDATES]
    return specs


def specs_to_build(epilogue_only: bool, wave_only: bool = False, fused: bool = False) -> list[JitSpec]:
    """The modules of the sweep (unless ``epilogue_only``) and of the epilogue study, once each; or (``wave_only``)
    just the wave study's (``fused``: its bias + SiLU modules)."""
    if wave_only:
        epilogue = "silu" if fused else "plain"
        return [GEMM.jit_spec(variant=gemm_config.gemm_variant("bfloat16", epilogue, c)) for c in wave_configs(fused)]
    specs = [] if epilogue_only else sweep_specs()
    specs += [epilogue_spec(v, c) for v, c in epilogue_cases()]
    return list({spec.name: spec for spec in specs}.values())


def device_us(fn: Callable[[], object]) -> float:
    """Per-call device time: REPEAT calls in one CUDA graph, median of SAMPLES replays."""
    fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPEAT):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(SAMPLES):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / REPEAT)
    return statistics.median(times)


def eager_us(fn: Callable[[], object], calls: int = 200) -> float:
    """Host wall time per eager call (launch, Python and argument checks included)."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / calls


def close(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return bool(torch.allclose(actual.float(), expected.float(), rtol=2e-2, atol=2e-2))


def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)


def write_csv(rows: list[dict], csv_path: Path | None) -> None:
    """``rows`` (one dict per timed configuration) into ``csv_path``, when one is given."""
    if csv_path is not None:
        with open(csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {csv_path}")


def sweep(csv_path: Path | None) -> None:
    rows: list[dict[str, object]] = []
    best: dict[tuple, dict[str, object]] = {}

    def record(op: str, shape: tuple, config: str, us: float, cublas: float, ok: bool, flop: float, eager=float("nan")):
        row = {
            "op": op,
            "shape": "x".join(map(str, shape)),
            "config": config,
            "device_us": round(us, 3),
            "cublas_us": round(cublas, 3),
            "speedup_vs_cublas": round(cublas / us, 3),
            "tflops": round(flop / us / 1e6, 1),
            "eager_us": round(eager, 2),
            "ok": ok,
        }
        rows.append(row)
        print(
            f"{op:<10} {row['shape']:<18} {config:<36} {us:9.2f} us  cuBLAS {cublas:8.2f} us  "
            f"x{row['speedup_vs_cublas']:<6} {row['tflops']:7.1f} TF/s  eager {row['eager_us']:8.2f} us  "
            f"{'ok' if ok else 'WRONG'}",
            flush=True,
        )
        key = (op, shape)
        if ok and (key not in best or us < best[key]["device_us"]):
            best[key] = row

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    for m, n, k in GEMM_SHAPES:
        x, w = randn(m, k), randn(n, k, scale=k**-0.5)
        expected = F.linear(x, w)
        cublas = device_us(lambda: F.linear(x, w))
        for config in CANDIDATES:
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            gemm_module._linear(x, w, None, None, out, config)
            us = device_us(lambda: gemm_module._linear(x, w, None, None, out, config))
            record("gemm", (m, n, k), config.name, us, cublas, close(out, expected), 2.0 * m * n * k)
        chosen = gemm_config.choose(m, n, k)  # the rule's pick, through the public op (eager latency too)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        us, eager = device_us(lambda: oasr_gemm(x, w, out=out)), eager_us(lambda: oasr_gemm(x, w, out=out))
        record("gemm_chosen", (m, n, k), chosen.name, us, cublas, close(out, expected), 2.0 * m * n * k, eager)
    for m, n, k in FUSED_SHAPES:
        x, w, b = randn(m, k), randn(n, k, scale=k**-0.5), randn(n)
        expected = F.silu(F.linear(x, w, b))
        bare = device_us(lambda: F.linear(x, w))
        torch_fused = device_us(lambda: F.silu(F.linear(x, w, b)))
        print(f"torch bias+silu {m}x{n}x{k}: {torch_fused:.2f} us device (bare cuBLAS {bare:.2f} us)", flush=True)
        for config in FUSED_CANDIDATES:
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            gemm_module._linear(x, w, b, "silu", out, config)
            us = device_us(lambda: gemm_module._linear(x, w, b, "silu", out, config))
            record("bias_silu", (m, n, k), config.name, us, bare, close(out, expected), 2.0 * m * n * k)
    for m, n2, k in GLU_SHAPES:
        x, w, b = randn(m, k), randn(n2, k, scale=k**-0.5), randn(n2)
        expected = F.glu(F.linear(x, w, b), -1)
        out = torch.empty(m, n2 // 2, dtype=torch.bfloat16, device="cuda")
        gemm_glu(x, w, b, out=out)
        bare = device_us(lambda: F.linear(x, w))
        us = device_us(lambda: gemm_glu(x, w, b, out=out))
        eager = eager_us(lambda: gemm_glu(x, w, b, out=out))
        record("gemm_glu", (m, n2, k), "direct (one launch)", us, bare, close(out, expected), 2.0 * m * n2 * k, eager)
    for batch, m, n, k, layout in BMM_SHAPES:
        a = randn(batch, m, k, scale=k**-0.25)
        b = randn(batch, n, k, scale=k**-0.25).transpose(1, 2) if layout == "nt" else randn(batch, k, n)
        expected = torch.bmm(a, b)
        cublas = device_us(lambda: torch.bmm(a, b))
        for config in BMM_CANDIDATES:
            out = torch.empty(batch, m, n + (-n) % 8, dtype=torch.bfloat16, device="cuda")[..., :n]
            bmm_module._product(a, b, out, config)
            us = device_us(lambda: bmm_module._product(a, b, out, config))
            record(
                f"bmm_{layout}",
                (batch, m, n, k),
                config.name,
                us,
                cublas,
                close(out, expected),
                2.0 * batch * m * n * k,
            )

    print("\nEager latency (host wall time per call, choose()'s configuration) vs torch:", flush=True)
    for m, n, k in FUSED_SHAPES:
        x, w, b = randn(m, k), randn(n, k, scale=k**-0.5), randn(n)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        print(
            f"  gemm+bias+silu {m}x{n}x{k}: oasr {eager_us(lambda: oasr_gemm(x, w, b, 'silu', out=out)):.2f} us, "
            f"torch {eager_us(lambda: F.silu(F.linear(x, w, b))):.2f} us",
            flush=True,
        )
    q, kk = randn(64, 375, 64, scale=0.35), randn(64, 375, 64, scale=0.35)
    scores = oasr_bmm(q, kk.transpose(1, 2))
    print(
        f"  bmm scores 64x375x375x64: oasr {eager_us(lambda: oasr_bmm(q, kk.transpose(1, 2), out=scores)):.2f} us, "
        f"torch {eager_us(lambda: torch.bmm(q, kk.transpose(1, 2))):.2f} us",
        flush=True,
    )

    print("\nBest configuration per shape (device time; speedup over cuBLAS):")
    for (op, _), row in best.items():
        print(
            f"  {op:<10} {row['shape']:<18} {row['config']:<36} {row['device_us']:9.2f} us  x{row['speedup_vs_cublas']}"
        )
    write_csv(rows, csv_path)


def epilogue_study(csv_path: Path | None) -> None:
    """Every :data:`EPILOGUE_VARIANTS` row at every fused shape, next to bare cuBLAS and torch's bias+SiLU."""
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    modules = {}
    for variant, config in epilogue_cases():
        spec = epilogue_spec(variant, config)
        modules[(variant.name, config)] = spec.build_and_load()
    rows = []
    for m, n, k in FUSED_SHAPES:
        x, w, b = randn(m, k), randn(n, k, scale=k**-0.5), randn(n)
        cublas = device_us(lambda: F.linear(x, w))
        torch_fused = device_us(lambda: F.silu(F.linear(x, w, b)))
        print(f"\n{m}x{n}x{k}: cuBLAS {cublas:.2f} us, torch bias+silu {torch_fused:.2f} us", flush=True)
        for variant, config in epilogue_cases():
            bias = b if variant.bias else None
            act = None if variant.epilogue in ("plain", "bias") else variant.epilogue
            expected = gemm_module._TORCH_ACT[act](F.linear(x, w, bias))
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            with stand_in(GEMM, modules[(variant.name, config)]):
                gemm_module._linear(x, w, bias, act, out, config)
                ok = close(out, expected)
                us = device_us(lambda: gemm_module._linear(x, w, bias, act, out, config))
            row = {
                "shape": f"{m}x{n}x{k}",
                "config": config.name,
                "variant": variant.name,
                "device_us": round(us, 3),
                "cublas_us": round(cublas, 3),
                "torch_bias_silu_us": round(torch_fused, 3),
                "speedup_vs_cublas": round(cublas / us, 3),
                "ok": ok,
            }
            rows.append(row)
            print(
                f"  {config.name:<34} {variant.name:<14} {us:8.2f} us  x{row['speedup_vs_cublas']:<6} "
                f"{'ok' if ok else 'WRONG'}",
                flush=True,
            )
    write_csv(rows, csv_path)


def float64_ok(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> bool:
    """``out`` against ``x @ w.T`` in float64 (with ``bias``: SiLU of it plus the bias), at tests/conftest.py's bf16
    gemm tolerance (O(1) outputs)."""
    rtol = 1e-2
    atol = rtol / 4 + x.shape[-1] * 2.0**-20
    expected = x.double() @ w.double().T
    if bias is not None:
        expected = F.silu(expected + bias.double())
    return bool(torch.allclose(out.double(), expected, rtol=rtol, atol=atol))


def kernel_names(fn: Callable[[], object]) -> str:
    """The CUDA kernels one call of ``fn`` launches (torch's profiler), or why they cannot be listed."""
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            fn()
            torch.cuda.synchronize()
        cuda = torch.autograd.DeviceType.CUDA
        return ", ".join(sorted({e.key for e in profile.key_averages() if e.device_type == cuda})) or "none seen"
    except Exception as exc:  # the kernel names are context, not a result: report and go on
        return f"unavailable ({type(exc).__name__}: {exc})"


def wave_study(csv_path: Path | None, fused: bool = False) -> None:
    """Every :func:`wave_configs` configuration on every :data:`WAVE_SHAPES` shape next to cuBLAS (``fused``: with a
    bias and SiLU, still against bare cuBLAS, the issue's reference for a fused epilogue); a configuration whose
    output fails the float64 check (or whose launch fails) is reported WRONG and not timed."""
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    epilogue, activation = ("silu", "silu") if fused else ("plain", None)
    configs = []
    for config in wave_configs(fused):  # load every module first: one that fails to build is named and left out
        try:
            GEMM.module(gemm_config.gemm_variant("bfloat16", epilogue, config))
            configs.append(config)
        except Exception as exc:
            print(f"{config.name}: FAILED to build or load, left out: {exc}", flush=True)
    rows = []
    for m, n, k in WAVE_SHAPES:
        x, w = randn(m, k), randn(n, k, scale=k**-0.5)
        bias = randn(n) if fused else None
        cublas = device_us(lambda: F.linear(x, w))
        pick = gemm_config.choose(m, n, k, fused=fused)
        tiles = -(-m // 128) * -(-n // 128)
        print(f"\n{m}x{n}x{k}: cuBLAS {cublas:.2f} us, {tiles} tiles of 128x128, the rule picks {pick.name}")
        if fused:
            print(f"  torch's bias + SiLU: {device_us(lambda: F.silu(F.linear(x, w, bias))):.2f} us")
        print(f"  cuBLAS runs: {kernel_names(lambda: F.linear(x, w))}", flush=True)
        for config in configs:
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            try:
                gemm_module._linear(x, w, bias, activation, out, config)
                ok = float64_ok(out, x, w, bias)
            except Exception as exc:  # a launch CUTLASS refuses: named, counted WRONG, the study goes on
                print(f"  {config.name}: {type(exc).__name__}: {exc}", flush=True)
                ok = False
            us = device_us(lambda: gemm_module._linear(x, w, bias, activation, out, config)) if ok else float("nan")
            row = {
                "shape": f"{m}x{n}x{k}",
                "config": config.name,
                "picked": config == pick,
                "device_us": round(us, 3),
                "cublas_us": round(cublas, 3),
                "speedup_vs_cublas": round(cublas / us, 3),
                "ok": ok,
            }
            rows.append(row)
            print(
                f"  {config.name:<36} {us:8.2f} us  x{row['speedup_vs_cublas']:<6} "
                f"{'ok' if ok else 'WRONG'}{'  (the pick)' if config == pick else ''}",
                flush=True,
            )

    def describe(row: dict | None) -> str:
        return f"{row['config']:<36} x{row['speedup_vs_cublas']:<6}" if row else f"{'(none)':<44}"

    print("\nBest per shape (speedup over cuBLAS; the rule's pick beside it):")
    for shape in dict.fromkeys(row["shape"] for row in rows):
        timed = [row for row in rows if row["shape"] == shape and row["ok"]]
        best = min(timed, key=lambda row: row["device_us"], default=None)
        pick = next((row for row in rows if row["shape"] == shape and row["picked"]), None)
        print(f"  {shape:<16} best {describe(best)}  pick {describe(pick)}")
    wrong = [f"{row['shape']} {row['config']}" for row in rows if not row["ok"]]
    print(f"WRONG (not timed): {', '.join(wrong)}" if wrong else "every configuration passed the float64 check")
    write_csv(rows, csv_path)


def cuobjdump() -> str:
    """The cuobjdump of the toolkit on PATH, or of the pip CUDA wheels beside torch."""
    found = shutil.which("cuobjdump") or next(
        (str(p) for p in Path(torch.__file__).parents[1].glob("nvidia/cu*/bin/cuobjdump")), None
    )
    if found is None:
        raise SystemExit("dev/gemm/tune.py --sass: no cuobjdump; put the CUDA toolkit's bin/ on PATH")
    return found


def sass_report(jobs: int) -> None:
    """Per epilogue-study module with 128x128 tiles (built here if needed: no GPU): registers, stack and
    the SASS counts that tell the epilogues apart (CALL: a subroutine such as an IEEE divide's slow path;
    BSSY: a convergence barrier around a branch; MUFU: special-function ops)."""
    tool = cuobjdump()
    cases = [(v, c) for v, c in epilogue_cases() if c in (gemm_config.FUSED_NARROW, gemm_config.MANY_WAVES)]
    specs = [epilogue_spec(v, c) for v, c in cases]
    if build_in_parallel(list({spec.name: spec for spec in specs}.values()), jobs):
        raise SystemExit(1)
    print(f"{'module':<72} {'REG':>4} {'STACK':>5} {'instr':>6} {'CALL':>5} {'BSSY':>5}  MUFU")
    for (variant, config), spec in zip(cases, specs, strict=True):
        library = str(spec.library_path)
        usage = subprocess.run([tool, "--dump-resource-usage", library], capture_output=True, text=True).stdout
        sass = subprocess.run([tool, "-sass", library], capture_output=True, text=True).stdout
        registers = max(map(int, re.findall(r"REG:(\d+)", usage)), default=-1)
        stack = max(map(int, re.findall(r"STACK:(\d+)", usage)), default=-1)
        instructions = len(re.findall(r"^\s+/\*[0-9a-f]+\*/", sass, re.M))
        mufu: dict[str, int] = {}
        for op in re.findall(r"MUFU\.(\w+)", sass):
            mufu[op] = mufu.get(op, 0) + 1
        print(
            f"{variant.name + ' ' + config.name:<72} {registers:>4} {stack:>5} {instructions:>6} "
            f"{len(re.findall(r' CALL', sass)):>5} {len(re.findall(r'BSSY', sass)):>5}  "
            f"{' '.join(f'{k}:{v}' for k, v in sorted(mufu.items())) or '-'}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="build every module the sweep uses, then stop")
    parser.add_argument("--jobs", type=int, default=8, help="parallel builds (each ~1.8 GB, one core)")
    parser.add_argument("--epilogue", action="store_true", help="the epilogue study instead of the sweep")
    parser.add_argument("--wave", action="store_true", help="issue 17's wave study instead of the sweep")
    parser.add_argument("--fused", action="store_true", help="with --wave: its configurations with a bias + SiLU")
    parser.add_argument("--sass", action="store_true", help="the epilogue study's SASS counts (no GPU needed)")
    parser.add_argument("--csv", type=Path, help="also write the sweep's rows here")
    args = parser.parse_args()
    if args.build:
        if build_in_parallel(specs_to_build(args.epilogue, args.wave, args.fused), args.jobs):
            raise SystemExit(1)
    elif args.sass:
        sass_report(args.jobs)
    elif not torch.cuda.is_available():
        raise SystemExit("dev/gemm/tune.py: the sweeps need an sm90 GPU (H100/H200); `--build` runs anywhere.")
    elif args.epilogue:
        epilogue_study(args.csv)
    elif args.wave:
        wave_study(args.csv, args.fused)
    else:
        sweep(args.csv)


if __name__ == "__main__":
    main()
