"""oasr.scale against torch and a float64 reference (GPU), and its argument checks (CPU)."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import get_rtol_atol, poisoned_like

import oasr
from oasr._checks import check_real_scalar

FACTOR = 1.7
SIZES = [0, 1, 7, 4097, 2**20 + 3, 3 * 2**24 + 5]


def _check(result: torch.Tensor, x: torch.Tensor, factor: float = FACTOR) -> None:
    # torch computes x * factor in fp32 and rounds once, as oasr does: equal bit for bit.
    assert torch.equal(result, x * factor)
    rtol, atol = get_rtol_atol(x.dtype)
    expected = x.double() * float(torch.tensor(factor, dtype=torch.float32))
    torch.testing.assert_close(result.double(), expected, rtol=rtol, atol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_matches_reference(device, dtype_all, n):
    x = torch.randn(n, dtype=dtype_all, device=device)
    out = poisoned_like(x)
    result = oasr.scale(x, FACTOR, out=out)
    assert result.data_ptr() == out.data_ptr()
    _check(result, x)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1, 3, 5])
def test_offset_views_take_head_and_tail(device, dtype_all, offset):
    base = torch.randn(4099, dtype=dtype_all, device=device)
    x = base[offset:]
    _check(oasr.scale(x, FACTOR), x)
    # The output at another 16-byte phase than the input forces the scalar path.
    out_base = poisoned_like(torch.empty(base.numel() + 1, dtype=dtype_all, device=device))
    out = out_base[offset + 1 : offset + 1 + x.numel()]
    oasr.scale(x, FACTOR, out=out)
    _check(out, x)
    assert out_base[: offset + 1].isnan().all() and out_base[offset + 1 + x.numel() :].isnan().all()


@pytest.mark.gpu
def test_non_contiguous_input_and_output(device, dtype_all):
    x = torch.randn(64, 130, dtype=dtype_all, device=device).t()
    _check(oasr.scale(x, FACTOR), x)
    out = poisoned_like(x.t().contiguous()).t()
    oasr.scale(x, FACTOR, out=out)
    _check(out, x)


@pytest.mark.gpu
def test_multidimensional_and_negative_factor(device, dtype_all):
    x = torch.randn(3, 5, 7, dtype=dtype_all, device=device)
    _check(oasr.scale(x, -0.25), x, -0.25)
    _check(oasr.scale(x, 3), x, 3)


@pytest.mark.gpu
def test_in_place(device, dtype_all):
    x = torch.randn(10_001, dtype=dtype_all, device=device)
    original = x.clone()
    assert oasr.scale(x, FACTOR, out=x) is x
    _check(x, original)
    view = original.clone()[1:]
    expected = view * FACTOR
    oasr.scale(view, FACTOR, out=view)
    assert torch.equal(view, expected)


@pytest.mark.gpu
def test_runs_on_current_stream(device):
    x = torch.randn(2**20, dtype=torch.float16, device=device)
    out = poisoned_like(x)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # hold the side stream for tens of milliseconds
        oasr.scale(x, FACTOR, out=out)
    # Had the kernel gone to the default stream, this copy would see its result.
    seen_on_default_stream = out.clone()
    torch.cuda.synchronize()
    assert seen_on_default_stream.isnan().all()
    _check(out, x)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay(device, dtype_all):
    x = torch.randn(5000, dtype=dtype_all, device=device)
    out = torch.empty_like(x)
    oasr.scale(x, FACTOR, out=out)  # build and warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        oasr.scale(x, FACTOR, out=out)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(out, x)


@pytest.mark.gpu
def test_out_mismatches_raise_before_launch(device):
    x = torch.randn(16, device=device)
    with pytest.raises(ValueError, match="`out` has shape"):
        oasr.scale(x, 2.0, out=torch.empty(15, device=device))
    with pytest.raises(TypeError, match="`out` has dtype"):
        oasr.scale(x, 2.0, out=torch.empty(16, device=device, dtype=torch.float16))
    with pytest.raises(ValueError, match="`out` is on cpu"):
        oasr.scale(x, 2.0, out=torch.empty(16))
    with pytest.raises(TypeError, match="`factor` must be a real number"):
        oasr.scale(x, "2")
    with pytest.raises(TypeError, match=re.escape("`input` has dtype torch.int32")):
        oasr.scale(torch.ones(4, dtype=torch.int32, device=device), 2.0)


def test_cpu_tensor_gives_one_clear_sentence():
    with pytest.raises(ValueError) as info:
        oasr.scale(torch.randn(8), 2.0)
    message = str(info.value)
    assert message.startswith("oasr.scale: `input` is on cpu")
    assert "CUDA" in message and "\n" not in message


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match=re.escape("`input` must be a torch.Tensor, got list")):
        oasr.scale([1.0, 2.0], 2.0)


def test_out_checks_name_the_argument():
    """Checked before devices, so on CPU tensors too."""
    x = torch.empty(4, 5, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"`out` has shape \(5, 4\), expected \(4, 5\)"):
        oasr.scale(x, 2.0, out=torch.empty(5, 4, dtype=torch.float16))
    with pytest.raises(TypeError, match=re.escape("`out` has dtype torch.float32, expected torch.float16")):
        oasr.scale(x, 2.0, out=torch.empty(4, 5))
    with pytest.raises(TypeError, match=re.escape("`out` must be a torch.Tensor, got list")):
        oasr.scale(x, 2.0, out=[1.0])
    with pytest.raises(TypeError, match="`factor` must be a real number"):
        oasr.scale(x, "2", out=torch.empty(5, 4))  # the factor comes before `out`


@pytest.mark.parametrize("value", ["2", None, True, torch.tensor(2.0)])
def test_factor_must_be_a_real_number(value):
    with pytest.raises(TypeError, match="`factor` must be a real number"):
        check_real_scalar("scale", "factor", value)


def test_scale_is_exported():
    assert oasr.__all__.count("scale") == 1 and oasr.scale.__doc__
