"""Check and time the conv1d kernel variants against production and torch (one H200 run, issue 16).

    python dev/conv1d/bench.py --all --deadline-s 420 --out $OUT   # everything below (estimate: 4-5 min, H200)
    python dev/conv1d/bench.py --sections sweep --variants prod,ffma

Variants (VARIANTS): ``prod`` is the family's module as built from ``include/``; the others build
the same sources (``csrc/conv1d.cu``) against a copy of ``include/`` with constants rewritten by
``dev/tune_kernels.py``'s ``rewrite``: ``ffma`` turns the tensor-core kernel off
(``oasr/conv1d/tensor_core.cuh``'s ``kMaxChunks = 0``), so 16-bit calls run the shared-memory FFMA kernel
that was production before it; ``s2`` stages two tiles instead of three; each ``variants/NAME.patch``
(a diff of ``include/``, applied by ``dev/tune_kernels.py``'s ``patched_include``) is variant NAME; the
``diag-*`` patches leave a part of the kernel out (wrong outputs: time them with ``--sections sweep``).
Each is its own JIT module ``conv1d_<name>``, swapped in as the family's module while its calls are
warmed up and captured (``with_module``), so every form goes through the public API
(``oasr/conv1d.py``). The variants live side by side in one process, so they are built with
``-fno-gnu-unique``: otherwise a static of an inline launcher (the occupancy cache) is one GNU-unique
symbol for all of them; ``build`` stops when a variant module defines such a symbol.

Earlier tensor-core forms (one tile per block, no copies in flight) lost to the FFMA kernel (``RESULTS.md``);
their code is in git at 7d8b06f and 0c6edf8.

Sections:

* ``check``: every variant against float64 references on fresh random data, outputs poisoned
  with NaN: each dtype, K = 15 / 31 (the staged kernel) and 5 / 63 (direct kernels), padding forms,
  channel counts off the 64-channel tile, masks, strided views, streaming steps of 1 .. 200
  frames (fused and not) against one causal call, with the state checked exactly. Each
  variant runs in a process of its own (all at once), so a kernel fault cannot end the run;
  a variant that fails or crashes is named with the case and not timed.
* ``sweep``: bf16, "same" padding, bias, on upstream Oasr's depthwise shapes and the issue's
  (16, 1500, C) cases (``profiling.harness.ops.conv1d.CONV1D_SWEEP``): us per variant, torch
  on the pre-transposed NCT tensor and torch from channels-last with the transposes, the
  speedup over each, the share of the measured copy bandwidth (the op's minimal bytes); and a
  same-size copy of the input (torch's, and ``oasr.scale``'s) in the same run, the speedups a kernel
  taking that time would reach.
* ``fused``: plain + bias, + SiLU, mask + SiLU (10 % padded frames) per variant, and the ratios
  to plain (issue target: within 1.05x); bf16, or each of ``--fused-dtypes`` (float32 runs the FFMA
  kernel of ``conv1d/staged.cuh``).
* ``step``: the streaming step (conv + state update) at L = 16, 32, 64 frames of C = 512 against
  torch's non-streaming ``F.silu(F.conv1d(...))`` on the same chunk (target: >= 1x).
* ``ncu``: Nsight Compute's warp-state, scheduler and memory sections of the variants' kernels on
  the two headline shapes (text in ``ncu.txt``), when ``ncu`` is installed.
* ``sanitize``: compute-sanitizer memcheck and racecheck over ``dev/conv1d/sanitize.py`` with
  the production module (exit 0 and "0 errors" expected).

Timing: CUDA-graph replay with input sets rotated past the L2 (``profiling.harness.timing``),
backends in turn. A variant whose call or timing fails on a shape gets a FAIL row with its
error (in the CSV: ``us`` NaN, ``ok`` False, ``error``) and the section goes on with the others.
Each section prints its wall time. With ``--out DIR``: ``bench.txt`` (everything printed),
``bench.csv`` (one row per timing) and ``ncu.txt``, rewritten after every section.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr.conv1d as conv1d
from dev.tune_kernels import Edit, patched_include, rewrite
from oasr.jit.core import gen_jit_spec
from oasr.jit.families import CONV1D
from oasr.scale import scale
from profiling.compare import stand_in, with_module
from profiling.harness.ops import parse_dtype
from profiling.harness.ops.conv1d import CONV1D_SWEEP, TOLERANCES
from profiling.harness.ops.conv1d import DEPTHWISE_CONV1D as op
from profiling.harness.timing import measure_copy_bandwidth, rotation_sets, time_interleaved
from profiling.provenance import git_commit

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TENSOR = "conv1d/tensor_core.cuh"
VARIANTS: dict[str, list[Edit] | Path | None] = {
    "prod": None,
    "ffma": [(TENSOR, "kMaxChunks", "0")],
    "s2": [(TENSOR, "kStages", "2")],
    **{patch.stem: patch for patch in sorted((HERE / "variants").glob("*.patch"))},
}
"""Production (None), constant edits of a copy of include/, or a diff of include/ (``variants/NAME.patch``)."""
HEADLINE = ((16, 1500, 256, 31), (16, 1500, 512, 15))
NCU_SHAPES = (*HEADLINE, (1, 16, 512, 31))
"""ncu's shapes: the headline ones and one tile per block (the streaming step's latency)."""
NCU_SECTIONS = (
    "SpeedOfLight",
    "WarpStateStats",
    "SchedulerStats",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "SourceCounters",
)

LOG: list[str] = []
ROWS: list[dict[str, Any]] = []
DEADLINE = [float("inf")]  # time.monotonic() past which nothing starts and subprocesses are cut (--deadline-s)


def seconds_left(cap: float) -> float:
    """A subprocess's timeout: ``cap`` or what is left before the deadline, whichever is less (at least 1 s)."""
    return max(1.0, min(cap, DEADLINE[0] - time.monotonic()))


def say(line: str = "") -> None:
    print(line, flush=True)
    LOG.append(line)


# ---------------------------------------------------------------------------
# Building the variants
# ---------------------------------------------------------------------------


def variant_spec(name: str, edits: list[Edit] | Path):
    """The JIT spec of a variant: the family's sources against a copy of include/ with `edits` made (or the
    patch applied)."""
    if isinstance(edits, Path):
        root = patched_include(edits)[1]
    else:
        root = Path(tempfile.gettempdir()) / "oasr-variants" / f"conv1d_{name}" / "include"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(ROOT / "include", root)
        for edit in edits:
            path, text = rewrite(root, edit)
            path.write_text(text)
    return gen_jit_spec(f"conv1d_{name}", CONV1D.jit_spec().sources, include_dir=root)


def build(names: list[str]) -> dict[str, Any]:
    """Each variant's loaded module, built in parallel (nvcc runs in subprocesses)."""
    specs = {}
    for name in names:
        edits = VARIANTS[name]
        specs[name] = CONV1D.jit_spec() if edits is None else variant_spec(name, edits)
    with ThreadPoolExecutor(max_workers=8) as pool:
        modules = list(pool.map(lambda spec: spec.build_and_load(), specs.values()))
    shared = unique_symbols([spec.library_path for name, spec in specs.items() if VARIANTS[name] is not None])
    if shared:
        raise RuntimeError(
            f"variant modules define process-wide (GNU unique) symbols, e.g. {shared[0]}: variants loaded together "
            "would share them (oasr.jit.core.COMMON_NVCC_FLAGS builds every module with -fno-gnu-unique)"
        )
    return dict(zip(names, modules, strict=True))


def unique_symbols(libraries: list[Path]) -> list[str]:
    """The GNU-unique symbols (``nm`` type ``u``) that the libraries define; [] without ``nm``.

    ld.so binds such a symbol once per process even across RTLD_LOCAL modules, so a static of an
    inline launcher (a "done" flag, an occupancy cache) of one variant would be every variant's.
    """
    exe = shutil.which("nm")
    if exe is None:
        return []
    found = []
    for library in libraries:
        run = subprocess.run([exe, "-D", "-C", "--defined-only", str(library)], capture_output=True, text=True)
        found += [line.split(" ", 2)[2] for line in run.stdout.splitlines() if line.split(" ")[1:2] == ["u"]]
    return found


def through(module: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run with ``module`` as the family's module (for warm-up and graph capture)."""
    return partial(with_module, CONV1D, module, fn)


# ---------------------------------------------------------------------------
# Correctness: float64 references, poisoned outputs
# ---------------------------------------------------------------------------


def reference(x, weight, bias=None, padding=0, activation=None, mask=None) -> torch.Tensor:
    left, right = (padding, padding) if isinstance(padding, int) else padding
    xd = x.double()
    if mask is not None:
        xd = xd * mask.reshape(x.shape[0], x.shape[1], 1).double()
    w = weight.double().t().unsqueeze(1)
    bd = None if bias is None else bias.double()
    y = F.conv1d(F.pad(xd.transpose(1, 2), (left, right)), w, bd, groups=x.shape[2])
    if activation == "silu":
        y = F.silu(y)
    return y.transpose(1, 2)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> str | None:
    """None when ``actual`` matches within the dtype's tolerance, else what went wrong."""
    rtol, atol = TOLERANCES[str(dtype).removeprefix("torch.")]
    if torch.isnan(actual).any():
        return f"{int(torch.isnan(actual).sum())} NaN (unwritten) outputs"
    bad = ~torch.isclose(actual.double(), expected.double(), rtol=rtol, atol=atol)
    if bad.any():
        err = float((actual.double() - expected.double()).abs().max())
        return f"{int(bad.sum())} outputs off (max |err| {err:.3g})"
    return None


def rand(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (scale * torch.randn(*shape, device="cuda", dtype=torch.float64)).to(dtype)


def check_cases() -> list[tuple[str, Callable[[], str | None]]]:
    """(name, case) pairs; a case runs the public API (with whatever module is in place) and returns a failure."""
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        dn = str(dtype).removeprefix("torch.")
        for b, t, c, k, pad in (
            (3, 300, 256, 31, 15),
            (2, 700, 512, 15, 7),
            (2, 37, 64, 31, (30, 0)),
            (3, 1, 64, 15, 7),
            (2, 200, 72, 15, (3, 9)),
            (1, 1100, 136, 31, (40, 45)),
            (2, 50, 66, 31, 15),
            (2, 90, 64, 5, 2),
            (2, 90, 64, 63, 31),
        ):

            def conv(b=b, t=t, c=c, k=k, pad=pad, dtype=dtype, form="plain") -> str | None:
                x, w, bias = rand(b, t, c, dtype=dtype), rand(k, c, dtype=dtype, scale=k**-0.5), rand(c, dtype=dtype)
                mask = (torch.rand(b, t, device="cuda") > 0.3) if form == "mask" else None
                act = None if form == "plain" else "silu"
                left, right = (pad, pad) if isinstance(pad, int) else pad
                out = torch.full((b, t + left + right - k + 1, c), float("nan"), dtype=dtype, device="cuda")
                conv1d.depthwise_conv1d(x, w, bias, pad, act, mask=mask, out=out)
                return close(out, reference(x, w, bias, pad, act, mask), dtype)

            for form in ("plain", "silu", "mask"):
                cases.append((f"conv {dn} ({b},{t},{c},K={k}) pad={pad} {form}", partial(conv, form=form)))

        def views(dtype=dtype, pitch=300) -> str | None:
            big = rand(6, 400, 264, dtype=dtype)
            x = big[::2, 8:, 8:264]  # batch and time strides, 16-byte aligned
            w, bias = rand(31, 256, dtype=dtype, scale=31**-0.5), rand(256, dtype=dtype)
            out_big = torch.full((3, 400, pitch), float("nan"), dtype=dtype, device="cuda")
            out = out_big[:, 8:, 16:272]
            conv1d.depthwise_conv1d(x, w, bias, 15, "silu", out=out)
            if not (torch.isnan(out_big[:, :8]).all() and torch.isnan(out_big[..., 272:]).all()):
                return "wrote outside out"
            return close(out, reference(x, w, bias, 15, "silu"), dtype)

        # out rows 4-byte aligned only (CH-wide stores), and 16-byte aligned (the tensor-core path's stores)
        cases.append((f"conv {dn} strided views, out pitch 300", views))
        cases.append((f"conv {dn} strided views, out pitch 320", partial(views, pitch=320)))
        for k in (15, 31):
            for c in (64, 72):
                for chunk in (1, k - 2, 16, 37, 200):

                    def step(k=k, c=c, chunk=chunk, dtype=dtype) -> str | None:
                        x, w = rand(3, 260, c, dtype=dtype), rand(k, c, dtype=dtype, scale=k**-0.5)
                        bias = rand(c, dtype=dtype)
                        state = torch.zeros(3, k - 1, c, dtype=dtype, device="cuda")
                        outs = []
                        for start in range(0, x.shape[1], chunk):
                            piece = x[:, start : start + chunk]
                            out = torch.full(piece.shape, float("nan"), dtype=dtype, device="cuda")
                            conv1d.depthwise_conv1d_step(piece, state, w, bias, "silu", out=out)
                            outs.append(out)
                        failure = close(torch.cat(outs, 1), reference(x, w, bias, (k - 1, 0), "silu"), dtype)
                        if failure is None and not torch.equal(state, x[:, -(k - 1) :]):
                            failure = "state differs from the last K - 1 frames"
                        return failure

                    cases.append((f"step {dn} K={k} C={c} chunks of {chunk}", step))
    return cases


def check_variant(name: str) -> int:
    """Every case with variant ``name`` (the process the check section starts): prints failures, exit 1 on any."""
    module = build([name])[name]
    torch.manual_seed(0)
    cases = check_cases()
    failures = []
    with stand_in(CONV1D, module):
        for label, case in cases:
            try:
                failure = case()
            except Exception as error:  # a launch error is a failure of this variant
                failure = f"{type(error).__name__}: {error}".splitlines()[0]
            if failure is not None:
                failures.append(f"{label}: {failure}")
        torch.cuda.synchronize()
    print(f"{'PASS' if not failures else 'FAIL'} ({len(cases) - len(failures)}/{len(cases)} cases)")
    for line in failures[:12]:
        print(f"    {line}")
    return 1 if failures else 0


def check(names: list[str]) -> set[str]:
    """The variants that fail a case or crash, each checked in a process of its own (all at once), so
    that a kernel fault (a sticky CUDA error) cannot take the timing of the others with it."""
    say("\n== check: every variant against float64 references (NaN-poisoned outputs)")

    def run(name: str) -> subprocess.CompletedProcess:
        command = [sys.executable, __file__, "--check-variant", name]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=seconds_left(400))
        except subprocess.TimeoutExpired as expired:
            return subprocess.CompletedProcess(command, -1, "", f"timed out after {expired.timeout:.0f} s")

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        runs = dict(zip(names, pool.map(run, names), strict=True))
    failed = set()
    for name, result in runs.items():
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        if result.returncode not in (0, 1) or not lines:
            tail = [line for line in result.stderr.splitlines() if line.strip()][-3:]
            lines = [f"FAIL (the check process exited {result.returncode})", *(f"    {t}" for t in tail)]
        say(f"  {name:>14}: {lines[0]}")
        for line in lines[1:]:
            say(f"  {line}")
        if result.returncode != 0:
            failed.add(name)
    return failed


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0][:300]


def failure(fn: Callable[[], Any]) -> str | None:
    """None when ``fn()`` runs and the GPU finishes it, else the error in one line (a launch
    error is the call's own; a kernel fault is sticky and fails every later call too)."""
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as error:
        return one_line(error)
    return None


def time_us(backends: dict[str, list]) -> tuple[dict[str, float], dict[str, str]]:
    """Median us of each backend, timed in turn, and the errors of those that could not be timed:
    when the joint timing fails, each backend is timed alone so that one failure costs one row."""
    try:
        results = time_interleaved(backends, rounds=3, iters=30)
        return {name: r.median_ms * 1e3 for name, r in results.items()}, {}
    except Exception:
        us, errors = {}, {}
        for name, fns in backends.items():
            try:
                us[name] = time_interleaved({name: fns}, rounds=3, iters=30)[name].median_ms * 1e3
            except Exception as error:
                errors[name] = one_line(error)
        return us, errors


def record(section: str, shape: str, variant: str, us: float, **extra: Any) -> None:
    ROWS.append({"section": section, "shape": shape, "variant": variant, "us": round(us, 3), **extra})


def record_failure(section: str, shape: str, variant: str, error: str) -> None:
    say(f"{shape:>18} {variant:>14} {'FAIL':>8}  {error}")
    record(section, shape, variant, float("nan"), ok=False, error=error)


def copy_input(inputs: dict[str, Any]) -> None:
    """The bytes a same-padding convolution must move at least: its input read, an output of that size written."""
    inputs["out"].copy_(inputs["x"])


def scale_input(inputs: dict[str, Any]) -> None:
    """The same bytes through oasr.scale, this project's fastest memory-bound kernel."""
    scale(inputs["x"], 1.0, out=inputs["out"])


def sweep(modules: dict[str, Any], copy_bw: float) -> None:
    dtype = torch.bfloat16
    say(f"\n== sweep: depthwise_conv1d bf16, same padding, bias (copy bandwidth {copy_bw:.2f} TB/s)")
    say("   x NCT: torch on a pre-transposed [B, C, T] tensor / variant; x BTC: torch with the transposes / variant")
    say(f"{'b,t,c,k':>18} {'variant':>14} {'us':>8} {'x NCT':>6} {'x BTC':>6} {'%copy':>6} {'check':>6}")
    for config in CONV1D_SWEEP:
        label = ",".join(str(config[f]) for f in op.config_fields)
        work = op.work(config, dtype)
        sets = [op.make_inputs(config, dtype, torch.device("cuda"), seed) for seed in range(rotation_sets(work.bytes))]
        errors, ok = {}, {}
        for name, module in modules.items():  # the first call: launch errors, and the check of its output
            first = sets[0]
            first["out"].fill_(float("nan"))
            errors[name] = failure(through(module, partial(op.backends["oasr"], first)))
            ok[name] = errors[name] is None and close(first["out"], op.reference(first), dtype) is None

        def btc(i):
            x = i["x"].transpose(1, 2).contiguous()
            y = F.conv1d(x, i["weight_ck"], i["bias"], padding=i["padding"], groups=x.shape[1])
            return y.transpose(1, 2).contiguous()

        backends = {
            name: [through(m, partial(op.backends["oasr"], s)) for s in sets]
            for name, m in modules.items()
            if errors[name] is None
        }
        backends["torch_nct"] = [partial(op.backends["torch"], s) for s in sets]
        backends["torch_btc"] = [partial(btc, s) for s in sets]
        backends["copy"] = [partial(copy_input, s) for s in sets]
        backends["scale"] = [partial(scale_input, s) for s in sets]
        us, timing_errors = time_us(backends)
        errors.update(timing_errors)
        nan = float("nan")
        torch_nct, torch_btc = us.get("torch_nct", nan), us.get("torch_btc", nan)
        for name in modules:
            if name not in us:
                record_failure("sweep", label, name, errors.get(name) or "not timed")
                continue
            pct = 100 * work.bytes / (us[name] * 1e-6) / 1e12 / copy_bw
            x_nct, x_btc = torch_nct / us[name], torch_btc / us[name]
            say(
                f"{label:>18} {name:>14} {us[name]:8.2f} {x_nct:6.1f} {x_btc:6.1f} {pct:5.1f}% "
                f"{'PASS' if ok[name] else 'FAIL':>6}"
            )
            record("sweep", label, name, us[name], x_nct=round(x_nct, 2), pct_copy=round(pct, 1), ok=ok[name])
        say(f"{label:>18} {'torch NCT':>14} {torch_nct:8.2f}   (BTC with transposes {torch_btc:.2f})")
        record("sweep", label, "torch_nct", torch_nct)
        record("sweep", label, "torch_btc", torch_btc)
        for key, what in (("copy", "copy of x"), ("scale", "oasr.scale x")):
            at = us.get(key, nan)
            say(
                f"{label:>18} {what:>14} {at:8.2f} {torch_nct / at:6.1f} {torch_btc / at:6.1f}"
                "   (x torch: the most a kernel taking that time gets)"
            )
            record("sweep", label, key, at, x_nct=round(torch_nct / at, 2))
        del sets, backends


def fused(modules: dict[str, Any], copy_bw: float, dtype: torch.dtype = torch.bfloat16) -> None:
    dn = str(dtype).removeprefix("torch.")
    say(f"\n== fused forms, {dn} (us): plain + bias, + silu, mask + silu (prefix mask, 10% padded frames)")
    for b, t, c, k in (*HEADLINE, (64, 250, 256, 15)):
        label = f"{b},{t},{c},{k}" if dtype == torch.bfloat16 else f"{b},{t},{c},{k},{dn}"
        nbytes = 2 * b * t * c * dtype.itemsize
        sets = []
        for seed in range(rotation_sets(nbytes)):
            g = torch.Generator(device="cuda").manual_seed(seed)
            x = torch.randn(b, t, c, device="cuda", dtype=dtype, generator=g)
            w = torch.randn(k, c, device="cuda", dtype=dtype, generator=g) / k**0.5
            bias = torch.randn(c, device="cuda", dtype=dtype, generator=g)
            lengths = torch.randint(int(0.8 * t), t + 1, (b,), device="cuda", generator=g)
            mask = torch.arange(t, device="cuda")[None] < lengths[:, None]
            sets.append((x, w, bias, mask, torch.empty_like(x)))
        pad = k // 2
        forms = {
            "plain": lambda s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, out=s[4]),
            "silu": lambda s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, "silu", out=s[4]),
            "mask_silu": lambda s, pad=pad: conv1d.depthwise_conv1d(s[0], s[1], s[2], pad, "silu", mask=s[3], out=s[4]),
        }
        errors: dict[str, str | None] = {}
        for name, m in modules.items():  # the first call of each form; a variant failing one is not timed
            for form, fn in forms.items():
                error = failure(through(m, partial(fn, sets[0])))
                errors[name] = errors.get(name) or (error and f"{form}: {error}")
        backends = {
            f"{name}/{form}": [through(m, partial(fn, s)) for s in sets]
            for name, m in modules.items()
            if errors[name] is None
            for form, fn in forms.items()
        }
        us, timing_errors = time_us(backends)
        for name in modules:
            keys = [f"{name}/{form}" for form in forms]
            if not all(key in us for key in keys):
                error = errors[name] or next((timing_errors[k] for k in keys if k in timing_errors), "not timed")
                record_failure("fused", label, name, error)
                continue
            plain, silu, masked = (us[key] for key in keys)
            pct = 100 * nbytes / (plain * 1e-6) / 1e12 / copy_bw
            say(
                f"  ({b},{t},{c},K={k}) {name:>14}: plain {plain:6.2f}  silu {silu:6.2f} ({silu / plain:.3f}x)  "
                f"mask+silu {masked:6.2f} ({masked / plain:.3f}x)  plain {pct:.0f}% of copy"
            )
            for form in forms:
                record("fused", label, name, us[f"{name}/{form}"], form=form)
        del sets, backends


def step(modules: dict[str, Any]) -> None:
    dtype = torch.bfloat16
    say("\n== streaming step, bf16, C = 512 (us): step (conv + state update) vs torch F.silu(F.conv1d) on the chunk")
    for b in (1, 8):
        for k in (15, 31):
            for length in (16, 32, 64):
                c = 512
                label = f"{b},{length},{c},{k}"
                x = torch.randn(b, length, c, device="cuda", dtype=dtype)
                w = torch.randn(k, c, device="cuda", dtype=dtype) / k**0.5
                bias = torch.randn(c, device="cuda", dtype=dtype)
                state = torch.zeros(b, k - 1, c, device="cuda", dtype=dtype)
                out = torch.empty_like(x)
                x_nct = torch.randn(b, c, length + k - 1, device="cuda", dtype=dtype)
                w_ck = w.t().unsqueeze(1).contiguous()
                args = (x, state, w, bias, "silu")
                calls = {
                    name: through(m, partial(conv1d.depthwise_conv1d_step, *args, out=out))
                    for name, m in modules.items()
                }
                errors = {name: failure(call) for name, call in calls.items()}
                backends = {name: [call] for name, call in calls.items() if errors[name] is None}
                backends["torch"] = [lambda a=(x_nct, w_ck, bias, c): F.silu(F.conv1d(a[0], a[1], a[2], groups=a[3]))]
                us, timing_errors = time_us(backends)
                errors.update(timing_errors)
                torch_us = us.get("torch", float("nan"))
                timed = [name for name in modules if name in us]
                line = "  ".join(f"{name} {us[name]:.2f} ({torch_us / us[name]:.2f}x)" for name in timed)
                say(f"  B={b} K={k} L={length}: torch {torch_us:.2f}  {line}")
                for name in modules:
                    if name in us:
                        record("step", label, name, us[name], x_torch=round(torch_us / us[name], 2))
                    else:
                        record_failure("step", label, name, errors.get(name) or "not timed")


# ---------------------------------------------------------------------------
# Nsight Compute: stall reasons of the headline shapes
# ---------------------------------------------------------------------------


def ncu_target(name: str, b: int, t: int, c: int, k: int) -> None:
    """Run one variant on one shape a few times (the process ncu profiles)."""
    module = build([name])[name]
    config = {"b": b, "t": t, "c": c, "k": k}
    inputs = op.make_inputs(config, torch.bfloat16, torch.device("cuda"), 0)
    with stand_in(CONV1D, module):
        for _ in range(3):
            op.backends["oasr"](inputs)
        torch.cuda.synchronize()


def ncu(names: list[str], out: Path | None) -> None:
    say("\n== ncu: " + ", ".join(NCU_SECTIONS) + " (third launch of each variant; text in ncu.txt)")
    exe = shutil.which("ncu")
    if exe is None:
        say("  skipped: ncu is not on PATH (install Nsight Compute, or add its folder to PATH)")
        return
    text = []
    for name in names:
        for shape in NCU_SHAPES:
            command = [exe, "--clock-control", "none", "-k", "regex:Conv1d", "--launch-skip", "2"]
            command += ["--launch-count", "1", "--print-details", "all"]
            for section in NCU_SECTIONS:
                command += ["--section", section]
            command += [sys.executable, __file__, "--ncu-target", name, *map(str, shape)]
            try:
                run = subprocess.run(command, capture_output=True, text=True, timeout=seconds_left(150))
            except subprocess.TimeoutExpired as expired:
                say(f"  {name} {shape}: ncu timed out after {expired.timeout:.0f} s")
                continue
            text.append(f"######## {name} {shape}: {' '.join(command)}\n{run.stdout}\n{run.stderr[-2000:]}")
            stalls = [line.strip() for line in run.stdout.splitlines() if "stall" in line.lower() or "Duration" in line]
            say(f"  {name} {shape}: exit {run.returncode}; " + " | ".join(stalls[:6]))
    if out is not None:
        (out / "ncu.txt").write_text("\n".join(text))


def sanitize(names: list[str]) -> None:
    """compute-sanitizer's memcheck and racecheck over dev/conv1d/sanitize.py's odd shapes, each variant and
    tool in a process of its own, all at once (each run is mostly the tool's slow start and torch's import)."""
    say(f"\n== sanitize: compute-sanitizer memcheck and racecheck, dev/conv1d/sanitize.py --variant {','.join(names)}")
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        say("  skipped: compute-sanitizer is not on PATH (it comes with the CUDA toolkit's bin folder)")
        return
    runs = [(name, tool) for name in names for tool in ("memcheck", "racecheck")]

    def run(name: str, tool: str) -> str:
        command = [exe, "--tool", tool, "--error-exitcode", "1", sys.executable, str(HERE / "sanitize.py")]
        try:
            done = subprocess.run(
                [*command, "--variant", name], capture_output=True, text=True, timeout=seconds_left(300)
            )
        except subprocess.TimeoutExpired as expired:
            return f"timed out after {expired.timeout:.0f} s"
        tail = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-3:]
        return f"exit {done.returncode}; " + " | ".join(tail)

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        results = list(pool.map(lambda r: run(*r), runs))
    for (name, tool), result in zip(runs, results, strict=True):
        say(f"  {name} {tool}: {result}")


# ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every section: check, sweep, fused, step, ncu, sanitize")
    parser.add_argument("--sections", default="check,sweep,fused,step")
    parser.add_argument(
        "--variants",
        default=",".join(name for name, edits in VARIANTS.items() if not isinstance(edits, Path)),
        help="comma-separated names of VARIANTS (default: those without a patch)",
    )
    parser.add_argument(
        "--fused-dtypes",
        default="bfloat16",
        help="dtypes of the fused section, comma-separated (float32: the FFMA kernel)",
    )
    parser.add_argument("--ncu-variants", default="prod")
    parser.add_argument("--sanitize-variants", default="prod")
    parser.add_argument("--out", type=Path, help="folder for bench.txt, bench.csv and ncu.txt")
    parser.add_argument(
        "--deadline-s", type=float, help="seconds after start: no section starts later, subprocesses are cut there"
    )
    parser.add_argument("--build-only", action="store_true", help="build the variants and stop (no GPU needed)")
    parser.add_argument("--ncu-target", nargs=5, metavar=("VARIANT", "B", "T", "C", "K"), help=argparse.SUPPRESS)
    parser.add_argument("--check-variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_variant:
        return check_variant(args.check_variant)
    if args.ncu_target:
        name, *shape = args.ncu_target
        ncu_target(name, *map(int, shape))
        return 0
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    sections = "check,sweep,fused,step,ncu,sanitize" if args.all else args.sections
    began = time.monotonic()
    if args.deadline_s is not None:
        DEADLINE[0] = began + args.deadline_s
    modules = build(names)
    say(f"built {', '.join(names)} ({time.monotonic() - began:.0f} s)")
    if args.build_only:
        return 0
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    say(f"conv1d variants on {torch.cuda.get_device_name()}, torch {torch.__version__}, commit {git_commit()}")
    copy_bw = measure_copy_bandwidth()
    failed: set[str] = set()
    for section in sections.split(","):
        timed = {name: m for name, m in modules.items() if name not in failed}
        start = time.monotonic()
        if start > DEADLINE[0]:
            say(f"\n== {section}: skipped, the run is past --deadline-s {args.deadline_s:.0f}")
            continue
        try:
            if section == "check":
                failed = check(names)
                if failed:
                    say(f"  not timed (failed the check): {', '.join(sorted(failed))}")
            elif section == "sweep":
                sweep(timed, copy_bw)
            elif section == "fused":
                for dtype in args.fused_dtypes.split(","):
                    fused(timed, copy_bw, parse_dtype(dtype))
            elif section == "step":
                step(timed)
            elif section == "ncu":
                ncu([n for n in args.ncu_variants.split(",") if n in timed], args.out)
            elif section == "sanitize":
                sanitize([n for n in args.sanitize_variants.split(",") if n in VARIANTS])
            else:
                say(f"unknown section {section}")
        except Exception:
            say(f"section {section} failed:\n{traceback.format_exc()}")
        say(f"(section {section}: {time.monotonic() - start:.0f} s, {time.monotonic() - began:.0f} s in all)")
        if args.out is not None:  # after each section: a run cut short keeps what it measured
            (args.out / "bench.txt").write_text("\n".join(LOG) + "\n")
            write_csv(args.out / "bench.csv")
    return 0


def write_csv(path: Path) -> None:
    fields = list(dict.fromkeys(key for row in ROWS for key in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(ROWS)


if __name__ == "__main__":
    sys.exit(main())
