"""Tests for oasr.glu, oasr.swish and oasr.bias_activation (its float64 tests: tests/test_gemm_backends.py).

CPU tests (run anywhere): the module compiles for the configured architecture (sm_90a on
a machine without a GPU) and loads; every bad argument raises TypeError/ValueError naming
it, before anything is launched, on CPU tensors as well (shape and dtype checks come
before the device check); the C++ entry points refuse CPU tensors themselves (an internal
invariant: RuntimeError).

GPU tests: results against float64 references computed from the same (rounded) inputs.
Inputs are random and never zero; outputs are poisoned with NaN before the launch, so an
element the kernel fails to write shows up. Tolerances (rtol, atol) per storage dtype:

* float32:  1e-5, 1e-6  -- fp32 math with __expf (relative error ~2^-21 for |x| < 100)
* float16:  2e-3, 1e-3  -- about 2 ulp of the output (one rounding at 2^-11)
* bfloat16: 1.6e-2, 1e-2 -- about 2 ulp of the output (one rounding at 2^-8)

The sizes cover the vector path (C a multiple of 16 bytes, aligned pointers) and the
scalar path (C odd, offset views), tiny and odd sizes, empty tensors, views with row
strides, destination passing, in place (swish), streams and CUDA graphs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import nonzero_randn as rand
from conftest import poisoned
from conftest import requires_cuda as requires_gpu

import oasr
from oasr.jit.families import ACTIVATION, FAMILIES

gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing


DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCES = {
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


def glu_reference(x: torch.Tensor) -> torch.Tensor:
    a, b = x.double().chunk(2, dim=-1)
    return a * torch.sigmoid(b)


def swish_reference(x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    return x * torch.sigmoid(x)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    rtol, atol = TOLERANCES[dtype]
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "output has unwritten (NaN) elements"
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# CPU: the module builds and loads
# ---------------------------------------------------------------------------


def test_activation_module_builds_and_loads():
    spec = ACTIVATION.jit_spec()
    info = spec.build()
    assert info.library.is_file()
    assert any(flag.startswith("-gencode") for flag in spec.nvcc_flags)
    module = spec.load()
    for name in ("glu", "swish", "bias_activation"):
        assert callable(getattr(module, name))


def test_activation_module_registered():
    assert ACTIVATION in FAMILIES and ACTIVATION.ops == ("glu", "swish", "bias_activation")
    assert oasr.glu is not None and oasr.swish is not None and oasr.bias_activation is not None
    assert {"glu", "swish", "bias_activation"} <= set(oasr.__all__)


@pytest.mark.parametrize("name", ["glu", "swish"])
def test_cpp_entry_refuses_cpu_tensors(name):
    """The launchers check their invariants (a RuntimeError): a direct call never reaches a kernel."""
    module = ACTIVATION.jit_spec().build_and_load()
    x = torch.randn(4, 8)
    out = torch.empty(4, 4 if name == "glu" else 8)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        getattr(module, name)(out, x)
    with pytest.raises(RuntimeError, match="`input` must be a CUDA tensor"):
        module.bias_activation(x, x, None, "silu")


# ---------------------------------------------------------------------------
# CPU: bad arguments (checked before any launch)
# ---------------------------------------------------------------------------

_BAD_GLU = [
    ("not a tensor", lambda: oasr.glu([1.0, 2.0]), TypeError, "`input` must be a torch.Tensor"),
    ("int dtype", lambda: oasr.glu(torch.ones(2, 4, dtype=torch.int32)), TypeError, "`input` has dtype"),
    ("float64", lambda: oasr.glu(torch.ones(2, 4, dtype=torch.float64)), TypeError, "`input` has dtype"),
    ("0-d", lambda: oasr.glu(torch.tensor(1.0)), ValueError, "`input` must have at least one dimension"),
    ("odd last dim", lambda: oasr.glu(torch.ones(2, 7)), ValueError, "`input` last dimension must be even"),
    ("odd 2C of one", lambda: oasr.glu(torch.ones(3, 1)), ValueError, "`input` last dimension must be even"),
    ("out not tensor", lambda: oasr.glu(torch.ones(2, 8), out=3), TypeError, "`out` must be a torch.Tensor"),
    ("out wrong shape", lambda: oasr.glu(torch.ones(2, 8), out=torch.empty(2, 8)), ValueError, r"`out` has shape"),
    (
        "out wrong dtype",
        lambda: oasr.glu(torch.ones(2, 8), out=torch.empty(2, 4, dtype=torch.float16)),
        TypeError,
        "`out` has dtype",
    ),
    ("cpu input", lambda: oasr.glu(torch.ones(2, 8)), ValueError, "`input` is on cpu"),
    ("meta input", lambda: oasr.glu(torch.ones(2, 8, device="meta")), ValueError, "`input` is on meta"),
]

_BAD_SWISH = [
    ("not a tensor", lambda: oasr.swish(1.0), TypeError, "`input` must be a torch.Tensor"),
    ("int dtype", lambda: oasr.swish(torch.ones(3, dtype=torch.int64)), TypeError, "`input` has dtype"),
    ("out wrong shape", lambda: oasr.swish(torch.ones(3), out=torch.empty(4)), ValueError, "`out` has shape"),
    (
        "out wrong dtype",
        lambda: oasr.swish(torch.ones(3), out=torch.empty(3, dtype=torch.bfloat16)),
        TypeError,
        "`out` has dtype",
    ),
    ("cpu input", lambda: oasr.swish(torch.ones(3)), ValueError, "`input` is on cpu"),
    (
        "bias_activation cpu",
        lambda: oasr.bias_activation(torch.ones(3), torch.ones(3)),
        ValueError,
        "`input` is on cpu",
    ),
]


@pytest.mark.parametrize("case", _BAD_GLU + _BAD_SWISH, ids=lambda c: c[0])
def test_bad_arguments_raise_before_launch(case):
    _, call, error, message = case
    with pytest.raises(error, match=message):
        call()


@pytest.mark.gpu
@requires_gpu
def test_out_on_other_device_raises():
    x = rand((2, 8), torch.float32)
    with pytest.raises(ValueError, match="`out` is on cpu"):
        oasr.glu(x, out=torch.empty(2, 4))
    with pytest.raises(ValueError, match="`out` is on cpu"):
        oasr.swish(x, out=torch.empty(2, 8))


# ---------------------------------------------------------------------------
# GPU: GLU
# ---------------------------------------------------------------------------

GLU_SHAPES = [
    (5, 1),  # C = 1: scalar
    (7, 3),
    (33, 7),
    (3, 8),  # one fp16/bf16 vector per half
    (17, 33),
    (64, 256),
    (2, 3, 512),
    (9, 4097),
    (32, 250, 256),  # Conformer
    (64, 500, 512),  # many units per thread, grid-stride
]


@gpu
class TestGLU:
    """oasr.glu against float64 references."""

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("shape", GLU_SHAPES, ids=str)
    def test_glu_matches_reference(self, shape, dtype):
        *lead, c = shape
        x = rand((*lead, 2 * c), dtype)
        out = poisoned((*lead, c), dtype)
        result = oasr.glu(x, out=out)
        assert result is out
        assert_close(out, glu_reference(x), dtype)
        # Allocating form, and agreement with torch.
        allocated = oasr.glu(x)
        assert allocated.shape == (*lead, c) and allocated.dtype == dtype
        assert_close(allocated, F.glu(x.double(), dim=-1), dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("c", [8, 64, 5])
    def test_glu_views(self, dtype, c):
        """Row-strided views (vector path when strides allow), offset views (scalar path)."""
        rows = 19
        # Input rows padded by 8 elements: a strided [rows, 2C] view, vectorisable when C allows.
        big = rand((rows, 2 * c + 8), dtype, seed=1)
        x = big[:, : 2 * c]
        out_big = poisoned((rows, c + 8), dtype)
        out = out_big[:, :c]
        oasr.glu(x, out=out)
        assert_close(out, glu_reference(x), dtype)
        assert torch.isnan(out_big[:, c:]).all(), "wrote outside the output view"
        # Misaligned by one element: scalar path.
        flat = rand((rows * 2 * c + 1,), dtype, seed=2)
        x = flat[1:].view(rows, 2 * c)
        out_flat = poisoned((rows * c + 1,), dtype)
        out = out_flat[1:].view(rows, c)
        oasr.glu(x, out=out)
        assert_close(out, glu_reference(x), dtype)
        assert torch.isnan(out_flat[0])
        # Odd row stride (2C + 1): scalar path.
        big = rand((rows, 2 * c + 1), dtype, seed=3)
        x = big[:, : 2 * c]
        out = poisoned((rows, c), dtype)
        oasr.glu(x, out=out)
        assert_close(out, glu_reference(x), dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    def test_glu_non_contiguous(self, dtype):
        x = rand((64, 6), dtype).t()  # [6, 64]: last dimension strided
        out = poisoned((6, 32), dtype)
        oasr.glu(x, out=out)
        assert_close(out, glu_reference(x), dtype)
        # An output with no [rows, C] view: computed, then copied.
        out = poisoned((32, 6), dtype).t()
        assert oasr.glu(x, out=out) is out
        assert_close(out, glu_reference(x), dtype)

    @pytest.mark.parametrize("shape", [(0, 8), (4, 0), (2, 0, 6)], ids=str)
    def test_glu_empty(self, shape):
        x = torch.empty(shape, device="cuda", dtype=torch.float16)
        y = oasr.glu(x)
        assert y.shape == (*shape[:-1], shape[-1] // 2)


# ---------------------------------------------------------------------------
# GPU: Swish
# ---------------------------------------------------------------------------

SWISH_SIZES = [1, 3, 7, 8, 9, 33, 4097, (2, 3, 256), (64, 500, 512), (1 << 20) + 3]


@gpu
class TestSwish:
    """oasr.swish against float64 references."""

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("shape", SWISH_SIZES, ids=str)
    def test_swish_matches_reference(self, shape, dtype):
        shape = shape if isinstance(shape, tuple) else (shape,)
        x = rand(shape, dtype)
        out = poisoned(shape, dtype)
        assert oasr.swish(x, out=out) is out
        assert_close(out, swish_reference(x), dtype)
        assert_close(oasr.swish(x), F.silu(x.double()), dtype)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("offsets", [(1, 1), (1, 2), (3, 0), (0, 5)], ids=str)
    def test_swish_offset_views(self, dtype, offsets):
        """Same alignment phase: vector body with scalar head and tail; different: scalar."""
        n = 1001
        in_offset, out_offset = offsets
        source = rand((n + in_offset,), dtype)
        x = source[in_offset:]
        out_flat = poisoned((n + out_offset,), dtype)
        out = out_flat[out_offset:]
        oasr.swish(x, out=out)
        assert_close(out, swish_reference(x), dtype)
        assert torch.isnan(out_flat[:out_offset]).all()

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    def test_swish_in_place_and_strided(self, dtype):
        x = rand((37, 129), dtype)
        expected = swish_reference(x)
        assert oasr.swish(x, out=x) is x
        assert_close(x, expected, dtype)
        # Non-contiguous input and output.
        y = rand((40, 30), dtype).t()
        out = poisoned((40, 30), dtype).t()
        oasr.swish(y, out=out)
        assert_close(out, swish_reference(y), dtype)
        # In place on a non-contiguous tensor.
        expected = swish_reference(y)
        oasr.swish(y, out=y)
        assert_close(y, expected, dtype)

    def test_swish_empty(self):
        for shape in [(0,), (3, 0, 2)]:
            assert oasr.swish(torch.empty(shape, device="cuda")).shape == shape


# ---------------------------------------------------------------------------
# GPU: streams and CUDA graphs
# ---------------------------------------------------------------------------


@gpu
class TestStreams:
    """Kernels run on torch's current stream and can be captured in CUDA graphs."""

    def test_runs_on_current_stream_and_in_graphs(self):
        x = rand((64, 250, 512), torch.float16)
        glu_out = poisoned((64, 250, 256), torch.float16)
        swish_out = poisoned((64, 250, 512), torch.float16)
        # On a side stream, the input becomes valid only after a ~20 ms spin kernel: a launch
        # on any other stream would read the NaN placeholder.
        source = poisoned(x.shape, x.dtype)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.cuda._sleep(40_000_000)
            source.copy_(x)
            oasr.glu(source, out=glu_out)
            oasr.swish(source, out=swish_out)
        torch.cuda.current_stream().wait_stream(stream)
        assert_close(glu_out, glu_reference(x), torch.float16)
        assert_close(swish_out, swish_reference(x), torch.float16)

        glu_out.fill_(float("nan"))
        swish_out.fill_(float("nan"))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # launching on the legacy stream would fail the capture
            oasr.glu(x, out=glu_out)
            oasr.swish(x, out=swish_out)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(glu_out, glu_reference(x), torch.float16)
        assert_close(swish_out, swish_reference(x), torch.float16)
