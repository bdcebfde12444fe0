"""oasr.gemm and oasr.gemm_glu: the CUTLASS sm90 build, the Python layer on CPU, the kernels on the GPU.

CPU: the default instantiation builds and exports its launcher (one ~45 s CUTLASS build; the
others build on first use); bad arguments raise before any launch; and the whole Python layer
(row padding, operand copies, temporaries for outputs TMA cannot write, the epilogue and the
configuration each call picks) runs against a torch stand-in for the module that insists on what
the C++ launcher assumes. GPU (H100/H200): the kernels against float64 references (tolerances:
``conftest.gemm_tolerance``), poisoned outputs, odd sizes, views, every activation, graphs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import force_backend, gemm_tolerance, poisoned_like, standing_in

import oasr
from oasr import _checks
from oasr._tma import addressable
from oasr.jit import gemm_config
from oasr.jit.enums import enumerator
from oasr.jit.families import GEMM

gemm_module = sys.modules["oasr.gemm"]  # (the attribute oasr.gemm is the op)
gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing

ACTS = {
    None: lambda y: y,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "silu": F.silu,
}


CUTLASS_FUSED_PICKS = [c for c in gemm_config.FUSED_PICKS if c.schedule not in ("direct", "tail")]


def reference(x, w, b=None, activation=None):
    """float64: act(x @ w.T + b)."""
    y = x.double() @ w.double().T
    if b is not None:
        y = y + b.double()
    return ACTS[activation](y)


def operands(m, n, k, dtype, device, seed=0, batch=()):
    """input ~ N(0, 1), weight ~ N(0, 1/k) (outputs O(1), as nn.Linear's init), bias ~ N(0, 1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(*batch, m, k, generator=g).to(dtype=dtype, device=device)
    w = (torch.randn(n, k, generator=g) / max(k, 1) ** 0.5).to(dtype=dtype, device=device)
    b = torch.randn(n, generator=g).to(dtype=dtype, device=device)
    return x, w, b


def assert_close(actual, expected, dtype, k):
    rtol, atol = gemm_tolerance(dtype, k)
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# CPU: the build, the configuration, the checks and the Python layer
# ---------------------------------------------------------------------------


@pytest.mark.slow  # a CUTLASS instantiation: the full tier
def test_default_instantiation_builds_for_sm90a_and_exports_gemm():
    spec = GEMM.jit_spec()
    assert "-gencode=arch=compute_90a,code=sm_90a" in spec.nvcc_flags and "-DNDEBUG" in spec.nvcc_flags
    assert any(f.startswith("-DOASR_CUTLASS_VERSION=") for f in spec.nvcc_flags)
    assert callable(spec.build_and_load().gemm)
    nm = shutil.which("nm")  # binutils, which nvcc's host compiler needs too
    assert nm is not None
    symbols = subprocess.run([nm, "-D", str(spec.library_path)], capture_output=True, text=True, check=True).stdout
    kinds = {line.split()[-1]: line.split()[-2] for line in symbols.splitlines() if len(line.split()) >= 2}
    # CUTLASS's direct driver calls land on the module's own hidden definitions (no -lcuda, nothing imported) ...
    assert "cuTensorMapEncodeTiled" not in kinds and "cuTensorMapEncodeIm2col" not in kinds
    # ... and the launchers' statics stay the module's own: no GNU-unique symbol
    assert "u" not in kinds.values()


@pytest.mark.slow  # a gemm build: the full tier
def test_a_fused_cutlass_instantiation_builds_for_sm90a():
    """CUTLASS's bias + SiLU epilogue (oasr's SiLU functor, include/oasr/common/activation.cuh): the fused modules'
    own code, which the default (plain) module does not compile."""
    spec = GEMM.jit_spec(variant=gemm_config.gemm_variant("bfloat16", "silu", gemm_config.FUSED_NARROW))
    assert "-DOASR_GEMM_EPILOGUE=kSilu" in spec.nvcc_flags and spec.sources[0].name == "gemm.cu"
    assert callable(spec.build_and_load().gemm)


@pytest.mark.slow  # a gemm build: the full tier
def test_the_tail_kernel_builds_for_sm90a():
    """The gemm family's own one-wave kernel (``gemm_config.TAIL``): CUTLASS's headers, none of its kernels."""
    spec = GEMM.jit_spec(variant=gemm_config.gemm_variant("bfloat16", "silu", gemm_config.TAIL))
    assert spec.sources[0].name == "gemm_tail.cu" and not any("OASR_GEMM_SCHEDULE" in f for f in spec.nvcc_flags)
    assert callable(spec.build_and_load().gemm)
    with pytest.raises(ValueError, match="tail"):
        gemm_config.GemmConfig(128, 160, 64, 1, 1, "tail")
    with pytest.raises(ValueError, match="tail"):
        gemm_config.bmm_variant("bfloat16", False, gemm_config.TAIL)


def test_each_configuration_is_its_own_module():
    configs = set(gemm_config.PICKS + gemm_config.FUSED_PICKS) - {gemm_config.DIRECT, gemm_config.TAIL}
    names = {
        gemm_config.gemm_variant(dtype, epilogue, config).name
        for dtype in gemm_config.DTYPES
        for epilogue in gemm_config.EPILOGUES
        for config in configs
    }
    assert len(names) == len(gemm_config.DTYPES) * len(gemm_config.EPILOGUES) * len(configs)
    a = GEMM.jit_spec(variant=gemm_config.gemm_variant("bfloat16", "silu", gemm_config.FUSED_WIDE))
    b = GEMM.jit_spec(variant=gemm_config.gemm_variant("float16", "silu", gemm_config.FUSED_WIDE))
    assert a.name != b.name and a.key != b.key and "-DOASR_GEMM_EPILOGUE=kSilu" in a.nvcc_flags


def test_a_stand_in_module_stands_in_for_every_variant():
    stub = object()
    with standing_in(stub, [GEMM]):
        assert GEMM.module() is stub
        assert GEMM.module(gemm_config.gemm_variant("float16", "relu", gemm_config.FUSED_WIDE)) is stub
    assert GEMM.module_name() == "gemm" and GEMM.jit_spec().name == GEMM.module_name(GEMM.default_variant)


def test_config_rules():
    with pytest.raises(ValueError, match="cooperative"):
        gemm_config.GemmConfig(64, 128, 64, 1, 1, "cooperative")
    with pytest.raises(ValueError, match="schedule"):
        gemm_config.GemmConfig(schedule="fast")
    c = gemm_config
    # The measured winners of each band of the rule (dev/gemm/RESULTS.md).
    assert c.choose(1500, 512, 2048) == c.SMALL_GRID == c.GemmConfig(64, 128, 64, 1, 1, "nonpersistent")  # 48 tiles
    assert c.choose(8000, 256, 256) == c.ONE_WAVE == c.GemmConfig(128, 128, 64, 1, 1, "nonpersistent")  # 126 tiles
    assert c.choose(24000, 2048, 512) == c.MANY_WAVES == c.GemmConfig(128, 128, 64, 1, 1, "pingpong")
    assert c.choose(1500, 2048, 512) == c.PARTIAL_WAVE == c.GemmConfig(128, 192, 64, 1, 1, "nonpersistent")  # wave
    assert c.choose(1500, 2304, 512) == c.MANY_WAVES  # 144 tiles of 128x192
    assert c.choose(16000, 512, 2048) == c.MANY_WAVES  # long K too
    assert c.choose(375, 64, 375, 64) == c.NARROW  # bmm context: N = 64
    assert c.choose(375, 375, 64, 64) == c.MANY_WAVES  # bmm scores: 576 tiles
    one_wave = c.GemmConfig(64, 128, 64, 1, 1, "nonpersistent", 4)
    assert c.choose(8000, 256, 256, fused=True) == c.FUSED_ONE_WAVE == one_wave  # two CTAs to an SM
    assert c.choose(1500, 512, 2048, fused=True) == c.FUSED_NARROW == c.GemmConfig(128, 128, 64, 1, 1, "cooperative")
    assert c.choose(1500, 2048, 512, fused=True) == c.TAIL == c.GemmConfig(128, 192, 64, 1, 1, "tail")  # as bare
    assert c.choose(750, 2048, 512, 2, True) == c.PARTIAL_WAVE  # batched: CUTLASS
    assert c.choose(1500, 2304, 512, fused=True) == c.FUSED_WIDE  # 216 tiles, past one wave of 128x192
    assert c.choose(8000, 1024, 256, fused=True) == c.choose(16000, 512, 512, fused=True) == c.DIRECT  # 3.8 waves
    assert c.choose(16000, 2048, 2048, fused=True) == c.FUSED_WIDE  # long K stays on CUTLASS
    assert c.choose(375, 375, 64, 64, fused=True) == c.FUSED_WIDE  # the direct kernel has no batch
    assert c.choose(24000, 128, 1024, fused=True) == c.FUSED_NARROW  # N does not fill a 256-wide tile
    for m, n, k in [(1, 1, 1), (8000, 256, 256), (1500, 2048, 512), (64 * 375, 375, 64), (7, 9000, 4096)]:
        for batch in (1, 3, 300):
            for fused in (False, True):
                assert c.choose(m, n, k, batch, fused) in (c.FUSED_PICKS if fused else c.PICKS)


class TorchGemm:
    """Stands in for the GEMM family: each module computes in float64 what the kernel would, after asserting the
    launcher's invariants (2-D views TMA can address, a contiguous bias, the module's epilogue), and records the
    variant and where its operands were (`pointers`: input, weight, out; a copy has another address)."""

    def __init__(self) -> None:
        self.variants: list[str] = []
        self.pointers: list[tuple[int, int, int]] = []

    def module(self, variant):
        self.variants.append(variant.name)
        flags = dict(f.removeprefix("-D").split("=", 1) for f in variant.cuda_cflags if "=" in f)
        epilogue = {enumerator(e): e for e in (*gemm_config.EPILOGUES, "glu")}[flags["OASR_GEMM_EPILOGUE"]]
        pointers = self.pointers

        class Module:
            def gemm(self, out, a, w, bias):
                assert out.dim() == a.dim() == w.dim() == 2 and all(map(addressable, (a, w, out)))
                assert bias is None or bias.numel() <= 1 or bias.stride(0) == 1
                pointers.append((a.data_ptr(), w.data_ptr(), out.data_ptr()))
                if epilogue == "glu":  # the direct kernel's GLU: weight [2N, K]
                    assert variant.launcher == "gemm_direct.cu" and w.shape[0] == 2 * out.shape[1]
                    out.copy_(F.glu(reference(a, w, bias, None), -1).to(out.dtype))
                    return
                assert bias is None or epilogue != "plain"
                act = None if epilogue in ("plain", "bias") else epilogue
                out.copy_(reference(a, w, bias, act).to(out.dtype))

        return Module()


@pytest.fixture
def torch_gemm(monkeypatch):
    """CPU tensors pass the device check; oasr.gemm runs oasr's backend, TorchGemm."""
    stub = TorchGemm()
    monkeypatch.setattr(gemm_module, "GEMM", stub)
    force_backend(monkeypatch, "oasr")
    _checks.ready_devices(GEMM).add(torch.device("cpu"))
    yield stub
    _checks.forget_devices()


@pytest.mark.parametrize("m,n,k", [(5, 8, 16), (7, 3, 33), (1, 375, 64), (16, 24, 1)])
@pytest.mark.parametrize("activation", list(ACTS))
def test_python_layer_matches_reference_on_cpu(torch_gemm, m, n, k, activation):
    x, w, b = operands(m, n, k, torch.bfloat16, "cpu", batch=(2,))
    y = oasr.gemm(x, w, b, activation)
    assert y.shape == (2, m, n) and addressable(y.view(-1, n))
    assert_close(y, reference(x, w, b, activation), torch.bfloat16, k)
    epilogue = activation or "bias"
    assert torch_gemm.variants[-1].startswith(f"bf16_{epilogue}_")
    # K % 8 != 0: the input's rows (and the weight's) are not 16-byte multiples, so the launcher gets copies
    copied = torch_gemm.pointers[-1][:2] != (x.data_ptr(), w.data_ptr())
    assert copied == (k % 8 != 0)


def test_addressable_layouts():
    """TMA's rule (start and outer strides multiples of 16 bytes, innermost stride 1), on its fast path (contiguous
    rows of a multiple of 16 bytes) and off it."""
    t = torch.zeros(64, 40, dtype=torch.bfloat16)
    assert addressable(t) and addressable(t[:, :8]) and addressable(t[8:, 16:24])  # 80-byte rows, aligned starts
    assert not addressable(t[:, 1:9])  # a start 2 bytes in
    assert not addressable(t[:, :8].t())  # the innermost stride is 40
    odd = torch.zeros(4, 3, dtype=torch.bfloat16)  # 6-byte rows
    assert not addressable(odd) and addressable(odd[:1]) and addressable(torch.zeros(1, 1, 3, dtype=torch.float16))
    assert not addressable(torch.zeros(2, 2, 4, dtype=torch.bfloat16))  # 8-byte rows
    assert addressable(torch.zeros(2, 1, 8, dtype=torch.bfloat16)) and addressable(torch.zeros(3, 5, 16))
    assert addressable(torch.zeros(3, 2, 16, dtype=torch.bfloat16)[:, 1])  # rows 64 bytes apart, a 32-byte start


def test_python_layer_handles_layouts_on_cpu(torch_gemm):
    x, w, b = operands(6, 10, 24, torch.float16, "cpu")
    expected = reference(x, w)
    # Plain epilogue, a strided row view of the input, an out TMA cannot write (odd row stride).
    wide = torch.zeros(6, 40, dtype=torch.float16)
    wide[:, 8:32] = x
    out = torch.full((6, 11), float("nan"), dtype=torch.float16)[:, :10]
    assert oasr.gemm(wide[:, 8:32], w, out=out) is out
    assert_close(out, expected, torch.float16, 24)
    assert torch_gemm.variants[-1].startswith("f16_plain_")
    # the input's 16-byte-aligned row view as it is, out through a temporary
    assert torch_gemm.pointers[-1][0] == wide[:, 8:32].data_ptr() and torch_gemm.pointers[-1][2] != out.data_ptr()
    # Leading dimensions that do not collapse (a permuted batch) and an empty K.
    x3 = x.reshape(2, 3, 24).transpose(0, 1)
    assert_close(oasr.gemm(x3, w, b), reference(x3, w, b), torch.float16, 24)
    empty_k = oasr.gemm(x[:, :0], w[:, :0], b, "relu")
    torch.testing.assert_close(empty_k, F.relu(b).expand(6, 10))
    assert oasr.gemm(x[:0], w).shape == (0, 10)


def test_gemm_glu_python_layer_on_cpu(torch_gemm):
    x, w, b = operands(9, 14, 40, torch.bfloat16, "cpu")
    y = oasr.gemm_glu(x, w, b)  # one launch of the direct kernel's GLU module
    assert y.shape == (9, 7) and y.is_contiguous() and torch_gemm.variants == ["bf16_glu_128x128x64_c1x1_direct_s0"]
    assert_close(y, F.glu(reference(x, w, b), -1), torch.bfloat16, 40)
    assert_close(oasr.gemm_glu(x[:, :0], w[:, :0], b), F.glu(b.double(), -1).expand(9, 7), torch.bfloat16, 0)


def _cpu(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


BAD = {
    "float32 input": (lambda: oasr.gemm(_cpu(4, 8, dtype=torch.float32), _cpu(8, 8)), TypeError, "float32"),
    "int input": (lambda: oasr.gemm(_cpu(4, 8, dtype=torch.int32), _cpu(8, 8)), TypeError, "`input`"),
    "not a tensor": (lambda: oasr.gemm([1.0], _cpu(8, 8)), TypeError, "`input` must be a torch.Tensor"),
    "K mismatch": (lambda: oasr.gemm(_cpu(4, 8), _cpu(8, 16)), ValueError, "K"),
    "weight 1-D": (lambda: oasr.gemm(_cpu(4, 8), _cpu(8)), ValueError, "`weight` has shape"),
    "weight dtype": (lambda: oasr.gemm(_cpu(4, 8), _cpu(8, 8, dtype=torch.float16)), TypeError, "`weight`"),
    "bias shape": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), _cpu(8)), ValueError, "`bias`"),
    "bias dtype": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), _cpu(6, dtype=torch.float16)), TypeError, "`bias`"),
    "activation": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), activation="tanh"), ValueError, "activation"),
    "activation type": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), activation=1), TypeError, "activation"),
    "out shape": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), out=_cpu(4, 8)), ValueError, "`out`"),
    "strided K": (lambda: oasr.gemm(_cpu(4, 16)[:, ::2], _cpu(6, 8)), ValueError, "contiguous"),
    "strided weight K": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 16)[:, ::2]), ValueError, "contiguous"),
    "weight requires grad": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8).requires_grad_()), ValueError, "`weight` req"),
    "bias requires grad": (lambda: oasr.gemm(_cpu(4, 8), _cpu(6, 8), _cpu(6).requires_grad_()), ValueError, "`bias` r"),
    "glu odd rows": (lambda: oasr.gemm_glu(_cpu(4, 8), _cpu(5, 8)), ValueError, "even"),
    "glu out shape": (lambda: oasr.gemm_glu(_cpu(4, 8), _cpu(6, 8), out=_cpu(4, 6)), ValueError, "`out`"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_before_launch(torch_gemm, case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value) and torch_gemm.variants == []


def test_out_overlapping_an_input_is_refused(torch_gemm):
    x = _cpu(4, 8)
    with pytest.raises(ValueError, match="`out` and `input` must be different tensors"):
        oasr.gemm(x, _cpu(8, 8), out=x)
    with pytest.raises(ValueError, match="`out` overlaps `input`"):
        buffer = _cpu(5, 8)
        oasr.gemm(buffer[:4], _cpu(8, 8), out=buffer[1:])
    w = _cpu(8, 8)
    with pytest.raises(ValueError, match=r"`out` .*`weight`"):
        oasr.gemm(_cpu(8, 8), w, out=w)
    assert torch_gemm.variants == []


def test_cpu_tensors_and_other_gpus_get_one_sentence():
    with pytest.raises(ValueError, match="Oasr kernels run on CUDA tensors"):
        oasr.gemm(_cpu(4, 8), _cpu(6, 8))
    assert GEMM.capabilities == (90,)


# ---------------------------------------------------------------------------
# GPU (sm90)
# ---------------------------------------------------------------------------

SHAPES = [(1, 1, 8), (7, 9, 33), (128, 128, 64), (375, 375, 64), (250, 256, 256), (1000, 1024, 512)]


@gpu
class TestGemm:
    @pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda v: str(v))
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    def test_plain_matches_reference(self, m, n, k, dtype):
        x, w, _ = operands(m, n, k, dtype, "cuda")
        out = poisoned_like(torch.empty(m, n, dtype=dtype, device="cuda"))
        oasr.gemm(x, w, out=out)
        assert_close(out, reference(x, w), dtype, k)

    @pytest.mark.parametrize("activation", list(ACTS))
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_every_activation_bf16(self, activation, with_bias):
        x, w, b = operands(300, 200, 96, torch.bfloat16, "cuda", batch=(2,))
        b = b if with_bias else None
        y = oasr.gemm(x, w, b, activation)
        assert_close(y, reference(x, w, b, activation), torch.bfloat16, 96)

    @pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
    def test_activations_fp16(self, activation):
        x, w, b = operands(130, 72, 64, torch.float16, "cuda")
        assert_close(oasr.gemm(x, w, b, activation), reference(x, w, b, activation), torch.float16, 64)

    def test_large_conformer_shape(self):
        x, w, b = operands(8000, 1024, 256, torch.bfloat16, "cuda")
        assert_close(oasr.gemm(x, w, b, "silu"), reference(x, w, b, "silu"), torch.bfloat16, 256)

    def test_views_odd_sizes_and_out_layouts(self):
        dtype = torch.bfloat16
        x, w, b = operands(77, 45, 37, dtype, "cuda")  # K % 8 != 0: operands copied into padded rows
        y = oasr.gemm(x, w, b, "relu")
        assert y.shape == (77, 45) and y.stride() == (48, 1)  # rows padded to 16 bytes
        assert_close(y, reference(x, w, b, "relu"), dtype, 37)
        base = torch.randn(77, 64, dtype=dtype, device="cuda")
        view = base[:, 8:45]  # a row view with an aligned stride: read in place
        out = poisoned_like(torch.empty(45, 77, dtype=dtype, device="cuda")).T  # column-major out
        oasr.gemm(view, w, out=out)
        assert_close(out, reference(view, w), dtype, 37)

    def test_empty(self):
        x, w, b = operands(0, 16, 32, torch.bfloat16, "cuda")
        assert oasr.gemm(x, w, b).shape == (0, 16)
        y = oasr.gemm(torch.empty(3, 0, dtype=torch.bfloat16, device="cuda"), w[:, :0], b, "silu")
        torch.testing.assert_close(y, F.silu(b).expand(3, 16))

    def test_glu(self):
        x, w, b = operands(250, 512, 256, torch.bfloat16, "cuda", batch=(4,))
        out = poisoned_like(torch.empty(4, 250, 256, dtype=torch.bfloat16, device="cuda"))
        oasr.gemm_glu(x, w, b, out=out)
        assert_close(out, F.glu(reference(x, w, b), -1), torch.bfloat16, 256)

    @pytest.mark.parametrize("activation", list(ACTS))
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_every_epilogue_on_the_direct_kernel(self, activation, dtype, with_bias):
        x, w, b = operands(300, 200, 96, dtype, "cuda", batch=(2,))
        b = b if with_bias else None
        out = poisoned_like(torch.empty(2, 300, 200, dtype=dtype, device="cuda"))
        gemm_module._linear(x, w, b, activation, out, gemm_config.DIRECT)
        assert_close(out, reference(x, w, b, activation), dtype, 96)

    @pytest.mark.parametrize("activation", [None, "silu"])
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_direct_kernel_with_two_or_three_tiles_to_a_cta(self, activation, with_bias):
        """141 x 2 row-by-column tiles (the second 120 columns wide) on the H200's 132 CTAs: two or three tiles to a
        CTA, so that either pair takes a CTA's last tile, on both of its bias rows' parities."""
        x, w, b = operands(140 * 128 + 17, 248, 72, torch.bfloat16, "cuda")
        b = b if with_bias else None
        out = poisoned_like(torch.empty(x.shape[0], 248, dtype=torch.bfloat16, device="cuda"))
        gemm_module._linear(x, w, b, activation, out, gemm_config.DIRECT)
        assert_close(out, reference(x, w, b, activation), torch.bfloat16, 72)

    @pytest.mark.parametrize("activation", list(ACTS))
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_every_epilogue_on_the_tail_kernel(self, activation, dtype, with_bias):
        """600 x 200 x 96: a partial row tile, a second column tile of 8 columns, two k-blocks (all of them in the
        tail)."""
        x, w, b = operands(300, 200, 96, dtype, "cuda", batch=(2,))
        b = b if with_bias else None
        out = poisoned_like(torch.empty(2, 300, 200, dtype=dtype, device="cuda"))
        gemm_module._linear(x, w, b, activation, out, gemm_config.TAIL)
        assert_close(out, reference(x, w, b, activation), dtype, 96)

    @pytest.mark.parametrize("m,n,k", [(1500, 2048, 512), (129, 392, 1000), (77, 45, 37), (1, 8, 8)], ids=str)
    def test_tail_kernel_shapes(self, m, n, k):
        """The issue's one-wave shape, 16 k-blocks (12 before the tail), padded operands (K and N not multiples of
        8) and a single row."""
        x, w, b = operands(m, n, k, torch.bfloat16, "cuda")
        out = poisoned_like(torch.empty(m, n, dtype=torch.bfloat16, device="cuda"))
        gemm_module._linear(x, w, b, "silu", out, gemm_config.TAIL)
        assert_close(out, reference(x, w, b, "silu"), torch.bfloat16, k)

    @pytest.mark.parametrize("activation", list(ACTS))
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("config", CUTLASS_FUSED_PICKS, ids=lambda c: c.name)
    def test_every_epilogue_on_the_cutlass_fused_picks(self, config, activation, dtype):
        x, w, b = operands(300, 264, 96, dtype, "cuda")  # partial tiles of every width
        out = poisoned_like(torch.empty(300, 264, dtype=dtype, device="cuda"))
        gemm_module._linear(x, w, b, activation, out, config)
        assert_close(out, reference(x, w, b, activation), dtype, 96)

    @pytest.mark.parametrize("m,n,k", [(250, 256, 256), (77, 40, 37), (1, 8, 8), (300, 72, 2048)], ids=str)
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
    def test_glu_odd_shapes(self, m, n, k, dtype, with_bias):
        """N not a multiple of the kernel's 64 output columns: the values' tile runs into the gates' rows, whose
        columns are not stored; the gates' tile reads zeros past 2N."""
        x, w, b = operands(m, 2 * n, k, dtype, "cuda")
        b = b if with_bias else None
        out = poisoned_like(torch.empty(m, n, dtype=dtype, device="cuda"))
        oasr.gemm_glu(x, w, b, out=out)
        assert_close(out, F.glu(reference(x, w, b), -1), dtype, k)

    def test_cuda_graph_capture_and_replay(self):
        x, w, b = operands(1500, 512, 256, torch.bfloat16, "cuda")
        out = torch.empty(1500, 512, dtype=torch.bfloat16, device="cuda")
        oasr.gemm(x, w, b, "silu", out=out)  # build and warm up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            oasr.gemm(x, w, b, "silu", out=out)
        out.fill_(float("nan"))
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(x, w, b, "silu"), torch.bfloat16, 256)

    def test_on_current_stream(self):
        x, w, _ = operands(512, 256, 128, torch.bfloat16, "cuda")
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            y = oasr.gemm(x, w)
        stream.synchronize()
        assert_close(y, reference(x, w), torch.bfloat16, 128)
