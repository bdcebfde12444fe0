"""Time every candidate gemm/bmm configuration on the issue's shapes next to cuBLAS (through torch).

    python dev/gemm/tune.py --build [--jobs 14]      # build every module the tests and the sweep use, in parallel
    python dev/gemm/tune.py [--csv tune.csv]         # the sweep (H100/H200): one table per op, then the best per shape

Device time is CUDA-graph replay (``REPEAT`` calls captured in one graph, the median of ``SAMPLES``
replays, per call: hot L2, no launch gaps); eager latency is host wall time per call of a loop of
eager calls (launch and Python included), reported apart. Each configuration's result is checked
against cuBLAS's before it is timed (``ok`` column). ``oasr/jit/gemm_config.py``'s rule is read off
the best configuration per shape of this sweep's H200 run (``dev/gemm/results/tune_h200.txt``);
``gemm_chosen`` rows show what the rule picks.
"""

# ruff: noqa: B023  (each lambda is timed before its loop variables move on)
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from oasr import bmm as oasr_bmm
from oasr import gemm as oasr_gemm
from oasr import gemm_glu
from oasr.jit import gemm_config
from oasr.jit.families import BMM, GEMM

gemm_module = sys.modules["oasr.gemm"]
bmm_module = sys.modules["oasr.bmm"]
C = gemm_config.GemmConfig

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
FUSED_CANDIDATES = (
    C(64, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "cooperative"),
    C(128, 256, 64, 2, 1, "cooperative"),
    C(128, 256, 64, 1, 1, "cooperative"),
    C(128, 128, 64, 2, 1, "cooperative"),
    C(128, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "nonpersistent"),
)
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
BMM_CANDIDATES = (
    C(64, 128, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "cooperative"),
    C(64, 64, 64, 1, 1, "pingpong"),
    C(128, 128, 64, 1, 1, "pingpong"),
    C(64, 128, 64, 1, 1, "nonpersistent"),
    C(128, 128, 64, 1, 1, "nonpersistent"),
)
REPEAT, SAMPLES = 20, 15


def variants_to_build() -> list[tuple[object, object]]:
    """(family, variant) of every module this sweep and tests/test_gemm.py, tests/test_bmm.py use."""
    gv, bv = gemm_config.gemm_variant, gemm_config.bmm_variant
    dtypes = gemm_config.DTYPES
    wanted = [(GEMM, gv("bfloat16", "plain", c)) for c in gemm_config.CANDIDATES]
    wanted += [(GEMM, gv("bfloat16", "silu", c)) for c in FUSED_CANDIDATES]
    wanted += [(GEMM, gv(d, "plain", c)) for d in dtypes for c in gemm_config.PICKS]
    wanted += [(GEMM, gv(d, e, c)) for d in dtypes for e in gemm_config.EPILOGUES[1:] for c in gemm_config.FUSED_PICKS]
    wanted += [(BMM, bv("bfloat16", nn, c)) for nn in (False, True) for c in BMM_CANDIDATES]
    wanted += [(BMM, bv(d, nn, c)) for d in dtypes for nn in (False, True) for c in gemm_config.PICKS]
    unique = {}
    for family, variant in wanted:
        unique[(family.name, variant.name)] = (family, variant)
    return list(unique.values())


def build(jobs: int) -> None:
    todo = variants_to_build()
    print(f"building {len(todo)} modules, {jobs} at a time", flush=True)
    start = time.perf_counter()

    def one(item):
        family, variant = item
        t = time.perf_counter()
        info = family.jit_spec(variant=variant).build()
        how = "cached" if info.cache_hit else "built"
        return f"{family.name}_{variant.name}: {how} in {time.perf_counter() - t:.0f} s"

    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for item, future in zip(todo, [pool.submit(one, item) for item in todo], strict=True):
            try:
                print(future.result(), flush=True)
            except Exception as exc:  # report every failure, then fail
                failures += 1
                print(f"{item[0].name}_{item[1].name}: FAILED\n{exc}", flush=True)
    print(f"done in {time.perf_counter() - start:.0f} s, {failures} failed", flush=True)
    if failures:
        raise SystemExit(1)


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
        for config in gemm_config.CANDIDATES:
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
        record("gemm_glu", (m, n2, k), "choose + oasr.glu", us, bare, close(out, expected), 2.0 * m * n2 * k, eager)
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
    if csv_path is not None:
        with open(csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {csv_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--build", action="store_true", help="build every module the sweep and the tests use, then stop"
    )
    parser.add_argument("--jobs", type=int, default=8, help="parallel builds (each ~1.8 GB, one core)")
    parser.add_argument("--csv", type=Path, help="also write the sweep's rows here")
    args = parser.parse_args()
    if args.build:
        build(args.jobs)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("dev/gemm/tune.py: the sweep needs an sm90 GPU (H100/H200); `--build` runs anywhere.")
        sweep(args.csv)


if __name__ == "__main__":
    main()
