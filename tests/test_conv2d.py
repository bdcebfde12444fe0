"""conv2d family: oasr.conv2d (direct kernel and sm90 implicit GEMM) and oasr.conv2d_subsampling.

References are float64 ``F.conv2d`` on the permuted tensors (and, for the front end, torch's two-conv
module in float64 with the first conv's output rounded to the storage dtype, as the module stores it).
Tolerances: :func:`conftest.gemm_tolerance` with the reduction depth R * S * C (inputs ~ N(0, 1), weights
~ N(0, 1 / depth), outputs O(1)): one rounding of the output plus fp32 accumulation.
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import gemm_tolerance, poisoned, unpack_subsampling_weight2

import oasr
from oasr import _checks
from oasr.jit import conv2d_config
from oasr.jit.enums import enumerator
from oasr.jit.families import CONV2D

conv2d_module = sys.modules["oasr.conv2d"]  # (the attribute oasr.conv2d is the op)
gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing

ACTS = {None: lambda y: y, "relu": F.relu, "silu": F.silu}


def reference(x, w, b=None, stride=1, padding=0, activation=None):
    """float64 NHWC: act(conv2d(x, w) + b), x [N, H, W, C], w [K, R, S, C]."""
    y = F.conv2d(
        x.double().permute(0, 3, 1, 2),
        w.double().permute(0, 3, 1, 2),
        None if b is None else b.double(),
        stride=stride,
        padding=padding,
    )
    return ACTS[activation](y).permute(0, 2, 3, 1)


def subsampling_reference(x, w1, b1, w2, b2):
    """float64 Conv2dSubsampling4 (WeNet's module), the first conv rounded to x's dtype as torch stores it."""
    y1 = F.relu(F.conv2d(x.double()[:, None], w1.double(), b1.double(), stride=2)).to(x.dtype)
    y2 = F.relu(F.conv2d(y1.double(), w2.double(), b2.double(), stride=2))
    b, d, t2, f2 = y2.shape
    return y2.transpose(1, 2).reshape(b, t2, d * f2)


def operands(n, h, w, c, k, r, s, dtype, device, seed=0):
    """input ~ N(0, 1) [N, H, W, C], weight ~ N(0, 1 / (R S C)) [K, R, S, C], bias ~ N(0, 1) [K]."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, h, w, c, generator=g).to(dtype=dtype, device=device)
    wt = (torch.randn(k, r, s, c, generator=g) / (r * s * c) ** 0.5).to(dtype=dtype, device=device)
    b = torch.randn(k, generator=g).to(dtype=dtype, device=device)
    return x, wt, b


def front_end(b, t, f, d, dtype, device, seed=0):
    """Features and torch-layout weights of the front end (nn.Conv2d-like scales)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(b, t, f, generator=g).to(dtype=dtype, device=device)
    w1 = (torch.randn(d, 1, 3, 3, generator=g) / 3).to(dtype=dtype, device=device)
    b1 = (0.1 * torch.randn(d, generator=g)).to(dtype=dtype, device=device)
    w2 = (torch.randn(d, d, 3, 3, generator=g) / (9 * d) ** 0.5).to(dtype=dtype, device=device)
    b2 = (0.1 * torch.randn(d, generator=g)).to(dtype=dtype, device=device)
    return x, w1, b1, w2, b2


def assert_close(actual, expected, dtype, depth):
    rtol, atol = gemm_tolerance(dtype, depth)
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# CPU: the builds, the variants, the checks and the Python layer
# ---------------------------------------------------------------------------


@pytest.mark.slow  # the conv2d module: the full tier
def test_direct_module_builds_and_exports_its_launchers():
    module = CONV2D.jit_spec().build_and_load()
    assert callable(module.conv2d_direct) and callable(module.conv2d_subsampling)
    # The shared-memory plan of the front end (T = 1500, F = 80, D = 256) fits an H100/H200 block.
    assert 0 < module.conv2d_subsampling_smem_bytes(19, 256) <= 227 * 1024
    assert module.conv2d_subsampling_smem_bytes(127, 256) <= 227 * 1024  # F = 512, the largest tested
    # The activation's name is read first: each the kernel takes reaches the tensors' checks, others are refused.
    x, w = torch.zeros(1, 5, 5, 1, dtype=torch.bfloat16), torch.zeros(8, 3, 3, 1, dtype=torch.bfloat16)
    for name in (None, "relu", "silu"):
        with pytest.raises(Exception, match="CUDA"):
            module.conv2d_direct(torch.empty(1, 3, 3, 8, dtype=torch.bfloat16), x, w, None, 1, 1, 0, 0, name)
    with pytest.raises(Exception, match="this kernel has no activation 'gelu'"):
        module.conv2d_direct(torch.empty(1, 3, 3, 8, dtype=torch.bfloat16), x, w, None, 1, 1, 0, 0, "gelu")


@pytest.mark.slow  # two CUTLASS instantiations: the full tier
@pytest.mark.parametrize("tile", [conv2d_config.DEFAULT, conv2d_config.WIDE], ids=["one_consumer", "two_consumers"])
def test_implicit_gemm_instantiations_build_for_sm90a(tile):
    spec = CONV2D.jit_spec(variant=conv2d_config.implicit_gemm_variant("bfloat16", "relu", tile))
    assert "-gencode=arch=compute_90a,code=sm_90a" in spec.nvcc_flags
    assert "-DOASR_CONV2D_ACTIVATION=kRelu" in spec.nvcc_flags
    assert f"-DOASR_CONV2D_CONSUMERS={tile.consumers}" in spec.nvcc_flags
    assert callable(spec.build_and_load().conv2d_implicit_gemm)


def test_each_dtype_and_activation_is_its_own_module():
    variants = [
        conv2d_config.implicit_gemm_variant(dtype, act)
        for dtype in ("float16", "bfloat16")
        for act in conv2d_config.ACTIVATIONS
    ]
    assert len({v.name for v in variants}) == 6
    assert len({CONV2D.jit_spec(variant=v).key for v in variants}) == 6
    assert conv2d_module.ACTIVATIONS == conv2d_config.ACTIVATIONS  # one list of names


class TorchConv2d:
    """Stands in for the conv2d family: each launcher asserts its invariants and computes in float64
    what the kernel computes, from the packed operands it is handed; records the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.variants: list[str] = []
        self.weights2: list[torch.Tensor] = []  # conv2d_subsampling's w2 as handed over

    def module(self, variant=None):
        calls, weights2 = self.calls, self.weights2
        if variant is not None:
            self.variants.append(variant.name)

        class Module:
            def conv2d_direct(self, out, x, w, b, sh, sw, ph, pw, act):
                calls.append("direct")
                assert w.is_contiguous() and out.is_contiguous() and (x.shape[3] == 1 or x.stride(3) == 1)
                out.copy_(reference(x, w, b, (sh, sw), (ph, pw), act).to(out.dtype))

            def conv2d_implicit_gemm(self, out, x, w, b, sh, sw, ph, pw, act):
                calls.append("implicit_gemm")
                assert variant is not None and f"-DOASR_CONV2D_ACTIVATION={enumerator(act)}" in variant.cuda_cflags
                assert all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (out, x, w))
                out.copy_(reference(x, w, b, (sh, sw), (ph, pw), act).to(out.dtype))

            def conv2d_subsampling_smem_bytes(self, f2, d):
                return 1000

            def conv2d_subsampling(self, out, x, w1, b1, w2, b2):
                calls.append("subsampling")
                weights2.append(w2)
                d = w1.shape[0]
                n = -(-d // 64) * 64
                assert w1.shape == (d, 3, 3) and w2.shape == (n // 16, 9, n, 16) and w2.is_contiguous()
                w2 = unpack_subsampling_weight2(w2, d)  # the kernel's contract: the image of torch's weight
                y1 = F.relu(F.conv2d(x.double()[:, None], w1.double()[:, None], b1.double(), stride=2)).to(x.dtype)
                y2 = F.relu(F.conv2d(y1.double(), w2.double(), b2.double(), stride=2))
                bb, _, t2, f2 = y2.shape
                # out[b, t2, e * F2 + f2] = y2[b, e, t2, f2]
                out.copy_(y2.permute(0, 2, 1, 3).reshape(bb, t2, d * f2).to(out.dtype))

        return Module()


@pytest.fixture
def torch_conv(monkeypatch):
    """CPU tensors pass the device check and count as sm90; oasr.conv2d runs TorchConv2d."""
    stub = TorchConv2d()
    monkeypatch.setattr(conv2d_module, "CONV2D", stub)
    monkeypatch.setattr(conv2d_module, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(conv2d_module, "_smem_limit", lambda device: 227 * 1024)
    _checks.ready_devices(CONV2D).add(torch.device("cpu"))
    yield stub
    _checks.forget_devices()


@pytest.mark.parametrize(
    "n,h,w,c,k,r,s,stride,padding,path",
    [
        (2, 9, 11, 1, 16, 3, 3, 2, 0, "direct"),
        (1, 7, 5, 3, 5, 3, 3, 1, 1, "direct"),
        (2, 6, 9, 8, 16, 3, 3, (2, 1), (1, 0), "implicit_gemm"),
        (1, 5, 5, 12, 8, 1, 1, 1, 0, "direct"),  # C % 8 != 0
    ],
)
@pytest.mark.parametrize("activation", list(ACTS))
def test_python_layer_dispatches_and_matches_reference_on_cpu(
    torch_conv, n, h, w, c, k, r, s, stride, padding, path, activation
):
    x, wt, b = operands(n, h, w, c, k, r, s, torch.bfloat16, "cpu")
    out = oasr.conv2d(x, wt, b, stride, padding, activation)
    assert torch_conv.calls == [path]
    assert_close(out, reference(x, wt, b, stride, padding, activation), torch.bfloat16, r * s * c)


def test_tile_rule_follows_the_output_channels():
    c = conv2d_config
    assert c.choose(256) == c.choose(512) == c.WIDE == c.Conv2dConfig(128, 256, 64, 1, 1, 2)  # conv #2's winner
    assert c.choose(128) == c.choose(384) == c.TALL == c.Conv2dConfig(256, 128, 64, 1, 1, 2)  # the K = 128 winner
    assert c.choose(64) == c.choose(8) == c.choose(40) == c.NARROW == c.Conv2dConfig(128, 64, 64)  # the K = 64 winner
    assert c.choose(72) == c.choose(192) == c.choose(264) == c.DEFAULT
    assert set(c.PICKS) == {c.choose(k) for k in (8, 72, 128, 256)} and len(set(c.PICKS)) == len(c.PICKS)
    assert c.WIDE.name == "128x256x64_c1x1_wg2" and c.DEFAULT.name == "128x128x64_c1x1"


RULE_TILES = [
    (256, conv2d_config.WIDE),
    (128, conv2d_config.TALL),
    (72, conv2d_config.DEFAULT),
    (64, conv2d_config.NARROW),
]
"""One K per tile the rule picks (measured: dev/conv2d/RESULTS.md)."""


@pytest.mark.parametrize("k,tile", RULE_TILES, ids=lambda v: f"k{v}" if isinstance(v, int) else v.name)
def test_python_layer_runs_the_rules_tile_on_cpu(torch_conv, k, tile):
    x, wt, b = operands(1, 9, 7, 16, k, 3, 3, torch.bfloat16, "cpu")
    out = oasr.conv2d(x, wt, b, 2, 0, "relu")
    assert torch_conv.calls == ["implicit_gemm"]
    assert torch_conv.variants == [conv2d_config.implicit_gemm_variant("bfloat16", "relu", tile).name]
    assert_close(out, reference(x, wt, b, 2, 0, "relu"), torch.bfloat16, 144)


def test_python_layer_copies_views_for_the_implicit_gemm_on_cpu(torch_conv):
    x, wt, _ = operands(2, 6, 6, 16, 8, 3, 3, torch.bfloat16, "cpu")
    wide = torch.zeros(2, 6, 6, 24, dtype=torch.bfloat16)
    wide[..., 4:20] = x
    out = poisoned((2, 4, 4, 8), torch.bfloat16, "cpu")
    oasr.conv2d(wide[..., 4:20], wt, None, out=out)
    assert torch_conv.calls == ["implicit_gemm"]
    assert_close(out, reference(x, wt), torch.bfloat16, 144)


@pytest.mark.parametrize("d", [16, 144, 256])
def test_subsampling_weight2_is_the_wgmma_image(d):
    """Per chunk of 16 input channels and tap, w2[e, c] sits in 8 x 8 core matrices ordered (e // 8, c // 8, e % 8,
    c % 8), with zeros up to N = D rounded to 64 on both channel axes (the kernel's B descriptor: 128 bytes along K,
    256 along N)."""
    w2 = torch.randn(d, d, 3, 3)
    packed = conv2d_module.pack_subsampling_weight2(w2)
    n = -(-d // 64) * 64
    assert packed.shape == (n // 16, 9, n, 16) and packed.is_contiguous()
    flat = packed.reshape(-1)
    g = torch.Generator().manual_seed(0)
    for e, c, i, j in torch.randint(0, d, (200, 4), generator=g).tolist():
        i, j = i % 3, j % 3
        offset = (c // 16 * 9 + 3 * i + j) * n * 16 + e // 8 * 128 + c % 16 // 8 * 64 + e % 8 * 8 + c % 8
        assert flat[offset] == w2[e, c, i, j]
    assert not packed[:, :, d:].any() and not packed[d // 16 :].any()
    assert torch.equal(unpack_subsampling_weight2(packed, d), w2)


def test_subsampling_python_layer_packs_torch_weights_on_cpu(torch_conv):
    x, w1, b1, w2, b2 = front_end(2, 19, 17, 16, torch.bfloat16, "cpu")
    out = oasr.conv2d_subsampling(x, w1, b1, w2, b2)
    assert torch_conv.calls == ["subsampling"] and out.shape == (2, 4, 16 * 3)
    assert_close(out, subsampling_reference(x, w1, b1, w2, b2), torch.bfloat16, 144)


def test_subsampling_python_layer_passes_a_packed_weight2_through_on_cpu(torch_conv):
    x, w1, b1, w2, b2 = front_end(2, 19, 17, 16, torch.bfloat16, "cpu")
    packed = oasr.pack_subsampling_weight2(w2)
    out = oasr.conv2d_subsampling(x, w1, b1, packed, b2)
    assert len(torch_conv.weights2) == 1 and torch_conv.weights2[0] is packed  # handed over as is: no copy
    assert_close(out, subsampling_reference(x, w1, b1, w2, b2), torch.bfloat16, 144)


def _cpu(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


def _conv(**kw):
    args = {"input": _cpu(1, 5, 5, 1), "weight": _cpu(4, 3, 3, 1)} | kw
    return lambda: oasr.conv2d(**args)


def _sub(**kw):
    args = {
        "input": _cpu(1, 9, 9),
        "weight1": _cpu(16, 1, 3, 3),
        "bias1": _cpu(16),
        "weight2": _cpu(16, 16, 3, 3),
        "bias2": _cpu(16),
    } | kw
    return lambda: oasr.conv2d_subsampling(**args)


BAD = {
    "float32 input": (_conv(input=_cpu(1, 5, 5, 1, dtype=torch.float32)), TypeError, "float32"),
    "int input": (_conv(input=_cpu(1, 5, 5, 1, dtype=torch.int32)), TypeError, "`input`"),
    "not a tensor": (_conv(input=[1.0]), TypeError, "`input` must be a torch.Tensor"),
    "input 3-D": (_conv(input=_cpu(5, 5, 1)), ValueError, r"`input` must be \[N, H, W, C\]"),
    "weight 3-D": (_conv(weight=_cpu(4, 3, 3)), ValueError, "`weight` has shape"),
    "weight dtype": (_conv(weight=_cpu(4, 3, 3, 1, dtype=torch.float16)), TypeError, "`weight`"),
    "channel mismatch": (_conv(weight=_cpu(4, 3, 3, 2)), ValueError, "input channels"),
    "torch weight layout": (_conv(input=_cpu(1, 5, 5, 8), weight=_cpu(4, 8, 3, 3)), ValueError, "permute"),
    "bias shape": (_conv(bias=_cpu(5)), ValueError, "`bias`"),
    "bias dtype": (_conv(bias=_cpu(4, dtype=torch.float16)), TypeError, "`bias`"),
    "stride 0": (_conv(stride=0), ValueError, "`stride`"),
    "stride type": (_conv(stride=1.5), TypeError, "`stride`"),
    "padding negative": (_conv(padding=(0, -1)), ValueError, "`padding`"),
    "padding triple": (_conv(padding=(1, 1, 1)), TypeError, "`padding`"),
    "too small": (_conv(input=_cpu(1, 2, 5, 1)), ValueError, "smaller than"),
    "activation": (_conv(activation="gelu"), ValueError, "activation"),
    "activation type": (_conv(activation=1), TypeError, "activation"),
    "out shape": (_conv(out=_cpu(1, 3, 3, 5)), ValueError, "`out`"),
    "out strided": (_conv(out=_cpu(1, 3, 3, 8)[..., ::2]), ValueError, "contiguous"),
    "strided channels": (_conv(input=_cpu(1, 5, 5, 16)[..., ::2], weight=_cpu(4, 3, 3, 8)), ValueError, "contiguous"),
    "sub float32": (_sub(input=_cpu(1, 9, 9, dtype=torch.float32)), TypeError, "float32"),
    "sub input 4-D": (_sub(input=_cpu(1, 9, 9, 1)), ValueError, r"`input` must be \[B, T, F\]"),
    "sub weight1 layout": (_sub(weight1=_cpu(16, 3, 3, 1)), ValueError, "`weight1`"),
    "sub weight2 shape": (_sub(weight2=_cpu(16, 8, 3, 3)), ValueError, r"`weight2`.*pack_subsampling_weight2"),
    "sub weight2 image strided": (
        _sub(weight2=_cpu(4, 9, 64, 32)[..., :16]),
        ValueError,
        "`weight2`, pack_subsampling_weight2's image .* must be contiguous",
    ),
    "sub bias2": (_sub(bias2=_cpu(8)), ValueError, "`bias2`"),
    "sub bias1 missing": (_sub(bias1=None), TypeError, "`bias1`"),
    "sub D": (
        _sub(weight1=_cpu(24, 1, 3, 3), bias1=_cpu(24), weight2=_cpu(24, 24, 3, 3), bias2=_cpu(24)),
        ValueError,
        "multiple of 16",
    ),
    "sub T too small": (_sub(input=_cpu(1, 6, 9)), ValueError, "T >= 7"),
    "sub F too small": (_sub(input=_cpu(1, 9, 6)), ValueError, "F >= 7"),
    "sub out shape": (_sub(out=_cpu(1, 2, 16)), ValueError, "`out`"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_before_launch(torch_conv, case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value) and torch_conv.calls == []


def test_out_overlapping_an_argument_is_refused(torch_conv):
    buffer = _cpu(1 * 3 * 3 * 4 + 25)
    x = buffer[:25].view(1, 5, 5, 1)
    with pytest.raises(ValueError, match="`out` overlaps `input`"):
        oasr.conv2d(x, _cpu(4, 3, 3, 1), out=buffer[20:56].view(1, 3, 3, 4))
    w = _cpu(16, 16, 3, 3)
    with pytest.raises(ValueError, match="`out` overlaps `weight2`"):
        oasr.conv2d_subsampling(
            _cpu(1, 9, 9), _cpu(16, 1, 3, 3), _cpu(16), w, _cpu(16), out=w.view(-1)[:16].view(1, 1, 16)
        )
    assert torch_conv.calls == []


def test_grad_is_refused(torch_conv):
    w = _cpu(4, 3, 3, 1).requires_grad_()
    with pytest.raises(ValueError, match="`weight` requires grad"):
        oasr.conv2d(_cpu(1, 5, 5, 1), w)


def test_cpu_tensors_get_one_sentence():
    with pytest.raises(ValueError, match="Oasr kernels run on CUDA tensors"):
        oasr.conv2d(_cpu(1, 5, 5, 1), _cpu(4, 3, 3, 1))
    with pytest.raises(ValueError, match="Oasr kernels run on CUDA tensors"):
        oasr.conv2d_subsampling(_cpu(1, 9, 9), _cpu(16, 1, 3, 3), _cpu(16), _cpu(16, 16, 3, 3), _cpu(16))


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------

# (N, H, W, C, K, R, S, stride, padding): IC = 1, 3, 5 (direct: tensor cores up to 15 taps, else generic),
# 8, 64, 256 (implicit GEMM on sm90), odd sizes.
CASES = [
    (2, 17, 13, 1, 256, 3, 3, 2, 0),
    (3, 9, 7, 1, 64, 3, 3, 1, 1),
    (1, 8, 8, 1, 24, 3, 3, 2, 1),  # K = 24: a partial 32-channel group
    (1, 7, 9, 3, 264, 2, 2, 1, (1, 0)),  # 12 taps; K past 256: a second, partial channel slice
    (2, 6, 11, 5, 16, 1, 3, 1, (0, 1)),  # 15 taps: the bias is the 16th column
    (3, 5, 5, 1, 8, 1, 1, 1, 0),  # one tap, one 16-byte chunk per pixel
    (2, 11, 9, 1, 13, 3, 3, 1, 0),  # K % 8 != 0: generic kernel, scalar stores
    (2, 9, 10, 3, 32, 3, 3, 2, 1),  # 27 taps: generic kernel
    (1, 7, 5, 5, 7, 5, 3, (2, 1), (2, 1)),
    (2, 13, 11, 8, 16, 3, 3, 1, 1),
    (2, 15, 9, 64, 64, 3, 3, 2, 0),
    (1, 21, 13, 256, 256, 3, 3, 2, 0),
    (2, 10, 12, 64, 128, 3, 3, 1, 1),
    (1, 6, 6, 16, 8, 1, 1, 1, 0),
]
# (N, H, W, C, K, stride, padding), 3x3 filters, one per tile conv2d_config.choose picks: upstream's K = 64 conv
# (the 128x64 tiles' measurement, at batch 2) and K = 40 (128x64, a partial channel tile), K = 72 (128x128, a
# partial channel tile), K = 128 (256x128, two consumers), K = 256 (128x256, two consumers); each ends in a
# partial tile of pixels.
RULE_CASES = [
    (2, 100, 40, 64, 64, 2, 0),
    (3, 41, 23, 64, 40, 2, 1),
    (2, 19, 17, 32, 72, 1, 1),
    (2, 37, 29, 64, 128, 1, 1),
    (1, 31, 21, 256, 256, 2, 0),
]


@gpu
class TestConv2d:
    @pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) + f"_s{c[7]}_p{c[8]}")
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_matches_reference(self, case, dtype, with_bias):
        n, h, w, c, k, r, s, stride, padding = case
        x, wt, b = operands(n, h, w, c, k, r, s, dtype, "cuda")
        b = b if with_bias else None
        expected = reference(x, wt, b, stride, padding, "relu")
        out = poisoned(tuple(expected.shape), dtype)
        result = oasr.conv2d(x, wt, b, stride, padding, "relu", out=out)
        assert result is out
        assert_close(out, expected, dtype, r * s * c)

    @pytest.mark.parametrize("activation", list(ACTS))
    @pytest.mark.parametrize("c", [1, 64], ids=["ic1", "ic64"])
    def test_every_activation(self, activation, c):
        x, wt, b = operands(2, 15, 11, c, 64, 3, 3, torch.bfloat16, "cuda", seed=1)
        out = oasr.conv2d(x, wt, b, 2, 1, activation)
        assert_close(out, reference(x, wt, b, 2, 1, activation), torch.bfloat16, 9 * c)

    @pytest.mark.parametrize("aligned", [True, False], ids=["aligned_out", "unaligned_out"])
    @pytest.mark.parametrize("c", [1, 64], ids=["ic1", "ic64"])
    def test_strided_views_and_unaligned_out(self, c, aligned):
        x, wt, b = operands(2, 11, 9, c, 32, 3, 3, torch.bfloat16, "cuda", seed=2)
        big = torch.randn(4, 11, 9, c + 8, device="cuda").to(torch.bfloat16)
        big[::2, :, :, 8:] = x
        view = big[::2, :, :, 8:]  # batch-strided, channel-offset: not packed, not 16-byte aligned
        buffer = poisoned((2 * 5 * 4 * 32 + 8,), torch.bfloat16)
        out = buffer[0 if aligned else 1 :][: 2 * 5 * 4 * 32].view(2, 5, 4, 32)  # unaligned: 2 bytes past 16
        oasr.conv2d(view, wt, b, 2, 0, "silu", out=out)
        assert_close(out, reference(x, wt, b, 2, 0, "silu"), torch.bfloat16, 9 * c)

    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    def test_few_taps_kernel_loops_over_many_tiles_per_warp(self, dtype):
        # 4 x 300 x 80 pixels: 6000 tiles of 16, about 3 per warp of an H200's grid (528 blocks of 4 warps),
        # each run with the next one's loads in flight.
        x, wt, b = operands(4, 300, 80, 1, 256, 3, 3, dtype, "cuda", seed=5)
        expected = reference(x, wt, b, 1, 1, "relu")
        out = poisoned(tuple(expected.shape), dtype)
        oasr.conv2d(x, wt, b, 1, 1, "relu", out=out)
        assert_close(out, expected, dtype, 9)

    @pytest.mark.parametrize("case", RULE_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}_k{c[4]}")
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    def test_each_tile_the_rule_picks(self, case, dtype, monkeypatch):
        n, h, w, c, k, stride, padding = case
        original, picked = conv2d_module._variant, []
        monkeypatch.setattr(conv2d_module, "_variant", lambda *args: picked.append(original(*args)) or picked[-1])
        x, wt, b = operands(n, h, w, c, k, 3, 3, dtype, "cuda", seed=6)
        expected = reference(x, wt, b, stride, padding, "relu")
        out = poisoned(tuple(expected.shape), dtype)
        oasr.conv2d(x, wt, b, stride, padding, "relu", out=out)
        name = str(dtype).removeprefix("torch.")
        assert picked == [conv2d_config.implicit_gemm_variant(name, "relu", conv2d_config.choose(k))]
        assert_close(out, expected, dtype, 9 * c)

    def test_empty_batch(self):
        x, wt, b = operands(0, 9, 9, 1, 16, 3, 3, torch.bfloat16, "cuda")
        assert oasr.conv2d(x, wt, b).shape == (0, 7, 7, 16)

    @pytest.mark.parametrize("c", [1, 256], ids=["ic1", "ic256"])
    def test_cuda_graph_capture_and_replay(self, c):
        x, wt, b = operands(2, 31, 21, c, 256, 3, 3, torch.bfloat16, "cuda", seed=3)
        out = torch.empty(2, 15, 10, 256, dtype=torch.bfloat16, device="cuda")
        oasr.conv2d(x, wt, b, 2, 0, "relu", out=out)  # build and warm up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            oasr.conv2d(x, wt, b, 2, 0, "relu", out=out)
        out.fill_(float("nan"))
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(x, wt, b, 2, 0, "relu"), torch.bfloat16, 9 * c)

    def test_upstream_shapes(self):
        # Upstream Oasr's conv2d benchmark list (N, H, W, IC, K, pad, stride), smaller batches.
        for n, h, w, c, k, pad, stride in [
            (2, 200, 80, 1, 64, 0, 2),
            (2, 100, 40, 64, 64, 0, 2),
            (1, 300, 80, 1, 256, 0, 2),
            (1, 150, 40, 256, 256, 0, 2),
            (2, 100, 40, 128, 128, 1, 1),
        ]:
            x, wt, b = operands(n, h, w, c, k, 3, 3, torch.bfloat16, "cuda", seed=4)
            out = oasr.conv2d(x, wt, b, stride, pad, "relu")
            assert_close(out, reference(x, wt, b, stride, pad, "relu"), torch.bfloat16, 9 * c)


@gpu
class TestConv2dSubsampling:
    @pytest.mark.parametrize(
        "b,t,f,d",
        [(2, 37, 80, 256), (3, 7, 7, 16), (1, 101, 41, 144), (2, 64, 83, 256), (1, 9, 512, 32), (1, 21, 803, 256)],
        ids=lambda v: str(v),
    )
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    def test_matches_the_torch_module(self, b, t, f, d, dtype):
        x, w1, b1, w2, b2 = front_end(b, t, f, d, dtype, "cuda")
        expected = subsampling_reference(x, w1, b1, w2, b2)
        out = poisoned(tuple(expected.shape), dtype)
        assert oasr.conv2d_subsampling(x, w1, b1, w2, b2, out=out) is out
        assert_close(out, expected, dtype, 9 * d)

    def test_strided_input(self):
        x, w1, b1, w2, b2 = front_end(2, 45, 80, 256, torch.bfloat16, "cuda", seed=1)
        big = torch.zeros(2, 45, 96, dtype=torch.bfloat16, device="cuda")
        big[:, :, 5:85] = x
        out = oasr.conv2d_subsampling(big[:, :, 5:85], w1, b1, w2, b2)
        assert_close(out, subsampling_reference(x, w1, b1, w2, b2), torch.bfloat16, 9 * 256)

    def test_unaligned_out(self):
        # `out` 2 bytes past a 16-byte boundary: the kernel's 16-byte stores give way to element stores.
        x, w1, b1, w2, b2 = front_end(2, 41, 80, 256, torch.bfloat16, "cuda", seed=4)
        expected = subsampling_reference(x, w1, b1, w2, b2)
        flat = torch.full((expected.numel() + 1,), float("nan"), dtype=torch.bfloat16, device="cuda")
        out = flat[1:].view(expected.shape)
        assert oasr.conv2d_subsampling(x, w1, b1, w2, b2, out=out) is out
        assert_close(out, expected, torch.bfloat16, 9 * 256)

    def test_packed_weight2_matches_the_per_call_pack(self):
        x, w1, b1, w2, b2 = front_end(2, 37, 80, 144, torch.bfloat16, "cuda", seed=5)
        packed = oasr.pack_subsampling_weight2(w2)
        out = poisoned((2, 8, 144 * 19), torch.bfloat16)
        oasr.conv2d_subsampling(x, w1, b1, packed, b2, out=out)
        torch.testing.assert_close(out, oasr.conv2d_subsampling(x, w1, b1, w2, b2), rtol=0, atol=0)
        assert_close(out, subsampling_reference(x, w1, b1, w2, b2), torch.bfloat16, 9 * 144)

    def test_matches_two_oasr_convs(self):
        x, w1, b1, w2, b2 = front_end(2, 51, 80, 256, torch.bfloat16, "cuda", seed=2)
        y1 = oasr.conv2d(x[..., None], w1.permute(0, 2, 3, 1), b1, 2, 0, "relu")
        y2 = oasr.conv2d(y1, w2.permute(0, 2, 3, 1), b2, 2, 0, "relu")  # [B, T', F', D]
        fused = oasr.conv2d_subsampling(x, w1, b1, w2, b2)
        unfused = y2.permute(0, 1, 3, 2).reshape(fused.shape)
        assert_close(fused, unfused.double(), torch.bfloat16, 9 * 256)

    def test_cuda_graph_capture_and_replay(self):
        x, w1, b1, w2, b2 = front_end(2, 99, 80, 256, torch.bfloat16, "cuda", seed=3)
        out = oasr.conv2d_subsampling(x, w1, b1, w2, b2)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            oasr.conv2d_subsampling(x, w1, b1, w2, b2, out=out)
        out.fill_(float("nan"))
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, subsampling_reference(x, w1, b1, w2, b2), torch.bfloat16, 9 * 256)
