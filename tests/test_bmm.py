"""oasr.bmm: the CUTLASS sm90 build, the Python layer on CPU (layout choice, padding), the kernels on the GPU.

As in tests/test_gemm.py: the CPU tests run the Python layer against a torch stand-in for the module
that insists on the launcher's invariants; GPU tests compare with float64 references
(``conftest.gemm_tolerance``) on poisoned outputs, both attention layouts, odd lengths, strided
batch views and graphs.
"""

from __future__ import annotations

import sys

import pytest
import torch
from conftest import force_backend, gemm_tolerance, poisoned_like

import oasr
from oasr import _checks
from oasr._tma import addressable
from oasr.jit import gemm_config
from oasr.jit.families import BMM

bmm_module = sys.modules["oasr.bmm"]  # (the attribute oasr.bmm is the op)
gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing


def randn(*shape, dtype=torch.bfloat16, device="cuda", seed=0, scale=1.0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=device)


def attention(batch, t, d, dtype, device):
    """q, k ~ N(0, 1/sqrt(d)) so scores are O(1); probabilities-like p ~ U(0, 1)/t; v ~ N(0, 1)."""
    q = randn(batch, t, d, dtype=dtype, device=device, seed=1, scale=d**-0.25)
    k = randn(batch, t, d, dtype=dtype, device=device, seed=2, scale=d**-0.25)
    v = randn(batch, t, d, dtype=dtype, device=device, seed=3)
    g = torch.Generator(device="cpu").manual_seed(4)
    p = (torch.rand(batch, t, t, generator=g) / t).to(dtype=dtype, device=device)
    return q, k, v, p


def reference(a, b):
    return a.double() @ b.double()


def assert_close(actual, expected, dtype, k):
    rtol, atol = gemm_tolerance(dtype, k)
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------


class TorchBmm:
    """Stands in for the BMM family: checks the launcher's invariants (views TMA can address), computes in float64
    with the module's B layout, records the layout and where the operands were (`pointers`: a, b, out; a copy has
    another address)."""

    def __init__(self) -> None:
        self.layouts: list[str] = []
        self.pointers: list[tuple[int, int, int]] = []

    def module(self, variant):
        n_major = "-DOASR_GEMM_B_NMAJOR=1" in variant.cuda_cflags
        self.layouts.append("nn" if n_major else "nt")
        pointers = self.pointers

        class Module:
            def bmm(self, out, a, b):
                assert all(map(addressable, (a, b, out)))
                pointers.append((a.data_ptr(), b.data_ptr(), out.data_ptr()))
                out.copy_(reference(a, b if n_major else b.transpose(1, 2)).to(out.dtype))

        return Module()


@pytest.fixture
def torch_bmm(monkeypatch):
    stub = TorchBmm()
    monkeypatch.setattr(bmm_module, "BMM", stub)
    force_backend(monkeypatch, "oasr")
    _checks.ready_devices(BMM).add(torch.device("cpu"))
    yield stub
    _checks.forget_devices()


@pytest.mark.parametrize("t,d", [(375, 64), (16, 8), (7, 5)])
def test_both_attention_products_on_cpu(torch_bmm, t, d):
    q, k, v, p = attention(3, t, d, torch.bfloat16, "cpu")
    scores = oasr.bmm(q, k.transpose(1, 2))  # keys read in place (K-major)
    assert scores.shape == (3, t, t) and addressable(scores)
    assert torch_bmm.layouts[-1] == ("nt" if d % 8 == 0 else "nn")  # keys with 16-byte rows: read in place
    assert_close(scores, reference(q, k.transpose(1, 2)), torch.bfloat16, d)
    context = oasr.bmm(scores, v)  # the padded scores are read in place; values N-major
    assert torch_bmm.layouts[-1] == "nn"
    assert_close(context, reference(scores, v), torch.bfloat16, t)
    out = torch.full((3, t, d), float("nan"), dtype=torch.bfloat16)
    assert oasr.bmm(p, v, out=out) is out
    assert_close(out, reference(p, v), torch.bfloat16, t)
    # Operands whose rows are not multiples of 16 bytes reach the launcher as padded copies: p's 750- and 14-byte
    # rows; q's, the keys' and the values' 10-byte rows; out's.
    handed = [
        tuple(x != y for x, y in zip(call, ours, strict=True))
        for call, ours in zip(
            torch_bmm.pointers[-3:],
            [
                (q.data_ptr(), k.data_ptr(), scores.data_ptr()),
                (scores.data_ptr(), v.data_ptr(), context.data_ptr()),
                (p.data_ptr(), v.data_ptr(), out.data_ptr()),
            ],
            strict=True,
        )
    ]
    copies = {
        (375, 64): [(False, False, False), (False, False, False), (True, False, False)],
        (16, 8): [(False, False, False)] * 3,
        (7, 5): [(True, True, False), (False, True, False), (True, True, True)],
    }
    assert handed == copies[t, d]


def test_strided_batch_views_and_copies_on_cpu(torch_bmm):
    a = randn(4, 2, 32, 48, device="cpu")[:, 1, :, 8:40]  # batch stride 2*32*48, offset 8: read in place
    b = randn(4, 32, 48, device="cpu", seed=1)[:, :, :24]  # N-major with a padded row stride
    assert_close(oasr.bmm(a, b), reference(a, b), torch.bfloat16, 32)
    assert torch_bmm.layouts[-1] == "nn"
    c = randn(4, 9, 40, device="cpu", seed=2)[:, :, ::2]  # neither K nor N contiguous: copied
    x = randn(4, 5, 9, device="cpu", seed=3)  # K = 9: rows of 18 bytes, copied into padded rows
    assert_close(oasr.bmm(x, c), reference(x, c), torch.bfloat16, 9)
    assert oasr.bmm(a[:0], b[:0]).shape == (0, 32, 24)
    assert torch.equal(oasr.bmm(a[:, :, :0], b[:, :0]), torch.zeros(4, 32, 24, dtype=torch.bfloat16))


def _cpu(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


BAD = {
    "float32": (lambda: oasr.bmm(_cpu(2, 3, 4, dtype=torch.float32), _cpu(2, 4, 5)), TypeError, "float32"),
    "2-D input": (lambda: oasr.bmm(_cpu(3, 4), _cpu(2, 4, 5)), ValueError, "3-D"),
    "2-D mat2": (lambda: oasr.bmm(_cpu(2, 3, 4), _cpu(4, 5)), ValueError, "3-D"),
    "K mismatch": (lambda: oasr.bmm(_cpu(2, 3, 4), _cpu(2, 5, 5)), ValueError, "K"),
    "batch mismatch": (lambda: oasr.bmm(_cpu(2, 3, 4), _cpu(3, 4, 5)), ValueError, "batch"),
    "mat2 dtype": (lambda: oasr.bmm(_cpu(2, 3, 4), _cpu(2, 4, 5, dtype=torch.float16)), TypeError, "`mat2`"),
    "out shape": (lambda: oasr.bmm(_cpu(2, 3, 4), _cpu(2, 4, 5), out=_cpu(2, 3, 4)), ValueError, "`out`"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_before_launch(torch_bmm, case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value) and torch_bmm.layouts == []


def test_out_sharing_memory_with_an_operand_is_refused(torch_bmm):
    a = _cpu(2, 4, 4)
    with pytest.raises(ValueError, match="`out` and `input`"):
        oasr.bmm(a, _cpu(2, 4, 4), out=a)
    assert torch_bmm.layouts == []


def test_cpu_tensors_get_one_sentence():
    with pytest.raises(ValueError, match="Oasr kernels run on CUDA tensors"):
        oasr.bmm(_cpu(2, 3, 4), _cpu(2, 4, 5))
    assert BMM.capabilities == (90,)


# ---------------------------------------------------------------------------
# GPU (sm90)
# ---------------------------------------------------------------------------


@gpu
class TestBmm:
    @pytest.mark.parametrize("batch,t,d", [(64, 375, 64), (8, 200, 64), (2, 7, 8), (1, 1, 8)])
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    def test_scores_and_context(self, batch, t, d, dtype):
        q, k, v, p = attention(batch, t, d, dtype, "cuda")
        scores = poisoned_like(torch.empty(batch, t, t, dtype=dtype, device="cuda"))
        oasr.bmm(q, k.transpose(1, 2), out=scores)
        assert_close(scores, reference(q, k.transpose(1, 2)), dtype, d)
        context = poisoned_like(torch.empty(batch, t, d, dtype=dtype, device="cuda"))
        oasr.bmm(p, v, out=context)
        assert_close(context, reference(p, v), dtype, t)

    def test_padded_result_feeds_the_next_product(self):
        q, k, v, _ = attention(16, 375, 64, torch.bfloat16, "cuda")
        scores = oasr.bmm(q, k.transpose(1, 2))
        assert scores.stride() == (375 * 376, 376, 1)
        probs = torch.softmax(scores.float(), -1).to(torch.bfloat16)
        assert_close(oasr.bmm(probs, v), reference(probs, v), torch.bfloat16, 375)

    def test_strided_batch_views(self):
        base = randn(6, 2, 100, 80)
        a = base[:, 0, :, 8:72]  # batch stride 2*100*80, row stride 80, offset 8
        b = randn(6, 64, 128)[:, :, :96]
        out = poisoned_like(torch.empty(6, 100, 96, dtype=torch.bfloat16, device="cuda"))
        oasr.bmm(a, b, out=out)
        assert_close(out, reference(a, b), torch.bfloat16, 64)

    def test_cuda_graph_capture_and_replay(self):
        q, k, _, _ = attention(64, 375, 64, torch.bfloat16, "cuda")
        out = oasr.bmm(q, k.transpose(1, 2))
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            oasr.bmm(q, k.transpose(1, 2), out=out)
        out.fill_(float("nan"))
        q.copy_(torch.randn_like(q) * 64**-0.25)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(q, k.transpose(1, 2)), torch.bfloat16, 64)

    @pytest.mark.parametrize("config", gemm_config.PICKS, ids=lambda c: c.name)
    def test_every_layout_config(self, config):
        # The configurations gemm_config.choose picks, scores (B K-major) and context (B N-major).
        q, k, v, p = attention(4, 300, 64, torch.bfloat16, "cuda")
        out = poisoned_like(torch.empty(4, 300, 300, dtype=torch.bfloat16, device="cuda"))[:, :, :296]
        bmm_module._product(q, k.transpose(1, 2)[:, :, :296], out, config)
        assert_close(out, reference(q, k.transpose(1, 2)[:, :, :296]), torch.bfloat16, 64)
        context = poisoned_like(torch.empty(4, 300, 64, dtype=torch.bfloat16, device="cuda"))
        bmm_module._product(p, v, context, config)
        assert_close(context, reference(p, v), torch.bfloat16, 300)
