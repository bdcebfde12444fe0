"""gemm, gemm_glu and bmm's two backends (oasr's kernels, cuBLAS through torch), the rule that picks one
(``oasr.gemm_plan``, ``oasr/jit/gemm_plan.py``) and the bias + activation pass (``oasr.bias_activation``).

CPU: the cuBLAS backend (torch on CPU tensors, the pass by a torch stand-in) against float64 for every epilogue and
``out=`` layout; the plan of a table of shapes, each band citing its figure; eager and compiled calls returning one
layout on either backend; bias_activation's checks. GPU: both backends and the pass's kernel against float64.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import force_backend, gemm_tolerance, poisoned_like, standing_in
from test_compile import TorchLaunchers
from test_gemm import ACTS, operands, reference

import oasr
from oasr import _checks
from oasr.jit import gemm_config, gemm_plan
from oasr.jit.families import ACTIVATION, BMM, GEMM
from profiling.compare import PerVariant

gpu = pytest.mark.gpu
gemm_module = sys.modules["oasr.gemm"]  # (the attribute oasr.gemm is the op)
REPO = Path(__file__).resolve().parent.parent


def assert_close(actual, expected, dtype, k):
    rtol, atol = gemm_tolerance(dtype, k)
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


class TorchPasses:
    """The activation family's passes in torch (fp32, one rounding), recording their calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, variant=None):
        return self

    def bias_activation(self, out, input, bias, activation):
        self.calls.append(f"bias_activation:{activation}:{bias is not None}")
        y = input.float() + (0.0 if bias is None else bias.float())
        out.copy_(ACTS[activation](y))

    def glu(self, out, input):
        self.calls.append("glu")
        out.copy_(F.glu(input.float(), -1))


@pytest.fixture
def cublas(monkeypatch):
    """CPU tensors pass the device check; every call takes the cuBLAS backend (torch), the passes TorchPasses."""
    passes = TorchPasses()
    force_backend(monkeypatch, "cublas")
    for family in (GEMM, BMM, ACTIVATION):
        _checks.ready_devices(family).add(torch.device("cpu"))
    with standing_in(passes, (ACTIVATION,)):
        yield passes
    _checks.forget_devices()


# ---------------------------------------------------------------------------
# CPU: the cuBLAS backend
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_cublas_backend_matches_float64(cublas, activation, with_bias):
    x, w, b = operands(7, 12, 40, torch.bfloat16, "cpu", batch=(2,))
    b = b if with_bias else None
    y = oasr.gemm(x, w, b, activation)
    assert y.shape == (2, 7, 12)
    assert_close(y, reference(x, w, b, activation), torch.bfloat16, 40)
    # cuBLASLt's own epilogue where it has one (a bias, with ReLU or tanh GELU), else the one pass after the product
    lt = with_bias and activation in gemm_plan.LT_ACTIVATIONS
    assert cublas.calls == ([] if lt or activation is None else [f"bias_activation:{activation}:{with_bias}"])


def test_cublas_backend_writes_every_out_layout(cublas):
    x, w, b = operands(6, 10, 24, torch.float16, "cpu")
    expected = reference(x, w, b, "silu")
    for out in (
        torch.full((6, 11), float("nan"), dtype=torch.float16)[:, :10],  # padded rows
        torch.full((10, 6), float("nan"), dtype=torch.float16).T,  # column-major
        torch.full((2, 6, 10), float("nan"), dtype=torch.float16)[1],
    ):
        assert oasr.gemm(x, w, b, "silu", out=out) is out
        assert_close(out, expected, torch.float16, 24)
    permuted = torch.full((3, 2, 10), float("nan"), dtype=torch.float16).transpose(0, 1)  # rows that do not collapse
    assert oasr.gemm(x.view(2, 3, 24), w, b, "silu", out=permuted) is permuted
    assert_close(permuted, expected.view(2, 3, 10), torch.float16, 24)


def test_cublas_backend_glu_and_bmm(cublas):
    x, w, b = operands(9, 14, 40, torch.bfloat16, "cpu")
    out = poisoned_like(torch.empty(9, 7, dtype=torch.bfloat16))
    assert oasr.gemm_glu(x, w, b, out=out) is out and cublas.calls == ["glu"]
    assert_close(out, F.glu(reference(x, w, b), -1), torch.bfloat16, 40)
    q, k = torch.randn(2, 5, 16, dtype=torch.bfloat16), torch.randn(2, 7, 16, dtype=torch.bfloat16)
    scores = oasr.bmm(q, k.transpose(1, 2))
    assert scores.shape == (2, 5, 7) and scores.stride() == (40, 8, 1)  # the op's padded rows, on cuBLAS too
    assert_close(scores, q.double() @ k.double().transpose(1, 2), torch.bfloat16, 16)


@pytest.mark.parametrize("compiler", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", ["oasr", "cublas"])
def test_eager_and_compiled_gemm_return_one_layout(monkeypatch, backend, compiler):
    """The op allocates ``out`` (padded rows where N % 8 != 0) before choosing a backend, so eager and compiled
    calls (``aot_eager``; inductor, which builds C++ on CPU: the full tier) return the same strides on either
    backend, allocating or writing ``out=``."""
    force_backend(monkeypatch, backend)
    for family in (GEMM, BMM, ACTIVATION):
        _checks.ready_devices(family).add(torch.device("cpu"))
    torch._dynamo.reset()
    try:
        with standing_in(PerVariant(TorchLaunchers)):
            x, w, b = operands(5, 12, 16, torch.bfloat16, "cpu")

            def call(a, weight, bias):
                return oasr.gemm(a, weight, bias, "silu"), oasr.gemm(a, weight, out=torch.empty(5, 12, dtype=a.dtype))

            eager = call(x, w, b)
            compiled = torch.compile(call, backend=compiler, fullgraph=True)(x, w, b)
        for e, c in zip(eager, compiled, strict=True):
            assert e.stride() == c.stride()
            torch.testing.assert_close(c, e, rtol=0, atol=0)
        assert eager[0].stride() == (16, 1) and eager[1].stride() == (12, 1)
    finally:
        torch._dynamo.reset()
        _checks.forget_devices()


# ---------------------------------------------------------------------------
# CPU: the rule and oasr.gemm_plan
# ---------------------------------------------------------------------------

P = gemm_plan.Problem
PLANS = [
    # (problem, backend, band): issue 54's shapes first
    (P("gemm", 6000, 768, 3072), "cublas", "long-k"),
    (P("gemm", 6000, 512, 512), "cublas", "bare"),
    (P("gemm", 4000, 768, 768), "cublas", "partial-wave"),
    (P("gemm", 12000, 3072, 768), "oasr", "wide"),
    (P("gemm", 6000, 768, 3072, bias=True, activation="silu"), "cublas", "fused-long-k"),
    (P("gemm", 12000, 3072, 768, bias=True, activation="silu"), "oasr", "fused"),
    (P("gemm", 16000, 256, 2048, bias=True, activation="silu"), "oasr", "fused"),  # K = 2048 still fused
    (P("gemm", 8000, 256, 256), "cublas", "one-wave"),
    (P("gemm", 1500, 2048, 512), "cublas", "partial-wave"),
    (P("gemm", 16, 1024, 256), "cublas", "few-rows"),
    (P("gemm", 1, 256, 256, bias=True, activation="gelu"), "cublas", "fused-few-rows"),
    (P("gemm", 8000, 1024, 256, bias=True), "cublas", "lt-epilogue"),
    (P("gemm", 8000, 1024, 256, bias=True, activation="relu"), "cublas", "lt-epilogue"),
    (P("gemm", 8000, 1024, 256, bias=True, activation="gelu"), "oasr", "fused"),  # cuBLASLt's GELU is tanh's
    (P("gemm", 8000, 1024, 256, activation="relu"), "oasr", "fused"),  # no bias: no cuBLASLt epilogue
    (P("gemm_glu", 16000, 256, 256, bias=True), "oasr", "glu-direct"),
    (P("gemm_glu", 8000, 512, 512, bias=True), "oasr", "glu-direct"),
    (P("gemm_glu", 8000, 512, 1024, bias=True), "cublas", "glu"),
    (P("gemm_glu", 500, 256, 256), "cublas", "glu"),  # under three waves
    (P("bmm", 375, 375, 64, 64), "oasr", "bmm-odd-n"),
    (P("bmm", 376, 376, 64, 64), "cublas", "bmm"),
    (P("bmm", 375, 64, 375, 64), "cublas", "bmm"),  # context
]


@pytest.mark.parametrize("problem,backend,band", PLANS, ids=lambda v: v.shape if isinstance(v, P) else None)
def test_the_rule_on_a_table_of_shapes(problem, backend, band):
    plan = gemm_plan.rule(problem)
    assert (plan.backend, plan.band) == (backend, band), plan.sentence
    assert plan.config == gemm_plan.oasr_config(problem, gemm_config.H200_SMS)
    assert plan.sentence.startswith(f"oasr.{problem.op} {problem.shape} ({problem.epilogue}): ")


CITED = ("issue 54", "H200 at ", "reports/h200/tables/")
"""Where the bands' figures are recorded (issue 54's table: measured at 47462e1; an H200 run at a commit of this
repository's history, its results table named there)."""


def test_every_band_has_two_lines_of_why_citing_a_figure_or_saying_none_exists():
    for band in gemm_plan.BANDS:
        lines = band.why.split("\n")
        assert len(lines) == 2 and all(lines), band.name
        cites = [source for source in CITED if source in band.why]
        if band.backend == "oasr":  # oasr is picked only on a measured win
            assert cites and re.search(r"\d+\.\d+x", band.why), band.name
        else:
            assert cites or "unmeasured" in band.why or "nothing was measured" in band.why, band.name
    whys = " ".join(b.why for b in gemm_plan.BANDS)
    for path in re.findall(r"reports/h200/tables/[\w.]+", whys):
        assert (REPO / path).is_file(), path
    for runs in re.findall(r"H200 at ([0-9a-f, ]+)\)", whys):  # each cited run's commit is in the history
        for commit in runs.split(", "):
            found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True)
            assert found.returncode == 0, commit
    # every kind ends in a band that covers the rest
    for kind in gemm_plan.KINDS:
        last = [b for b in gemm_plan.BANDS if kind in b.kinds][-1]
        assert (last.m_min, last.m_max, last.n_min, last.k_min, last.k_max) == (0, float("inf"), 0, 0, float("inf"))
        assert not last.picks and last.odd_n is None and last.min_waves == 0


def test_unmeasured_bare_products_take_cublas():
    """No figure below 1500 rows: cuBLAS, whatever the configuration oasr would run."""
    for m in (1, 16, 500):
        for d in (256, 512, 768, 1024):
            for n, k in ((d, d), (2 * d, d), (d, 4 * d), (4 * d, d)):
                assert gemm_plan.rule(P("gemm", m, n, k)).backend == "cublas"


def test_gemm_plan_checks_its_arguments_and_explains():
    _checks.ready_devices(GEMM).add(torch.device("cpu"))
    _checks.ready_devices(BMM).add(torch.device("cpu"))
    try:
        x, w = torch.zeros(2, 3000, 3072, dtype=torch.bfloat16), torch.zeros(768, 3072, dtype=torch.bfloat16)
        plan = oasr.gemm_plan(x, w)
        assert (plan.backend, plan.band, plan.problem.m) == ("cublas", "long-k", 6000)
        assert "0.75x" in str(plan) and "issue 54" in str(plan)
        fused = oasr.gemm_plan(x, w, torch.zeros(768, dtype=torch.bfloat16), "silu")
        assert fused.runs == "cuBLAS (torch.mm) then oasr.bias_activation"
        rows, gated = torch.zeros(16000, 256, dtype=torch.bfloat16), torch.zeros(512, 256, dtype=torch.bfloat16)
        glu = oasr.gemm_plan(rows, gated, op="gemm_glu")
        assert (glu.backend, glu.config, glu.problem.n) == ("oasr", gemm_config.DIRECT, 256)
        q = torch.zeros(64, 375, 64, dtype=torch.bfloat16)
        assert oasr.gemm_plan(q, q.transpose(1, 2), op="bmm").band == "bmm-odd-n"
        with pytest.raises(ValueError, match="`op` must be one of"):
            oasr.gemm_plan(x, w, op="conv")
        with pytest.raises(ValueError, match="K"):
            oasr.gemm_plan(x, w[:, :8])
        with pytest.raises(ValueError, match="bmm takes no"):
            oasr.gemm_plan(q, q.transpose(1, 2), activation="silu", op="bmm")
        with pytest.raises(TypeError, match="float32"):
            oasr.gemm_plan(x.float(), w)
    finally:
        _checks.forget_devices()


# ---------------------------------------------------------------------------
# CPU: bias_activation's checks
# ---------------------------------------------------------------------------


def test_bias_activation_refuses_bad_arguments_before_any_launch():
    _checks.ready_devices(ACTIVATION).add(torch.device("cpu"))
    passes = TorchPasses()
    x = torch.zeros(4, 8)
    cases = [
        (lambda: oasr.bias_activation([1.0]), TypeError, "`input` must be a torch.Tensor"),
        (lambda: oasr.bias_activation(x, torch.zeros(7)), ValueError, "`bias` has shape"),
        (lambda: oasr.bias_activation(x, torch.zeros(8).half()), TypeError, "`bias` has dtype"),
        (lambda: oasr.bias_activation(x, None, "tanh"), ValueError, "unknown `activation`"),
        (lambda: oasr.bias_activation(x, None, 3), TypeError, "`activation` must be None or a string"),
        (lambda: oasr.bias_activation(x, out=torch.zeros(4, 4)), ValueError, "`out` has shape"),
        (lambda: oasr.bias_activation(x[1:], out=x[:-1]), ValueError, "`out` overlaps `input`"),
    ]
    try:
        with standing_in(passes, (ACTIVATION,)):
            for call, error, message in cases:
                with pytest.raises(error, match=message):
                    call()
            assert passes.calls == []
            y = torch.randn(4, 8, 6)[..., 1:]  # a row view of odd columns
            assert oasr.bias_activation(y, torch.ones(5), "relu", out=y) is y  # in place
            assert passes.calls == ["bias_activation:relu:True"]
    finally:
        _checks.forget_devices()


@pytest.mark.slow  # a CUTLASS build: the full tier
def test_a_long_k_configuration_builds_for_sm90a():
    """K tiles of 128 (the autotuner's long-K candidates): CUTLASS's builder takes them for 16-bit operands."""
    spec = GEMM.jit_spec(variant=gemm_config.gemm_variant("bfloat16", "plain", gemm_config.LONG_K_PINGPONG))
    assert "-DOASR_GEMM_TILE_K=128" in spec.nvcc_flags
    assert callable(spec.build_and_load().gemm)


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("config", gemm_config.LONG_K_PICKS, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_long_k_configurations_match_float64(config, dtype):
    x, w, _ = operands(300, 264, 2056, dtype, "cuda")  # partial tiles, a last k-block of 8
    out = poisoned_like(torch.empty(300, 264, dtype=dtype, device="cuda"))
    gemm_module._linear(x, w, None, None, out, config)
    assert_close(out, reference(x, w), dtype, 2056)


@gpu
@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cols", [768, 37])  # the vector path, the scalar one
def test_bias_activation_kernel_matches_float64(activation, dtype, cols):
    x = torch.randn(301, cols, dtype=dtype, device="cuda")
    b = torch.randn(cols, dtype=dtype, device="cuda")
    expected = ACTS[activation](x.double() + b.double())
    rtol, atol = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}[dtype]
    if activation in ("silu", "gelu_tanh") and dtype != torch.float32:
        atol += 3e-4 * 4  # tanh.approx: below 3e-4 |x| before rounding (|x| < 4 here, nearly always)
    out = poisoned_like(x)
    oasr.bias_activation(x, b, activation, out=out)
    torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol)
    strided = torch.randn(301, cols + 8, dtype=dtype, device="cuda")[:, 3 : 3 + cols]  # a row view, in place
    expected = ACTS[activation](strided.double())
    oasr.bias_activation(strided, None, activation, out=strided)
    torch.testing.assert_close(strided.double(), expected, rtol=rtol, atol=atol)


@gpu
@pytest.mark.parametrize("backend", ["oasr", "cublas"])
@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_both_backends_match_float64(monkeypatch, backend, activation, dtype):
    force_backend(monkeypatch, backend)
    x, w, b = operands(300, 264, 96, dtype, "cuda", batch=(2,))
    out = poisoned_like(torch.empty(2, 300, 264, dtype=dtype, device="cuda"))
    oasr.gemm(x, w, b, activation, out=out)
    assert_close(out, reference(x, w, b, activation), dtype, 96)
    padded = oasr.gemm(x, w[:259], b[:259], activation)  # N % 8 != 0: padded rows on either backend
    assert padded.stride() == (300 * 264, 264, 1)
    assert_close(padded, reference(x, w[:259], b[:259], activation), dtype, 96)
    glu = oasr.gemm_glu(x, w, b)
    assert_close(glu, F.glu(reference(x, w, b), -1), dtype, 96)
    q = torch.randn(8, 375, 64, dtype=dtype, device="cuda")
    assert_close(oasr.bmm(q, q.transpose(1, 2)), q.double() @ q.double().transpose(1, 2), dtype, 64)
