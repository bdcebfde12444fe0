"""Tests for oasr.layer_norm, oasr.rms_norm, oasr.add_layer_norm and oasr.add_rms_norm.

CPU tests (run anywhere): the module compiles for the configured architecture (sm_90a on
a machine without a GPU) and loads; every bad argument raises TypeError/ValueError naming
it before anything is launched, on CPU tensors as well (types, dtypes and shapes are
checked before devices); the C++ entry points refuse CPU tensors themselves (an internal
invariant: RuntimeError); the profiling entries' references agree with torch.

GPU tests: results against float64 references computed from the same (rounded) inputs.
Inputs are random and never zero; outputs (and residual_out) are poisoned with NaN before
the launch. Tolerances (rtol, atol) per storage dtype:

* float32:  1e-4, 1e-5  -- fp32 statistics over up to 70000 elements
* float16:  2e-3, 1e-3  -- about 2 ulp of the output (one rounding at 2^-11)
* bfloat16: 1.6e-2, 1e-2 -- about 2 ulp of the output (one rounding at 2^-8)

Hidden sizes reach every kernel: the warp-per-row kernel (C=1..1024 for fp16; few rows
spread over more threads, LARGE_SHAPES have enough for 4 vectors per thread), the
block-per-row register kernel (vector path, up to 16384), the shared-memory row kernel
(scalar path beyond 128 elements, vector path beyond 16384) and the re-reading loop
kernel (rows beyond ~58000 elements). Views cover the vector path (aligned pointers and
row strides) and the scalar path (odd C, pointers off a 16-byte boundary, odd strides).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import nonzero_randn as rand
from conftest import poisoned

import oasr
from oasr.jit.families import FAMILIES, NORM

gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing


DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCES = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
OPS = ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"]


def reference(op, x, weight, bias=None, eps=1e-5, residual=None, alpha=1.0):
    """(normalised output, sum) in float64; the sum is None for the plain norms."""
    x = x.double()
    total = None
    if op.startswith("add_"):
        total = residual.double() + alpha * x
        x = total
    if op.endswith("rms_norm"):
        y = x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + eps)
    else:
        mean = x.mean(dim=-1, keepdim=True)
        y = (x - mean) / torch.sqrt((x - mean).square().mean(dim=-1, keepdim=True) + eps)
    y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y, total


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, **tolerance) -> None:
    rtol, atol = TOLERANCES[dtype]
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "output has unwritten (NaN) elements"
    torch.testing.assert_close(
        actual.double(), expected.double(), rtol=tolerance.get("rtol", rtol), atol=tolerance.get("atol", atol)
    )


def call(op, x, weight, bias=None, eps=1e-5, residual=None, alpha=1.0, out=None, residual_out=None):
    fn = getattr(oasr, op)
    if op.startswith("add_"):
        return fn(x, residual, weight, bias, eps, alpha, out=out, residual_out=residual_out)
    return fn(x, weight, bias, eps, out=out)


def make_case(op, shape, dtype, seed=0, bias=True):
    c = shape[-1]
    x = rand(shape, dtype, seed=seed)
    weight = rand((c,), dtype, seed=seed + 1, scale=0.2, offset=1.0)
    b = rand((c,), dtype, seed=seed + 2, scale=0.1) if bias else None
    residual = rand(shape, dtype, seed=seed + 3) if op.startswith("add_") else None
    return x, weight, b, residual


# ---------------------------------------------------------------------------
# CPU: the module builds and loads
# ---------------------------------------------------------------------------


def test_norm_module_builds_and_loads():
    spec = NORM.jit_spec()
    info = spec.build()
    assert info.library.is_file()
    assert any(flag.startswith("-gencode") for flag in spec.nvcc_flags)
    module = spec.load()
    for name in OPS:
        assert callable(getattr(module, name))


def test_norm_module_registered():
    assert NORM in FAMILIES and NORM.ops == tuple(OPS)
    assert set(OPS) <= set(oasr.__all__)


def test_cpp_entry_refuses_cpu_tensors():
    """The launchers check their invariants (a RuntimeError): a direct call never reaches a kernel."""
    module = NORM.jit_spec().build_and_load()
    x, w = torch.randn(4, 8), torch.ones(8)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        module.layer_norm(torch.empty(4, 8), x, w, None, 1e-5)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        module.rms_norm(torch.empty(4, 8), x, w, None, 1e-5)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        module.add_layer_norm(torch.empty(4, 8), None, x, x, w, None, 1e-5, 1.0)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        module.add_rms_norm(torch.empty(4, 8), torch.empty(4, 8), x, x, w, None, 1e-5, 1.0)


# ---------------------------------------------------------------------------
# CPU: bad arguments (checked before any launch)
# ---------------------------------------------------------------------------


def _x(*shape, dtype=torch.float32):
    return torch.ones(shape, dtype=dtype)


_BAD = [
    ("input not a tensor", lambda op: call(op, [1.0], _x(1), residual=_x(1)), TypeError, "`input` must be a torch"),
    ("input int", lambda op: call(op, _x(2, 4, dtype=torch.int32), _x(4), residual=_x(2, 4)), TypeError, "`input`"),
    ("input 0-d", lambda op: call(op, torch.tensor(1.0), _x(1), residual=_x()), ValueError, "at least one dim"),
    ("weight missing", lambda op: call(op, _x(2, 4), None, residual=_x(2, 4)), TypeError, "`weight` must be a torch"),
    ("weight size", lambda op: call(op, _x(2, 4), _x(5), residual=_x(2, 4)), ValueError, r"`weight` has shape \(5,\)"),
    ("weight 2-d", lambda op: call(op, _x(2, 4), _x(1, 4), residual=_x(2, 4)), ValueError, "`weight` has shape"),
    (
        "weight dtype",
        lambda op: call(op, _x(2, 4), _x(4, dtype=torch.float16), residual=_x(2, 4)),
        TypeError,
        "`weight` has dtype torch.float16, expected torch.float32",
    ),
    (
        "fp32 weight for bf16 input",
        lambda op: call(op, _x(2, 4, dtype=torch.bfloat16), _x(4), residual=_x(2, 4, dtype=torch.bfloat16)),
        TypeError,
        "`weight` has dtype",
    ),
    ("bias size", lambda op: call(op, _x(2, 4), _x(4), _x(3), residual=_x(2, 4)), ValueError, "`bias` has shape"),
    (
        "bias dtype",
        lambda op: call(op, _x(2, 4), _x(4), _x(4, dtype=torch.bfloat16), residual=_x(2, 4)),
        TypeError,
        "`bias` has dtype",
    ),
    ("eps type", lambda op: call(op, _x(2, 4), _x(4), eps="1e-5", residual=_x(2, 4)), TypeError, "`eps`"),
    ("eps negative", lambda op: call(op, _x(2, 4), _x(4), eps=-1.0, residual=_x(2, 4)), ValueError, "`eps`"),
    ("eps nan", lambda op: call(op, _x(2, 4), _x(4), eps=math.nan, residual=_x(2, 4)), ValueError, "`eps`"),
    ("out shape", lambda op: call(op, _x(2, 4), _x(4), out=_x(4, 2), residual=_x(2, 4)), ValueError, "`out` has shape"),
    (
        "out dtype",
        lambda op: call(op, _x(2, 4), _x(4), out=_x(2, 4, dtype=torch.float16), residual=_x(2, 4)),
        TypeError,
        "`out` has dtype",
    ),
    ("out not a tensor", lambda op: call(op, _x(2, 4), _x(4), out=[0.0], residual=_x(2, 4)), TypeError, "`out`"),
    ("cpu input", lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 4)), ValueError, "`input` is on cpu"),
]

_BAD_FUSED = [
    ("residual missing", lambda op: call(op, _x(2, 4), _x(4), residual=None), TypeError, "`residual` must be"),
    ("residual shape", lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 5)), ValueError, "`residual` has shape"),
    (
        "residual dtype",
        lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 4, dtype=torch.float16)),
        TypeError,
        "`residual` has dtype",
    ),
    ("alpha type", lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 4), alpha=None), TypeError, "`alpha`"),
    (
        "residual_out shape",
        lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 4), residual_out=_x(4, 2)),
        ValueError,
        "`residual_out` has shape",
    ),
    (
        "residual_out dtype",
        lambda op: call(op, _x(2, 4), _x(4), residual=_x(2, 4), residual_out=_x(2, 4, dtype=torch.bfloat16)),
        TypeError,
        "`residual_out` has dtype",
    ),
]


def _same_out_and_residual_out(op):
    t = _x(2, 4)
    return call(op, _x(2, 4), _x(4), residual=_x(2, 4), out=t, residual_out=t)


_BAD_FUSED.append(("out is residual_out", _same_out_and_residual_out, ValueError, "must be different tensors"))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("case", _BAD, ids=lambda c: c[0])
def test_bad_arguments_raise_before_launch(op, case):
    _, bad_call, error, message = case
    with pytest.raises(error, match=message):
        bad_call(op)


@pytest.mark.parametrize("op", ["add_layer_norm", "add_rms_norm"])
@pytest.mark.parametrize("case", _BAD_FUSED, ids=lambda c: c[0])
def test_bad_fused_arguments_raise_before_launch(op, case):
    _, bad_call, error, message = case
    with pytest.raises(error, match=message):
        bad_call(op)


@pytest.mark.parametrize("op", OPS)
def test_meta_tensors_reach_the_device_check(op):
    """Well-formed arguments get as far as the device check (which names `input`)."""
    x = torch.empty(3, 5, device="meta")
    with pytest.raises(ValueError, match="`input` is on meta"):
        call(op, x, torch.empty(5, device="meta"), residual=torch.empty(3, 5, device="meta"))


def test_profiling_entries():
    from profiling.harness.ops import OPS as REGISTRY

    for name in OPS:
        spec = REGISTRY[name]
        assert spec.family is NORM and spec.config_fields == ("b", "t", "c")
        assert {"b": 16, "t": 1500, "c": 1024} in spec.default_sweep
        config = {"b": 2, "t": 3, "c": 40}
        inputs = spec.make_inputs(config, torch.float32, torch.device("cpu"), 0)
        expected = spec.reference(inputs)
        torch.testing.assert_close(spec.backends["torch"](inputs).double(), expected, rtol=1e-5, atol=1e-5)
        work = spec.work(config, torch.float16)
        tensors = 3 if name.startswith("add_") else 2
        params = 2 if "layer" in name else 1
        assert work.bytes == (tensors * 240 + params * 40) * 2 and work.flops["fp32"] > 0


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------

# (shape, kernel reached for fp16 / fp32)
NORM_SHAPES = [
    (5, 1),  # warp, scalar
    (7, 3),
    (3, 5, 7),
    (4, 8),  # warp, one fp16 vector
    (9, 24),  # warp, 3 fp16 vectors per row
    (33, 33),  # warp, scalar, 2 elements per lane
    (31, 256),  # warp 32 lanes x 1 (fp16: rows this few spread over more threads)
    (2, 3, 512),
    (17, 1024),  # block of 128 threads x 1 (fp16, few rows); 128 x 2 (fp32)
    (11, 2048),  # block
    (9, 4097),  # shared-memory row cache, scalar
    (5, 16384),  # block of 512 threads (vector); shared memory (scalar)
    (3, 20000),  # shared memory, vector
    (2, 70001),  # loop kernel (row larger than shared memory), scalar
    (3, 70000),  # loop kernel, from the vector-capable layout
]
# Enough rows for the warp kernel's 4 units per thread (fp16: 8, 16 and 32 lanes), 2 units
# ((32, 250, 256): 16 lanes), and a block of 128 threads x 1 for few long rows ((8, 200, 1024)).
LARGE_SHAPES = [(64, 500, 256), (32, 500, 512), (16, 1500, 1024), (8000, 2048), (32, 250, 256), (8, 200, 1024)]


@gpu
class TestNorm:
    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
    @pytest.mark.parametrize("op", OPS)
    def test_matches_reference(self, op, shape, dtype):
        x, weight, bias, residual = make_case(op, shape, dtype)
        alpha = 0.5
        expected, total = reference(op, x, weight, bias, residual=residual, alpha=alpha)
        out = poisoned(shape, dtype)
        residual_out = poisoned(shape, dtype) if residual is not None else None
        result = call(op, x, weight, bias, residual=residual, alpha=alpha, out=out, residual_out=residual_out)
        assert result is out
        assert_close(out, expected, dtype)
        if residual_out is not None:
            assert_close(residual_out, total, dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("shape", LARGE_SHAPES, ids=str)
    @pytest.mark.parametrize("op", OPS)
    def test_large(self, op, shape, dtype):
        x, weight, bias, residual = make_case(op, shape, dtype, seed=7)
        expected, _ = reference(op, x, weight, bias, residual=residual)
        out = poisoned(shape, dtype)
        call(op, x, weight, bias, residual=residual, out=out)
        assert_close(out, expected, dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("op", OPS)
    def test_no_bias_allocating_and_torch(self, op, dtype):
        x, weight, _, residual = make_case(op, (6, 40, 384), dtype, bias=False)
        y = call(op, x, weight, residual=residual, eps=1e-6)
        assert y.shape == x.shape and y.dtype == dtype
        expected, total = reference(op, x, weight, eps=1e-6, residual=residual)
        assert_close(y, expected, dtype)
        source = x.double() if total is None else total
        if op.endswith("rms_norm"):
            torch_y = F.rms_norm(source, (384,), weight.double(), 1e-6)
        else:
            torch_y = F.layer_norm(source, (384,), weight.double(), None, 1e-6)
        assert_close(y, torch_y, dtype)

    @pytest.mark.parametrize("op", ["layer_norm", "add_layer_norm"])
    @pytest.mark.parametrize("c", [33, 256, 4096, 20000])
    def test_two_pass_statistics_with_large_mean(self, op, c):
        """fp32 rows of mean 1000 and std 1: E[x^2] - E[x]^2 in fp32 would lose the variance."""
        shape = (8, c)
        x = rand(shape, torch.float32, seed=3, offset=1000.0)
        weight = rand((c,), torch.float32, seed=4, scale=0.2, offset=1.0)
        residual = rand(shape, torch.float32, seed=5) if op.startswith("add_") else None
        expected, _ = reference(op, x, weight, residual=residual)
        out = call(op, x, weight, residual=residual, out=poisoned(shape, torch.float32))
        # The fp32 input itself carries 1000 * 2^-24 of error around the mean.
        assert_close(out, expected, torch.float32, rtol=1e-4, atol=5e-4)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("c", [256, 24, 7, 4096, 20000])
    @pytest.mark.parametrize("op", OPS)
    def test_views(self, op, c, dtype):
        """Row-strided views (vector path when strides allow) and offset views (scalar path)."""
        rows = 13
        weight = rand((c,), dtype, seed=1, scale=0.2, offset=1.0)
        bias = rand((c,), dtype, seed=2, scale=0.1)
        fused = op.startswith("add_")
        for pad in (8, 1):  # row strides of C + 8 (vector-capable) and C + 1 (scalar)
            x = rand((rows, c + pad), dtype, seed=3)[:, :c]
            residual = rand((rows, c + pad), dtype, seed=4)[:, :c] if fused else None
            out_big = poisoned((rows, c + pad), dtype)
            sum_big = poisoned((rows, c + pad), dtype) if fused else None
            expected, total = reference(op, x, weight, bias, residual=residual, alpha=1.5)
            call(
                op,
                x,
                weight,
                bias,
                residual=residual,
                alpha=1.5,
                out=out_big[:, :c],
                residual_out=sum_big[:, :c] if fused else None,
            )
            assert_close(out_big[:, :c], expected, dtype)
            assert torch.isnan(out_big[:, c:]).all(), "wrote outside the output view"
            if fused:
                assert_close(sum_big[:, :c], total, dtype)
                assert torch.isnan(sum_big[:, c:]).all()
        # Pointers one element past a 16-byte boundary (input, weight, out): scalar path.
        x = rand((rows * c + 1,), dtype, seed=5)[1:].view(rows, c)
        w = torch.cat([weight[:1], weight])[1:]
        residual = rand((rows * c + 1,), dtype, seed=6)[1:].view(rows, c) if fused else None
        out_flat = poisoned((rows * c + 1,), dtype)
        expected, _ = reference(op, x, w, bias, residual=residual)
        call(op, x, w, bias, residual=residual, out=out_flat[1:].view(rows, c))
        assert_close(out_flat[1:].view(rows, c), expected, dtype)
        assert torch.isnan(out_flat[0])

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("op", OPS)
    def test_non_contiguous(self, op, dtype):
        """Layouts with no [rows, C] view: inputs copied, outputs computed then copied."""
        c = 48
        x = rand((c, 10), dtype).t()
        residual = rand((c, 10), dtype, seed=9).t() if op.startswith("add_") else None
        weight = rand((2 * c,), dtype, seed=1)[::2]  # strided weight
        bias = rand((c,), dtype, seed=2, scale=0.1)
        out = poisoned((c, 10), dtype).t()
        residual_out = poisoned((c, 10), dtype).t() if residual is not None else None
        expected, total = reference(op, x, weight, bias, residual=residual)
        assert call(op, x, weight, bias, residual=residual, out=out, residual_out=residual_out) is out
        assert_close(out, expected, dtype)
        if residual_out is not None:
            assert_close(residual_out, total, dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("op", OPS)
    def test_in_place(self, op, dtype):
        shape = (21, 512)
        x, weight, bias, residual = make_case(op, shape, dtype)
        expected, total = reference(op, x, weight, bias, residual=residual, alpha=0.5)
        if op.startswith("add_"):
            # The Conformer pattern: residual updated in place with the sum, output over the input.
            result = call(op, x, weight, bias, residual=residual, alpha=0.5, out=x, residual_out=residual)
            assert result is x
            assert_close(residual, total, dtype)
        else:
            assert call(op, x, weight, bias, out=x) is x
        assert_close(x, expected, dtype)

    @pytest.mark.parametrize("op", OPS)
    @pytest.mark.parametrize("shape", [(0, 64), (2, 0, 7), (4, 0)], ids=str)
    def test_empty(self, op, shape):
        c = shape[-1]
        x = torch.empty(shape, device="cuda", dtype=torch.float16)
        weight = torch.ones(c, device="cuda", dtype=torch.float16)
        residual = torch.empty_like(x) if op.startswith("add_") else None
        y = call(op, x, weight, residual=residual)
        assert y.shape == shape

    def test_eps_and_alpha(self):
        for op in OPS:
            x, weight, bias, residual = make_case(op, (10, 300), torch.float32)
            expected, _ = reference(op, x, weight, bias, eps=0.5, residual=residual, alpha=-2.0)
            assert_close(call(op, x, weight, bias, eps=0.5, residual=residual, alpha=-2.0), expected, torch.float32)

    def test_constant_rows(self):
        """Zero variance: LayerNorm gives the bias exactly (x - mean is exactly 0)."""
        x = torch.full((4, 1000), 3.25, device="cuda")
        weight = rand((1000,), torch.float32, seed=1)
        bias = rand((1000,), torch.float32, seed=2)
        y = oasr.layer_norm(x, weight, bias)
        torch.testing.assert_close(y, bias.expand(4, -1), rtol=0, atol=0)

    def test_out_on_other_device_raises(self):
        x = rand((2, 8), torch.float32)
        with pytest.raises(ValueError, match="`weight` is on cpu"):
            oasr.layer_norm(x, torch.ones(8))
        with pytest.raises(ValueError, match="`out` is on cpu"):
            oasr.rms_norm(x, torch.ones(8, device="cuda"), out=torch.empty(2, 8))
        with pytest.raises(ValueError, match="`residual` is on cpu"):
            oasr.add_rms_norm(x, torch.ones(2, 8), torch.ones(8, device="cuda"))

    def test_runs_on_current_stream_and_in_graphs(self):
        shape = (16, 1500, 1024)
        x, weight, bias, residual = make_case("add_layer_norm", shape, torch.bfloat16)
        expected, total = reference("add_layer_norm", x, weight, bias, residual=residual)
        expected_ln, _ = reference("layer_norm", x, weight, bias)
        source = poisoned(shape, torch.bfloat16)
        out = poisoned(shape, torch.bfloat16)
        ln_out = poisoned(shape, torch.bfloat16)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            # The input becomes valid only after a spin kernel on this stream: a launch on
            # any other stream would read the NaN placeholder.
            torch.cuda._sleep(40_000_000)
            source.copy_(x)
            oasr.layer_norm(source, weight, bias, out=ln_out)
            oasr.add_layer_norm(source, residual, weight, bias, out=out)
        torch.cuda.current_stream().wait_stream(stream)
        assert_close(ln_out, expected_ln, torch.bfloat16)
        assert_close(out, expected, torch.bfloat16)

        out.fill_(float("nan"))
        residual_out = poisoned(shape, torch.bfloat16)
        rms_out = poisoned(shape, torch.bfloat16)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # a launch on the legacy stream would fail the capture
            oasr.add_layer_norm(x, residual, weight, bias, out=out, residual_out=residual_out)
            oasr.rms_norm(x, weight, out=rms_out)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, expected, torch.bfloat16)
        assert_close(residual_out, total, torch.bfloat16)
        assert_close(rms_out, reference("rms_norm", x, weight)[0], torch.bfloat16)
