"""Property-based tests (hypothesis) of every op against float64 torch on the GPU.

Each test draws random shapes (empty and one-element ones included), dtypes, scalars,
options and a layout for every tensor argument and for ``out``: contiguous, offset by a
few elements (a pointer off the 16-byte boundary), rows padded (a row stride larger than
the row), or channels strided (a transposed view, the copy path). Only the view's elements
are written: the storage around a view stays uninitialised (compute-sanitizer's initcheck
catches a kernel that reads it), and outputs are poisoned with NaN. Every op has a test
of its own (the norms by parametrisation) that runs ``OASR_PROPERTY_EXAMPLES`` cases
(default 1000) per run with a fresh random seed (hypothesis prints the failing case and
how to reproduce it).

Tolerances (rtol, atol) are those of each family's test file: the element-wise ops
(scale is compared bit for bit with torch's ``x * factor``) ``DEFAULT_TOLERANCES``
(tests/conftest.py); the norms ``tests/test_norm.py``'s; conv1d ``tests/test_conv1d.py``'s;
gemm and bmm ``gemm_tolerance`` (tests/conftest.py), plus ``TANH_ERROR`` times the largest
pre-activation for the epilogues computed with the hardware ``tanh.approx`` (documented in
``oasr.gemm``). Their cases draw from the configurations the rule picks, which
``python -m oasr.jit build --tests`` builds in parallel beforehand (one JIT module each).
"""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn.functional as F
from conftest import gemm_tolerance, get_rtol_atol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv1d import ACTIVATIONS
from test_conv1d import reference as conv_reference
from test_gemm import ACTS as GEMM_ACTIVATIONS
from test_gemm import reference as gemm_reference
from test_norm import reference as norm_reference

import oasr
from oasr import _checks

pytestmark = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing

DEVICE = "cuda"
EXAMPLES = int(os.environ.get("OASR_PROPERTY_EXAMPLES", "1000"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DTYPES = st.sampled_from([torch.float32, torch.float16, torch.bfloat16])
LAYOUTS = ("contiguous", "offset", "padded_rows", "strided_channels")
NORM_TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
CONV_TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}


def layouts(*, channels_contiguous: bool = False) -> st.SearchStrategy[str]:
    return st.sampled_from(LAYOUTS[:3] if channels_contiguous else LAYOUTS)


def placed(values: torch.Tensor, layout: str, shift: int) -> torch.Tensor:
    """A tensor holding ``values`` in ``layout``; the storage outside the view is left unwritten.

    ``shift`` (1..7) is the offset in elements ("offset") or the row padding ("padded_rows").
    """
    shape = values.shape
    if layout == "offset":
        base = torch.empty(values.numel() + shift, dtype=values.dtype, device=values.device)
        view = base[shift:].view(shape)
    elif layout == "padded_rows" and values.dim() >= 2:
        base = torch.empty(*shape[:-1], shape[-1] + shift, dtype=values.dtype, device=values.device)
        view = base[..., : shape[-1]]
    elif layout == "strided_channels" and values.dim() >= 2:
        base = torch.empty(*shape[:-2], shape[-1], shape[-2], dtype=values.dtype, device=values.device)
        view = base.transpose(-1, -2)
    else:
        view = torch.empty(shape, dtype=values.dtype, device=values.device)
    view.copy_(values)
    return view


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, layout: str, shift: int) -> torch.Tensor:
    return placed(torch.full(shape, float("nan"), dtype=dtype, device=DEVICE), layout, shift)


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return (scale * torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype=dtype, device=DEVICE)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tolerance: tuple[float, float]) -> None:
    assert not torch.isnan(actual).any(), "output has unwritten (NaN) elements"
    rtol, atol = tolerance
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


MAX_ELEMENTS = 1 << 20
"""Shapes are capped at about this many elements (a few ms per case)."""


def capped(shape: list[int]) -> tuple[int, ...]:
    """``shape`` with its leading dimensions shrunk until it holds at most ``MAX_ELEMENTS``."""
    shape = list(shape)
    for i in range(len(shape) - 1):
        rest = max(1, math.prod(shape[i + 1 :]))
        shape[i] = min(shape[i], max(1, MAX_ELEMENTS // rest))
    return tuple(shape)


def rows(draw: st.DrawFn, channels: st.SearchStrategy[int]) -> tuple[int, ...]:
    """A ``[..., C]`` shape: zero to two leading dimensions of 0..9 (or up to 300) rows."""
    lead = draw(st.lists(st.one_of(st.integers(0, 9), st.integers(10, 300)), min_size=0, max_size=2))
    return capped([*lead, draw(channels)])


SHIFTS = st.integers(1, 7)


@st.composite
def scale_cases(draw: st.DrawFn) -> dict:
    dtype = draw(DTYPES)
    shape = capped(draw(st.lists(st.one_of(st.integers(0, 9), st.integers(10, 3000)), min_size=1, max_size=3)))
    factor = draw(st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, -0.0, float("inf"), float("nan")])))
    return {
        "x": placed(random(shape, dtype, draw(st.integers(0, 2**31))), draw(layouts()), draw(SHIFTS)),
        "factor": factor,
        "out": draw(st.sampled_from(["new", "in_place", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }


@PROPERTY
@given(case=scale_cases())
def test_scale_matches_torch(case: dict) -> None:
    x, factor = case["x"], case["factor"]
    expected = x * factor  # bit-identical: the kernel rounds factor to fp32 as torch does
    if case["out"] == "new":
        actual = oasr.scale(x, factor)
    elif case["out"] == "in_place":
        actual = oasr.scale(x, factor, out=x)
    else:
        out = poisoned(tuple(x.shape), x.dtype, case["out"], case["out_shift"])
        actual = oasr.scale(x, factor, out=out)
        assert actual is out
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


@st.composite
def activation_cases(draw: st.DrawFn, gated: bool) -> dict:
    dtype = draw(DTYPES)
    shape = rows(draw, st.one_of(st.integers(1, 40), st.integers(41, 1500)))
    if gated:
        shape = (*shape[:-1], 2 * shape[-1])
    return {
        "x": placed(random(shape, dtype, draw(st.integers(0, 2**31)), scale=3.0), draw(layouts()), draw(SHIFTS)),
        "out": draw(st.sampled_from(["new", *LAYOUTS] if gated else ["new", "in_place", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }


@PROPERTY
@given(case=activation_cases(gated=True))
def test_glu_matches_float64(case: dict) -> None:
    x = case["x"]
    expected = F.glu(x.double(), -1)
    out = None if case["out"] == "new" else poisoned(tuple(expected.shape), x.dtype, case["out"], case["out_shift"])
    actual = oasr.glu(x, out=out)
    assert_close(actual, expected, get_rtol_atol(x.dtype))


@PROPERTY
@given(case=activation_cases(gated=False))
def test_swish_matches_float64(case: dict) -> None:
    x = case["x"]
    expected = F.silu(x.double())
    if case["out"] == "new":
        actual = oasr.swish(x)
    elif case["out"] == "in_place":
        actual = oasr.swish(x, out=x)
    else:
        actual = oasr.swish(x, out=poisoned(tuple(x.shape), x.dtype, case["out"], case["out_shift"]))
    assert_close(actual, expected, get_rtol_atol(x.dtype))


@st.composite
def norm_cases(draw: st.DrawFn, fused: bool) -> dict:
    dtype = draw(DTYPES)
    # Up to 20000 channels: the warp, block, shared-memory kernels (the loop kernel's rows,
    # beyond ~58000, are tests/test_norm.py's).
    shape = rows(draw, st.one_of(st.integers(1, 1100), st.integers(1101, 20000)))
    if len(shape) > 1 and shape[-1] > 1100:
        shape = (*(min(n, 4) for n in shape[:-1]), shape[-1])  # few rows of wide ones
    seed = draw(st.integers(0, 2**31))
    case = {
        "x": placed(random(shape, dtype, seed), draw(layouts()), draw(SHIFTS)),
        "weight": placed(random(shape[-1:], dtype, seed + 1), draw(layouts()), draw(SHIFTS)),
        "bias": random(shape[-1:], dtype, seed + 2) if draw(st.booleans()) else None,
        "eps": draw(st.floats(1e-8, 1e-1)),
        "out": draw(st.sampled_from(["new", "in_place", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }
    if fused:
        case["residual"] = placed(random(shape, dtype, seed + 3), draw(layouts()), draw(SHIFTS))
        case["alpha"] = draw(st.floats(-4, 4))
        case["residual_out"] = draw(st.sampled_from([None, "residual", *LAYOUTS]))
        case["residual_out_shift"] = draw(SHIFTS)
    return case


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@PROPERTY
@given(case=norm_cases(fused=False))
def test_norms_match_float64(case: dict, rms: bool) -> None:
    x, weight, bias, eps = case["x"], case["weight"], case["bias"], case["eps"]
    expected, _ = norm_reference("rms_norm" if rms else "layer_norm", x, weight, bias, eps)
    op = oasr.rms_norm if rms else oasr.layer_norm
    if case["out"] == "new":
        out = None
    elif case["out"] == "in_place":
        out = x
    else:
        out = poisoned(tuple(x.shape), x.dtype, case["out"], case["out_shift"])
    actual = op(x, weight, bias, eps, out=out)
    assert_close(actual, expected, NORM_TOLERANCES[x.dtype])


@pytest.mark.parametrize("rms", [False, True], ids=["add_layer_norm", "add_rms_norm"])
@PROPERTY
@given(case=norm_cases(fused=True))
def test_fused_norms_match_float64(case: dict, rms: bool) -> None:
    x, residual, weight, bias, eps, alpha = (case[k] for k in ("x", "residual", "weight", "bias", "eps", "alpha"))
    expected, total = norm_reference("add_rms_norm" if rms else "add_layer_norm", x, weight, bias, eps, residual, alpha)
    # The norm sees the unrounded fp32 sum; its rounding to the storage dtype is residual_out's.
    if case["out"] == "new":
        out = None
    elif case["out"] == "in_place":
        out = x
    else:
        out = poisoned(tuple(x.shape), x.dtype, case["out"], case["out_shift"])
    residual_out = case["residual_out"]
    if residual_out == "residual":
        residual_out = residual
    elif residual_out is not None:
        residual_out = poisoned(tuple(x.shape), x.dtype, residual_out, case["residual_out_shift"])
    op = oasr.add_rms_norm if rms else oasr.add_layer_norm
    actual = op(x, residual, weight, bias, eps, alpha, out=out, residual_out=residual_out)
    assert_close(actual, expected, NORM_TOLERANCES[x.dtype])
    if residual_out is not None:
        assert_close(residual_out, total, get_rtol_atol(x.dtype))


@st.composite
def conv_cases(draw: st.DrawFn) -> dict:
    dtype = draw(DTYPES)
    b, c = draw(st.integers(0, 3)), draw(st.one_of(st.integers(1, 40), st.integers(41, 600)))
    k = draw(st.one_of(st.sampled_from([15, 31]), st.integers(1, 63)))
    left, right = draw(st.integers(0, 70)), draw(st.integers(0, 70))
    t = draw(st.integers(max(1, k - left - right), 200))
    seed = draw(st.integers(0, 2**31))
    x = placed(random((b, t, c), dtype, seed), draw(layouts()), draw(SHIFTS))
    weight = random((k, c), dtype, seed + 1, scale=k**-0.5)
    if draw(st.booleans()):
        weight = weight.unsqueeze(1)  # the [K, 1, C] form
    mask = None
    if draw(st.booleans()):
        mask = torch.rand((b, t), generator=torch.Generator().manual_seed(seed), device="cpu") > 0.3
        mask = mask.to(DEVICE)
        if draw(st.booleans()):
            mask = mask.unsqueeze(-1)
    return {
        "x": x,
        "weight": weight,
        "bias": random((c,), dtype, seed + 2, scale=0.1) if draw(st.booleans()) else None,
        "padding": draw(st.sampled_from([(left, right), left])),
        "activation": draw(st.sampled_from(list(ACTIVATIONS))),
        "mask": mask,
        "out": draw(st.sampled_from(["new", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }


@PROPERTY
@given(case=conv_cases())
def test_depthwise_conv1d_matches_float64(case: dict) -> None:
    x, weight, bias, padding, activation, mask = (
        case[k] for k in ("x", "weight", "bias", "padding", "activation", "mask")
    )
    left, right = (padding, padding) if isinstance(padding, int) else padding
    if x.shape[1] + left + right < weight.shape[0]:
        padding = (left, weight.shape[0] - x.shape[1] - left)  # the symmetric int was too short
    expected = conv_reference(x, weight, bias, padding, activation, mask)
    out = None if case["out"] == "new" else poisoned(tuple(expected.shape), x.dtype, case["out"], case["out_shift"])
    actual = oasr.depthwise_conv1d(x, weight, bias, padding, activation, mask=mask, out=out)
    assert_close(actual, expected, CONV_TOLERANCES[x.dtype])


@st.composite
def step_cases(draw: st.DrawFn) -> dict:
    dtype = draw(DTYPES)
    b, c = draw(st.integers(1, 3)), draw(st.one_of(st.integers(1, 40), st.integers(41, 600)))
    k = draw(st.one_of(st.sampled_from([15, 31]), st.integers(2, 63)))
    length = draw(st.one_of(st.integers(1, k + 1), st.integers(1, 100)))
    seed = draw(st.integers(0, 2**31))
    return {
        "chunk": placed(random((b, length, c), dtype, seed), draw(layouts()), draw(SHIFTS)),
        "state": placed(random((b, k - 1, c), dtype, seed + 3), draw(layouts(channels_contiguous=True)), draw(SHIFTS)),
        "weight": random((k, c), dtype, seed + 1, scale=k**-0.5),
        "bias": random((c,), dtype, seed + 2, scale=0.1) if draw(st.booleans()) else None,
        "activation": draw(st.sampled_from(list(ACTIVATIONS))),
        "out": draw(st.sampled_from(["new", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }


@PROPERTY
@given(case=step_cases())
def test_depthwise_conv1d_step_matches_float64(case: dict) -> None:
    chunk, state, weight, bias, activation = (case[k] for k in ("chunk", "state", "weight", "bias", "activation"))
    frames = torch.cat([state, chunk], dim=1)
    expected = conv_reference(frames, weight, bias, 0, activation)
    expected_state = frames[:, frames.shape[1] - state.shape[1] :].clone()
    out = None if case["out"] == "new" else poisoned(tuple(chunk.shape), chunk.dtype, case["out"], case["out_shift"])
    actual = oasr.depthwise_conv1d_step(chunk, state, weight, bias, activation, out=out)
    assert_close(actual, expected, CONV_TOLERANCES[chunk.dtype])
    torch.testing.assert_close(state, expected_state, rtol=0, atol=0)


HALF_DTYPES = st.sampled_from(_checks.HALF_DTYPES)  # what gemm and bmm take
TANH_ERROR = 3e-4
"""Absolute error of an epilogue activation through ``tanh.approx``, per unit of its input."""


def uses_tanh_approx(activation: str | None) -> bool:
    return activation in ("gelu_tanh", "silu")


@st.composite
def gemm_cases(draw: st.DrawFn) -> dict:
    dtype = draw(HALF_DTYPES)
    m, n = (
        draw(st.one_of(st.integers(0, 40), st.integers(41, 3000))),
        draw(st.one_of(st.integers(1, 40), st.integers(41, 700))),
    )
    k = draw(st.one_of(st.integers(0, 40), st.integers(41, 700)))
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=1))
    seed = draw(st.integers(0, 2**31))
    return {
        "x": placed(random((*lead, m, k), dtype, seed), draw(layouts(channels_contiguous=True)), draw(SHIFTS)),
        "weight": placed(
            random((n, k), dtype, seed + 1, scale=max(k, 1) ** -0.5),
            draw(layouts(channels_contiguous=True)),
            draw(SHIFTS),
        ),
        "bias": random((n,), dtype, seed + 2) if draw(st.booleans()) else None,
        "activation": draw(st.sampled_from(list(GEMM_ACTIVATIONS))),
        "out": draw(st.sampled_from(["new", *LAYOUTS])),
        "out_shift": draw(SHIFTS),
    }


@PROPERTY
@given(case=gemm_cases())
def test_gemm_matches_float64(case: dict) -> None:
    x, weight, bias, activation = (case[k] for k in ("x", "weight", "bias", "activation"))
    pre = gemm_reference(x, weight, bias)
    expected = GEMM_ACTIVATIONS[activation](pre)
    out = None if case["out"] == "new" else poisoned(tuple(expected.shape), x.dtype, case["out"], case["out_shift"])
    actual = oasr.gemm(x, weight, bias, activation, out=out)
    rtol, atol = gemm_tolerance(x.dtype, x.shape[-1])
    if uses_tanh_approx(activation) and pre.numel():
        atol += TANH_ERROR * pre.abs().max().item()
    assert_close(actual, expected, (rtol, atol))


@st.composite
def bmm_cases(draw: st.DrawFn) -> dict:
    dtype = draw(HALF_DTYPES)
    batch = draw(st.one_of(st.integers(0, 3), st.integers(4, 64)))
    m, n = (
        draw(st.one_of(st.integers(0, 40), st.integers(41, 400))),
        draw(st.one_of(st.integers(1, 40), st.integers(41, 400))),
    )
    k = draw(st.one_of(st.integers(0, 70), st.integers(71, 400)))
    seed = draw(st.integers(0, 2**31))
    a = placed(random((batch, m, k), dtype, seed, scale=max(k, 1) ** -0.5), draw(layouts()), draw(SHIFTS))
    values = random((batch, k, n), dtype, seed + 1)
    form = draw(st.sampled_from(["values", "keys", *LAYOUTS]))
    if form == "keys":  # scores: keys [batch, N, K] passed transposed
        b = placed(
            values.transpose(1, 2).contiguous(), draw(layouts(channels_contiguous=True)), draw(SHIFTS)
        ).transpose(1, 2)
    elif form == "values":
        b = values
    else:
        b = placed(values, form, draw(SHIFTS))
    return {"a": a, "b": b, "out": draw(st.sampled_from(["new", *LAYOUTS])), "out_shift": draw(SHIFTS)}


@PROPERTY
@given(case=bmm_cases())
def test_bmm_matches_float64(case: dict) -> None:
    a, b = case["a"], case["b"]
    expected = a.double() @ b.double()
    out = None if case["out"] == "new" else poisoned(tuple(expected.shape), a.dtype, case["out"], case["out_shift"])
    actual = oasr.bmm(a, b, out=out)
    assert_close(actual, expected, gemm_tolerance(a.dtype, a.shape[-1]))
