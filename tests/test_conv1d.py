"""Tests for oasr.depthwise_conv1d, oasr.depthwise_conv1d_step and oasr.fold_batch_norm.

CPU tests (run anywhere): the module compiles for the configured architecture (sm_90a on
a machine without a GPU) and loads; every bad argument raises TypeError/ValueError naming
it before anything is launched (types, dtypes and shapes are checked before devices, so
CPU tensors reach those checks); fold_batch_norm against torch's Conv1d + BatchNorm1d in
eval mode; the harness entry's work model and its torch backend against its reference.

GPU tests: results against float64 references computed from the same (rounded) inputs,
outputs poisoned with NaN before each launch. Every kernel and path: the exact-K kernels
(K = 15, 31) and the generic one (K = 1, 2, 3, 7, 63), the vector path (C a multiple of
2, aligned) and the scalar one (odd C, a pointer off by one element), padding forms
(none, same, causal, asymmetric, larger than K), masks ([B, T] and [B, T, 1], prefix and
random), each activation, strided batch views, an empty batch. Streaming: a sequence fed
in chunks of 1, K - 2, K - 1, K and 37 frames gives the frames of one causal call and
leaves the last K - 1 frames in the state; the step is captured in a CUDA graph and replayed.

Tolerances (rtol, atol) per storage dtype: fp32 sums of K products (error ~ K * 2^-24 of
sum |w x|, unit-scale data) and one rounding to the storage type:

* float32:  1e-5, 1e-5
* float16:  1e-3, 1e-3   -- about 2 ulp of the output (one rounding at 2^-11)
* bfloat16: 1e-2, 1e-2   -- about 2 ulp of the output (one rounding at 2^-8)
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import RecordingLaunchers, standing_in

import oasr.conv1d as conv1d
from oasr import _checks
from oasr.jit import families

gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}
ACTIVATIONS = {None: lambda y: y, "silu": F.silu, "relu": F.relu, "gelu": F.gelu}


def dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def randn(shape, dtype, device="cuda", seed=0, scale=1.0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return (scale * torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype=dtype, device=device)


def make_case(b, t, c, k, dtype, device="cuda", seed=0, bias=True):
    x = randn((b, t, c), dtype, device, seed)
    weight = randn((k, c), dtype, device, seed + 1, scale=k**-0.5)
    bb = randn((c,), dtype, device, seed + 2, scale=0.1) if bias else None
    return x, weight, bb


def reference(x, weight, bias=None, padding=0, activation=None, mask=None):
    """float64 ``act(F.conv1d(pad(x * mask)) + bias)`` in ``[B, T_out, C]``."""
    left, right = (padding, padding) if isinstance(padding, int) else padding
    xd = x.double()
    if mask is not None:
        xd = xd * mask.reshape(x.shape[0], x.shape[1], 1).double()
    k, c = weight.shape[0], weight.shape[-1]
    w = weight.double().reshape(k, c).t().unsqueeze(1)
    y = F.conv1d(F.pad(xd.transpose(1, 2), (left, right)), w, None if bias is None else bias.double(), groups=c)
    return ACTIVATIONS[activation](y).transpose(1, 2)


def assert_close(actual, expected, dtype):
    rtol, atol = TOLERANCES[dtype]
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "output has unwritten (NaN) elements"
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


def poisoned(shape, dtype, device="cuda"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


# ---------------------------------------------------------------------------
# CPU: the module builds and loads
# ---------------------------------------------------------------------------


@pytest.mark.slow  # the conv1d module, a minute's build here: the full tier
def test_module_builds_and_loads():
    spec = families.CONV1D.jit_spec()
    info = spec.build()
    assert info.library.is_file()
    assert any(flag.startswith("-gencode") for flag in spec.nvcc_flags)
    module = spec.load()
    assert callable(module.depthwise_conv1d)
    assert callable(module.depthwise_conv1d_step)


def test_family_declares_the_ops():
    assert families.CONV1D.ops == ("depthwise_conv1d", "depthwise_conv1d_step", "fold_batch_norm")
    for op in families.CONV1D.ops:
        assert callable(getattr(conv1d, op))


@pytest.mark.slow  # builds the conv1d module: the full tier
def test_cpp_entry_refuses_cpu_tensors():
    module = families.CONV1D.jit_spec().build_and_load()
    x, w = torch.randn(2, 8, 4), torch.randn(3, 4)
    with pytest.raises(Exception, match="CUDA"):
        module.depthwise_conv1d(torch.empty(2, 6, 4), x, w, None, 0, 0, None, None)
    with pytest.raises(Exception, match="CUDA"):
        module.depthwise_conv1d_step(torch.empty(2, 8, 4), x, torch.zeros(2, 2, 4), w, None, None)
    # Names are read first: every one the op takes reaches the tensors' checks, others are refused by name.
    for name in ("silu", "relu", "gelu"):
        with pytest.raises(Exception, match="CUDA"):
            module.depthwise_conv1d(torch.empty(2, 6, 4), x, w, None, 0, 0, None, name)
        with pytest.raises(Exception, match="CUDA"):
            module.depthwise_conv1d_step(torch.empty(2, 8, 4), x, torch.zeros(2, 2, 4), w, None, name)
    with pytest.raises(Exception, match="unknown activation 'swish'"):
        module.depthwise_conv1d(torch.empty(2, 6, 4), x, w, None, 0, 0, None, "swish")
    with pytest.raises(Exception, match="this kernel has no activation 'gelu_tanh'"):
        module.depthwise_conv1d(torch.empty(2, 6, 4), x, w, None, 0, 0, None, "gelu_tanh")


# ---------------------------------------------------------------------------
# CPU: bad arguments, checked before any launch
# ---------------------------------------------------------------------------


def _t(*shape, dtype=torch.float32):
    return torch.ones(shape, dtype=dtype)


B, T, C, K = 2, 10, 4, 3
_BAD_CONV = [
    # (kwargs overriding a valid CPU call, exception, message fragment)
    ({"input": [1.0]}, TypeError, "`input` must be a torch.Tensor"),
    ({"input": _t(B, T, C, dtype=torch.int32)}, TypeError, "`input` has dtype"),
    ({"input": _t(T, C)}, ValueError, "`input` must be \\[B, T, C\\]"),
    ({"weight": _t(K, C, dtype=torch.float16)}, TypeError, "`weight` has dtype"),
    ({"weight": _t(K, C + 1)}, ValueError, "`weight` has shape"),
    ({"weight": _t(K, 2, C)}, ValueError, "`weight` has shape"),
    ({"weight": _t(C)}, ValueError, "`weight` has shape"),
    ({"weight": "w"}, TypeError, "`weight` must be a torch.Tensor"),
    ({"bias": _t(C + 1)}, ValueError, "`bias` has shape"),
    ({"bias": _t(C, dtype=torch.bfloat16)}, TypeError, "`bias` has dtype"),
    ({"padding": -1}, ValueError, "`padding` must be >= 0"),
    ({"padding": (1, 2, 3)}, TypeError, "`padding`"),
    ({"padding": 1.5}, TypeError, "`padding`"),
    ({"padding": True}, TypeError, "`padding`"),
    ({"weight": _t(T + 3, C), "padding": 1}, ValueError, "K=13 .*`weight`.*T \\+ left \\+ right = 10 \\+ 1 \\+ 1"),
    ({"activation": "tanh"}, ValueError, "unknown `activation`"),
    ({"activation": 1}, TypeError, "`activation`"),
    ({"mask": _t(B, T)}, TypeError, "`mask` has dtype"),
    ({"mask": torch.ones(B, T + 1, dtype=torch.bool)}, ValueError, "`mask` has shape"),
    ({"mask": torch.ones(B, T, 2, dtype=torch.bool)}, ValueError, "`mask` has shape"),
    ({"mask": [True]}, TypeError, "`mask` must be a torch.Tensor"),
    ({"out": _t(B, T, C)}, ValueError, "`out` has shape"),
    ({"out": _t(B, T - K + 1, C, dtype=torch.float16)}, TypeError, "`out` has dtype"),
    ({}, ValueError, "CUDA"),  # valid on CPU: refused for the device only
]


@pytest.mark.parametrize("override,error,match", _BAD_CONV, ids=[m for _, _, m in _BAD_CONV])
def test_conv_bad_arguments(override, error, match):
    args = {"input": _t(B, T, C), "weight": _t(K, C), "bias": _t(C), "padding": 0, "activation": None}
    args.update(override)
    with pytest.raises(error, match=match):
        conv1d.depthwise_conv1d(**args)


@pytest.fixture
def launches():
    """CPU passes the device check and the module records its launches, so the memory and
    autograd checks (which come after the device check) run on CPU tensors."""
    stub = RecordingLaunchers()
    _checks.ready_devices(families.CONV1D).add(torch.device("cpu"))
    with standing_in(stub, [families.CONV1D]):
        yield stub.calls
    _checks.forget_devices()


def refused(calls, call, message):
    with pytest.raises(ValueError, match=message):
        call()
    assert calls == [], "launched before refusing"


def test_conv_out_overlapping_input_refused(launches):
    buffer = torch.zeros(B, T + 4, C)
    x = buffer[:, :T]
    out = buffer[:, 2 : 2 + T - K + 1]  # partial overlap
    refused(launches, lambda: conv1d.depthwise_conv1d(x, _t(K, C), out=out), "`out` overlaps `input` in memory")
    x = torch.zeros(B, T, C)
    in_place = "`out` and `input` must be different tensors"
    refused(launches, lambda: conv1d.depthwise_conv1d(x, _t(1, C), out=x), in_place)
    expanded = torch.zeros(1, C).expand(B, T - K + 1, C)  # every frame one row of memory
    refused(launches, lambda: conv1d.depthwise_conv1d(x, _t(K, C), out=expanded), "`out` has elements that share")
    # Disjoint halves of one buffer are fine.
    halves = torch.zeros(1, 2 * T, C)  # one batch row: the two byte ranges are apart
    conv1d.depthwise_conv1d(halves[:, :T], _t(K, C), out=halves[:, T : 2 * T - K + 1])
    conv1d.depthwise_conv1d(x, _t(K, C), out=torch.zeros(B, T - K + 1, C))
    assert launches == ["depthwise_conv1d"] * 2


@pytest.mark.parametrize("name", ["input", "weight", "bias", "out"])
def test_conv_requires_grad_refused(launches, name):
    args = {"input": _t(B, T, C), "weight": _t(K, C), "bias": _t(C), "out": _t(B, T - K + 1, C)}
    args[name].requires_grad_(True)
    message = rf"^oasr\.depthwise_conv1d: `{name}` requires grad, but Oasr ops have no backward"
    refused(launches, lambda: conv1d.depthwise_conv1d(**args), message)
    with torch.no_grad():  # allowed without grad mode
        conv1d.depthwise_conv1d(**args)
    assert launches == ["depthwise_conv1d"]


_BAD_STEP = [
    ({"input_chunk": "x"}, TypeError, "`input_chunk` must be a torch.Tensor"),
    ({"input_chunk": _t(B, 4, C, dtype=torch.int64)}, TypeError, "`input_chunk` has dtype torch.int64; supported"),
    ({"input_chunk": _t(B, 0, C)}, ValueError, "L >= 1"),
    ({"input_chunk": _t(4, C)}, ValueError, "`input_chunk` must be \\[B, L, C\\]"),
    ({"state": _t(B, K, C)}, ValueError, "`state` has shape"),
    ({"state": _t(B, K - 1, C + 1)}, ValueError, "`state` has shape"),
    ({"state": _t(B, K - 1, C, dtype=torch.float16)}, TypeError, "`state` has dtype"),
    ({"state": [0.0]}, TypeError, "`state` must be a torch.Tensor"),
    ({"bias": _t(C + 1)}, ValueError, "`bias` has shape"),
    ({"state": _t(B, C, K - 1).transpose(1, 2)}, ValueError, "contiguous channels"),
    ({"weight": _t(K, C + 1)}, ValueError, "`weight` has shape"),
    ({"activation": "swish"}, ValueError, "unknown `activation`"),
    ({"out": _t(B, 5, C)}, ValueError, "`out` has shape"),
    ({}, ValueError, "CUDA"),
]


@pytest.mark.parametrize("override,error,match", _BAD_STEP, ids=[m for _, _, m in _BAD_STEP])
def test_step_bad_arguments(override, error, match):
    args = {"input_chunk": _t(B, 4, C), "state": _t(B, K - 1, C), "weight": _t(K, C), "bias": None}
    args.update(override)
    with pytest.raises(error, match=match):
        conv1d.depthwise_conv1d_step(**args)


def test_step_overlaps_refused(launches):
    buffer = torch.zeros(B, 10, C)
    step = conv1d.depthwise_conv1d_step
    refused(launches, lambda: step(buffer[:, 2:6], buffer[:, : K - 1], _t(K, C)), "`state` overlaps `input_chunk`")
    chunk, state = torch.zeros(B, 4, C), torch.zeros(B, K - 1, C)
    refused(launches, lambda: step(chunk, state, _t(K, C), out=chunk), "`out` and `input_chunk` must be different")
    big = torch.zeros(B, 4 + K - 1, C)
    refused(launches, lambda: step(chunk, big[:, : K - 1], _t(K, C), out=big[:, 1:5]), "`out` overlaps `state`")
    expanded_state = torch.zeros(1, 1, C).expand(B, K - 1, C)
    refused(launches, lambda: step(chunk, expanded_state, _t(K, C)), "`state` has elements that share memory")
    expanded_out = torch.zeros(1, 1, C).expand(B, 4, C)
    refused(launches, lambda: step(chunk, state, _t(K, C), out=expanded_out), "`out` has elements that share memory")
    one = torch.zeros(1, 4 + K - 1, C)  # disjoint parts of one buffer (one batch row: ranges apart)
    step(chunk[:1], one[:, : K - 1], _t(K, C), out=one[:, K - 1 :])
    assert launches == ["depthwise_conv1d_step"]


@pytest.mark.parametrize("name", ["input_chunk", "state", "weight", "bias", "out"])
def test_step_requires_grad_refused(launches, name):
    args = {"input_chunk": _t(B, 4, C), "state": _t(B, K - 1, C), "weight": _t(K, C), "bias": _t(C), "out": _t(B, 4, C)}
    args[name].requires_grad_(True)
    message = rf"^oasr\.depthwise_conv1d_step: `{name}` requires grad"
    refused(launches, lambda: conv1d.depthwise_conv1d_step(**args), message)
    with torch.inference_mode():
        conv1d.depthwise_conv1d_step(**{n: t.detach() for n, t in args.items()})
    assert launches == ["depthwise_conv1d_step"]


# ---------------------------------------------------------------------------
# CPU: fold_batch_norm
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=dtype_id)
@pytest.mark.parametrize("conv_bias", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_fold_batch_norm_matches_conv_then_batchnorm(dtype, conv_bias, affine):
    torch.manual_seed(0)
    c, k = 12, 5
    conv = torch.nn.Conv1d(c, c, k, groups=c, padding=k // 2, bias=conv_bias).to(dtype)
    bn = torch.nn.BatchNorm1d(c, eps=1e-3, affine=affine).to(dtype)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    conv.eval(), bn.eval()
    x = torch.randn(3, c, 20, dtype=dtype)
    expected = bn(conv(x))

    weight = conv.weight.detach()[:, 0, :].t()  # [K, C]
    w, b = conv1d.fold_batch_norm(
        weight,
        conv.bias.detach() if conv_bias else None,
        bn.running_mean,
        bn.running_var,
        bn.weight.detach() if affine else None,
        bn.bias.detach() if affine else None,
        bn.eps,
    )
    assert w.shape == weight.shape and w.dtype == dtype and b.shape == (c,) and b.dtype == dtype
    actual = F.conv1d(x, w.t().unsqueeze(1), b, padding=k // 2, groups=c)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)

    w3, _ = conv1d.fold_batch_norm(weight.unsqueeze(1), None, bn.running_mean, bn.running_var, eps=1e-3)
    assert w3.shape == (k, 1, c)


def test_fold_batch_norm_bad_arguments():
    w, v = torch.ones(3, 4), torch.ones(4)
    with pytest.raises(ValueError, match="`running_var` has shape"):
        conv1d.fold_batch_norm(w, None, v, torch.ones(5))
    with pytest.raises(TypeError, match=r"`running_mean` must be a torch\.Tensor"):
        conv1d.fold_batch_norm(w, None, None, v)
    with pytest.raises(ValueError, match="`weight` has shape"):
        conv1d.fold_batch_norm(torch.ones(3, 2, 4), None, v, v)
    with pytest.raises(ValueError, match="`eps` must be finite and >= 0"):
        conv1d.fold_batch_norm(w, None, v, v, eps=-1.0)


# ---------------------------------------------------------------------------
# CPU: the harness entry
# ---------------------------------------------------------------------------


def test_harness_entry_work_model():
    from profiling.harness.ops import conv1d as entry

    op = entry.DEPTHWISE_CONV1D
    assert op.name == "depthwise_conv1d" and op.family is families.CONV1D
    assert op.config_fields == ("b", "t", "c", "k")
    assert set(op.backends) == {"oasr", "torch"}
    config = {"b": 16, "t": 1500, "c": 256, "k": 31}
    work = op.work(config, torch.bfloat16)
    assert work.bytes == (2 * 16 * 1500 * 256 + 31 * 256 + 256) * 2
    assert work.flops == {"fp32": 2 * 31 * 16 * 1500 * 256}
    even = {"b": 2, "t": 10, "c": 8, "k": 4}  # (k - 1) // 2 = 1 each side: t_out = 9
    assert op.work(even, torch.float32).flops == {"fp32": 2 * 4 * 2 * 9 * 8}
    shapes = {(c["b"], c["t"], c["c"], c["k"]) for c in op.default_sweep}
    assert {(32, 250, 256, 15), (64, 500, 512, 31), (16, 1500, 256, 31), (16, 1500, 512, 15)} <= shapes
    assert op.tolerance("float32") == (1e-5, 1e-5)


@pytest.mark.parametrize("k", [15, 4])
def test_harness_torch_backend_matches_reference_on_cpu(k):
    from profiling.harness.ops import conv1d as entry

    op = entry.DEPTHWISE_CONV1D
    config = {"b": 2, "t": 40, "c": 8, "k": k}
    inputs = op.make_inputs(config, torch.float32, torch.device("cpu"), 0)
    expected = op.reference(inputs)
    assert expected.shape == inputs["out"].shape == (2, entry.out_len(config), 8)
    torch.testing.assert_close(op.backends["torch"](inputs).double(), expected, rtol=1e-5, atol=1e-5)
    ours = reference(inputs["x"], inputs["weight"], inputs["bias"], inputs["padding"])
    torch.testing.assert_close(ours, expected)


# ---------------------------------------------------------------------------
# GPU: results
# ---------------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
# K covers every count of 8-frame chunks of the 16-bit tensor-core kernel (1 .. 9); C = 256 and 72 take it (72:
# a partial 64-channel block), 66 the vector and 33 the scalar direct kernels.
@pytest.mark.parametrize("k", [1, 2, 3, 7, 15, 20, 31, 40, 47, 55, 63])
@pytest.mark.parametrize("c", [256, 72, 66, 33], ids=lambda c: f"C{c}")
def test_conv_every_k(dtype, k, c):
    x, w, b = make_case(3, 100, c, k, dtype)
    pad = (k - 1) // 2
    out = poisoned((3, 100 + 2 * pad - k + 1, c), dtype)
    result = conv1d.depthwise_conv1d(x, w, b, padding=pad, out=out)
    assert result is out
    assert_close(out, reference(x, w, b, pad), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [2, 15, 31])
@pytest.mark.parametrize("padding", [0, (14, 0), (3, 9), (40, 45), 64], ids=str)
def test_conv_padding_forms(dtype, k, padding):
    x, w, b = make_case(2, 50, 128, k, dtype, seed=3)
    result = conv1d.depthwise_conv1d(x, w, b, padding=padding)
    assert_close(result, reference(x, w, b, padding), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("activation", ["silu", "relu", "gelu", None])
@pytest.mark.parametrize("k", [31, 5])
def test_conv_activations(dtype, activation, k):
    x, w, b = make_case(2, 70, 64, k, dtype, seed=4)
    result = conv1d.depthwise_conv1d(x, w, b, padding=k // 2, activation=activation)
    assert_close(result, reference(x, w, b, k // 2, activation), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [15, 31, 4])
@pytest.mark.parametrize("form", ["prefix", "random", "btc1"])
def test_conv_mask(dtype, k, form):
    b_, t, c = 4, 90, 96
    x, w, b = make_case(b_, t, c, k, dtype, seed=5)
    if form == "random":
        mask = torch.rand(b_, t, generator=torch.Generator().manual_seed(0)) > 0.3
    else:
        lengths = torch.tensor([90, 61, 17, 1])
        mask = torch.arange(t)[None, :] < lengths[:, None]
    mask = mask.cuda()
    if form == "btc1":
        mask = mask.unsqueeze(-1)
    result = conv1d.depthwise_conv1d(x, w, b, padding=k // 2, activation="silu", mask=mask)
    assert_close(result, reference(x, w, b, k // 2, "silu", mask), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_conv_mask_strided(dtype):
    x, w, b = make_case(3, 40, 16, 15, dtype, seed=6)
    mask = (torch.rand(40, 3, generator=torch.Generator().manual_seed(1)) > 0.5).cuda().t()  # [B, T], strided
    result = conv1d.depthwise_conv1d(x, w, b, padding=7, mask=mask)
    assert_close(result, reference(x, w, b, 7, None, mask), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [15, 31, 3])
def test_conv_strided_views(dtype, k):
    big, w, b = make_case(6, 80, 258, k, dtype, seed=7)
    pad = k // 2
    views = {
        "every_other_batch": big[::2, :, :256],
        "time_slice": big[:, 5:70, :256],
        "time_stride_2": big[:, ::2, :256],
        "misaligned_channels": big[:, :, 1:257],  # off a 4-byte boundary for 16-bit types: scalar path
    }
    for name, x in views.items():
        t_out = x.shape[1] + 2 * pad - k + 1
        out_big = poisoned((x.shape[0], t_out + 3, 300), dtype)
        out = out_big[:, 3:, 10:266]  # strided destination
        conv1d.depthwise_conv1d(x, w[:, :256].contiguous(), b[:256], padding=pad, out=out)
        assert_close(out, reference(x, w[:, :256], b[:256], pad), dtype)
        assert torch.isnan(out_big[:, :3]).all() and torch.isnan(out_big[..., :10]).all(), f"{name}: wrote outside out"


@gpu
def test_conv_weight_3d_and_no_bias(device):
    x, w, _ = make_case(2, 30, 40, 31, torch.float16, seed=8)
    result = conv1d.depthwise_conv1d(x, w.unsqueeze(1), None, padding=(30, 0))
    assert_close(result, reference(x, w, None, (30, 0)), torch.float16)


@gpu
def test_conv_empty_batch_and_short_sequences(device):
    x, w, b = make_case(0, 20, 32, 15, torch.bfloat16)
    assert conv1d.depthwise_conv1d(x, w, b, padding=7).shape == (0, 20, 32)
    x, w, b = make_case(2, 1, 32, 15, torch.float32)  # T = 1, padding larger than T
    result = conv1d.depthwise_conv1d(x, w, b, padding=7)
    assert_close(result, reference(x, w, b, 7), torch.float32)
    x, w, b = make_case(2, 15, 32, 15, torch.float32)  # K = T, no padding: one frame
    assert_close(conv1d.depthwise_conv1d(x, w, b), reference(x, w, b), torch.float32)


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_conv_large_shape(dtype):
    x, w, b = make_case(16, 1500, 256, 31, dtype, seed=9)
    result = conv1d.depthwise_conv1d(x, w, b, padding=15, activation="silu")
    assert_close(result, reference(x, w, b, 15, "silu"), dtype)


# ---------------------------------------------------------------------------
# GPU: streaming
# ---------------------------------------------------------------------------


def _stream(x, w, b, activation, chunk, state):
    outputs = []
    for start in range(0, x.shape[1], chunk):
        piece = x[:, start : start + chunk]
        out = poisoned(piece.shape, x.dtype)
        conv1d.depthwise_conv1d_step(piece, state, w, b, activation, out=out)
        outputs.append(out)
    return torch.cat(outputs, dim=1)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [2, 4, 15, 31])
@pytest.mark.parametrize("c", [64, 7], ids=lambda c: f"C{c}")
def test_step_chunks_match_causal_call(dtype, k, c):
    t = 120
    x, w, b = make_case(3, t, c, k, dtype, seed=10)
    causal = conv1d.depthwise_conv1d(x, w, b, padding=(k - 1, 0), activation="silu")
    assert_close(causal, reference(x, w, b, (k - 1, 0), "silu"), dtype)
    expected_state = torch.cat([torch.zeros(3, k - 1, c, dtype=dtype, device="cuda"), x], dim=1)[:, t:]
    for chunk in sorted({1, max(k - 2, 1), k - 1 if k > 1 else 1, k, 37}):
        state = torch.zeros(3, k - 1, c, dtype=dtype, device="cuda")
        streamed = _stream(x, w, b, "silu", chunk, state)
        assert_close(streamed, causal.double(), dtype)
        torch.testing.assert_close(state, expected_state, rtol=0, atol=0, msg=f"state after chunks of {chunk}")


@gpu
def test_step_nonzero_state_and_strided_state(device):
    k, c = 15, 32
    x, w, b = make_case(2, 10, c, k, torch.float32, seed=11)  # L = 10 < K - 1
    history = randn((2, k - 1, c), torch.float32, seed=12)
    holder = torch.zeros(4, k + 3, c, device="cuda")
    state = holder[::2, 2 : 2 + k - 1]  # batch and time strides
    state.copy_(history)
    out = conv1d.depthwise_conv1d_step(x, state, w, b)
    full = torch.cat([history, x], dim=1)
    assert_close(out, reference(full, w, b)[:, :], torch.float32)
    torch.testing.assert_close(state, full[:, -(k - 1) :], rtol=0, atol=0)
    assert (holder[1::2] == 0).all() and (holder[:, :2] == 0).all(), "wrote outside the state view"


@gpu
def test_step_k1_has_no_state(device):
    x, w, b = make_case(2, 5, 16, 1, torch.float16)
    state = torch.zeros(2, 0, 16, dtype=torch.float16, device="cuda")
    assert_close(conv1d.depthwise_conv1d_step(x, state, w, b), reference(x, w, b), torch.float16)


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_step_graph_capture_and_replay(dtype):
    k, c, chunk, b_ = 15, 128, 16, 2
    x, w, b = make_case(b_, 5 * chunk, c, k, dtype, seed=13)
    eager_state = torch.zeros(b_, k - 1, c, dtype=dtype, device="cuda")
    eager = _stream(x, w, b, "silu", chunk, eager_state)

    static_in = torch.zeros(b_, chunk, c, dtype=dtype, device="cuda")
    static_out = torch.zeros(b_, chunk, c, dtype=dtype, device="cuda")
    state = torch.zeros(b_, k - 1, c, dtype=dtype, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (build and load the module) off the capture
        conv1d.depthwise_conv1d_step(static_in, state, w, b, "silu", out=static_out)
    torch.cuda.current_stream().wait_stream(side)
    state.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        conv1d.depthwise_conv1d_step(static_in, state, w, b, "silu", out=static_out)
    state.zero_()
    outputs = []
    for start in range(0, x.shape[1], chunk):
        static_in.copy_(x[:, start : start + chunk])
        graph.replay()
        outputs.append(static_out.clone())
    torch.testing.assert_close(torch.cat(outputs, dim=1), eager, rtol=0, atol=0)
    torch.testing.assert_close(state, eager_state, rtol=0, atol=0)
