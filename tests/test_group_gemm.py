"""oasr.group_gemm: the CUTLASS sm90 build, the Python layer on CPU, the kernels on the GPU.

CPU: the default instantiation builds and exports its launchers (the one CUTLASS build of this file);
bad arguments raise before any launch; the Python layer (copies, padded outputs, the workspace cached
per device and G, the offsets flag) runs against a torch stand-in for the module that computes in
float64 and clamps offsets as the device does. GPU (H100/H200): the kernels against a float64 loop of
F.linear (tolerances: ``conftest.gemm_tolerance``) on poisoned outputs, random group sizes with empty
groups and one group taking every row, views, bias, every candidate configuration, graph replays
with changed offsets, the clamping flag, and no host synchronisation; candidates, replays and the sync check
both in stream order and with programmatic dependent launch, and calls back to back on one workspace (a
kernel touching the workspace before the one ahead of it is done would compute another call's groups).
"""

from __future__ import annotations

import sys

import pytest
import torch
from conftest import gemm_tolerance, poisoned

import oasr
from oasr import _checks
from oasr._tma import addressable
from oasr.jit import gemm_config
from oasr.jit.families import GROUP_GEMM

group_module = sys.modules["oasr.group_gemm"]  # (the attribute oasr.group_gemm is the op)
gpu = pytest.mark.gpu  # conftest skips gpu-marked tests where CUDA is missing


def ends_of(sizes):
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32)


def operands(sizes, n, k, dtype, device, seed=0):
    """input ~ N(0, 1) [sum(sizes), K], weight ~ N(0, 1/k) [G, N, K], bias ~ N(0, 1) [G, N], offsets [G]."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(sum(sizes), k, generator=g).to(dtype=dtype, device=device)
    w = (torch.randn(len(sizes), n, k, generator=g) / max(k, 1) ** 0.5).to(dtype=dtype, device=device)
    b = torch.randn(len(sizes), n, generator=g).to(dtype=dtype, device=device)
    return x, w, b, ends_of(sizes).to(device)


def reference(x, w, offsets, b=None):
    """float64 loop of F.linear over the groups (rows past the last offset: NaN, never compared)."""
    y = torch.full((x.shape[0], w.shape[1]), float("nan"), dtype=torch.float64, device=x.device)
    start = 0
    for g, end in enumerate(offsets.tolist()):
        y[start:end] = torch.nn.functional.linear(
            x[start:end].double(), w[g].double(), None if b is None else b[g].double()
        )
        start = end
    return y


def assert_close(actual, expected, dtype, k):
    rtol, atol = gemm_tolerance(dtype, k)
    torch.testing.assert_close(actual.double(), expected, rtol=rtol, atol=atol)


def random_sizes(groups, rows, seed):
    """`groups` sizes summing to `rows`, some of them zero (a third of the groups get nothing)."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(groups, generator=g) * (torch.rand(groups, generator=g) > 1 / 3)
    weights[0] += 1e-3  # never all zero
    sizes = (weights / weights.sum() * rows).floor().long()
    sizes[torch.argmax(weights)] += rows - sizes.sum()
    return sizes.tolist()


SIZES = {
    "uneven": [37, 0, 250, 1, 0, 129, 64],
    "one_takes_all": [0, 0, 300, 0],
    "single": [77],
    "random_64": random_sizes(64, 3000, seed=1),
}


# ---------------------------------------------------------------------------
# CPU: the build, the checks and the Python layer
# ---------------------------------------------------------------------------


@pytest.mark.slow  # a CUTLASS instantiation: the full tier
def test_a_cutlass_instantiation_builds_for_sm90a_and_exports_group_gemm():
    """One of CUTLASS's grouped kernels (test_jit.py's every-module test builds the default, the direct kernel)."""
    spec = GROUP_GEMM.jit_spec(variant=gemm_config.group_gemm_variant("bfloat16", gemm_config.GROUP_WIDE))
    assert "-gencode=arch=compute_90a,code=sm_90a" in spec.nvcc_flags and "-DNDEBUG" in spec.nvcc_flags
    assert "-DOASR_GEMM_SCHEDULE=Cooperative" in spec.nvcc_flags and spec.sources[0].name == "group_gemm.cu"
    module = spec.build_and_load()
    assert callable(module.group_gemm) and callable(module.group_gemm_workspace_size)


def test_configurations_are_persistent_modules_of_their_own():
    names = {gemm_config.group_gemm_variant(d, c).name for d in gemm_config.DTYPES for c in gemm_config.GROUP_PICKS}
    assert len(names) == len(gemm_config.DTYPES) * len(gemm_config.GROUP_PICKS)
    with pytest.raises(ValueError, match="cooperative, ping-pong or direct"):
        gemm_config.group_gemm_variant("bfloat16", gemm_config.ONE_WAVE)
    direct = gemm_config.GemmConfig(128, 128, 64, 1, 1, "direct")
    with pytest.raises(ValueError, match="group_gemm's and gemm's kernel"):
        gemm_config.bmm_variant("bfloat16", False, direct)
    with pytest.raises(ValueError, match="GLU epilogue runs on the direct schedule only"):
        gemm_config.gemm_variant("bfloat16", "glu", gemm_config.ONE_WAVE)
    glu = gemm_config.gemm_variant("bfloat16", "glu", direct)
    assert "-DOASR_GEMM_EPILOGUE=kGlu" in glu.cuda_cflags and glu.launcher == "gemm_direct.cu"
    with pytest.raises(ValueError, match="direct schedule takes"):
        gemm_config.GemmConfig(128, 256, 64, 1, 1, "direct")
    picks = {
        gemm_config.choose_group(n, k, g) for n in (8, 64, 65, 1024) for k in (8, 256, 2048, 4096) for g in (1, 2000)
    }
    assert picks <= set(gemm_config.GROUP_PICKS) and all(c.schedule != "nonpersistent" for c in picks)
    assert len(set(gemm_config.GROUP_PICKS)) == len(gemm_config.GROUP_PICKS)


def test_choice_follows_the_h200_sweep():
    """dev/group_gemm/RESULTS.md: the direct kernel below K=2048 (up to 1024 groups, with or
    without a bias); from K=2048 256x128 cooperative up to N=256, else 128x128 ping-pong, both without PDL; beyond
    1024 groups 128x256 cooperative where N fills it, else 128x128 2x1 cooperative."""
    direct = gemm_config.GemmConfig(128, 128, 64, 1, 1, "direct")
    wide = gemm_config.GemmConfig(128, 256, 64, 1, 1, "cooperative")
    narrow = gemm_config.GemmConfig(128, 128, 64, 2, 1, "cooperative")
    long_k = gemm_config.GemmConfig(128, 128, 64, 1, 1, "pingpong")
    long_k_narrow = gemm_config.GemmConfig(256, 128, 64, 1, 1, "cooperative")
    assert gemm_config.choose_group(1024, 256, 8) == direct == gemm_config.GROUP_DEFAULT  # 8 x 1000
    assert gemm_config.choose_group(64, 64, 32) == gemm_config.choose_group(128, 64, 1024) == direct
    assert gemm_config.choose_group(256, 2048, 64) == gemm_config.choose_group(128, 4096, 2) == long_k_narrow
    assert gemm_config.choose_group(257, 2048) == gemm_config.choose_group(512, 2048, 64) == long_k
    assert gemm_config.choose_group(1024, 256, 1025) == wide and gemm_config.choose_group(255, 8, 4096) == narrow
    assert set(gemm_config.GROUP_PICKS) == {direct, wide, narrow, long_k, long_k_narrow}
    assert gemm_config.group_pdl(2047) == gemm_config.GROUP_PDL and not gemm_config.group_pdl(2048)


class TorchGroupGemm:
    """Stands in for the GROUP_GEMM family: checks the launcher's invariants, clamps offsets and raises the
    flag as the setup kernel does, computes in float64, and records the calls and workspaces."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.pdl: list[bool] = []
        self.workspaces: list[Tensor] = []

    def module(self, variant):
        stub = self

        class Module:
            def group_gemm_workspace_size(self, groups, device):
                return 1024 + 64 * groups

            def group_gemm(self, out, a, w, offsets, bias, workspace, error, pdl):
                assert ("-DOASR_GROUP_GEMM_BIAS=1" in variant.cuda_cflags) == (bias is not None)
                assert isinstance(pdl, bool)
                stub.calls.append(variant.name)
                stub.pdl.append(pdl)
                stub.workspaces.append(workspace)
                assert all(map(addressable, (out, a, w))) and out.dim() == a.dim() == 2
                assert offsets.dtype == torch.int32 and offsets.shape == (w.shape[0],)
                assert workspace.numel() == self.group_gemm_workspace_size(w.shape[0], 0)
                rows = a.shape[0]
                start = 0
                for g, raw_end in enumerate(offsets.tolist()):
                    lo = offsets[g - 1].item() if g else 0
                    if lo < 0 or raw_end < lo or raw_end > rows:
                        error[0] = 1
                    start = min(max(lo, 0), rows)
                    end = min(max(raw_end, start), rows)
                    y = a[start:end].double() @ w[g].double().T
                    if bias is not None:
                        y += bias[g].double()
                    out[start:end] = y.to(out.dtype)

        return Module()


Tensor = torch.Tensor


@pytest.fixture
def torch_group(monkeypatch):
    stub = TorchGroupGemm()
    monkeypatch.setattr(group_module, "GROUP_GEMM", stub)
    monkeypatch.setattr(group_module, "_WORKSPACES", {})
    _checks.ready_devices(GROUP_GEMM).add(torch.device("cpu"))
    group_module._error_flag().zero_()
    yield stub
    group_module._error_flag().zero_()
    _checks.forget_devices()


@pytest.mark.parametrize("case", list(SIZES))
@pytest.mark.parametrize("with_bias", [False, True], ids=["plain", "bias"])
def test_groups_against_a_float64_loop_on_cpu(torch_group, case, with_bias):
    x, w, b, offsets = operands(SIZES[case], 48, 40, torch.bfloat16, "cpu")
    y = oasr.group_gemm(x, w, offsets, b if with_bias else None)
    assert y.shape == (x.shape[0], 48)
    assert_close(y, reference(x, w, offsets, b if with_bias else None), torch.bfloat16, 40)


def test_workspace_is_allocated_once_per_device_and_group_count(torch_group):
    x, w, _, offsets = operands([5, 0, 11], 16, 8, torch.bfloat16, "cpu")
    out = poisoned((16, 16), torch.bfloat16, "cpu")
    for _ in range(3):
        oasr.group_gemm(x, w, offsets, out=out)
    assert len({t.data_ptr() for t in torch_group.workspaces}) == 1
    x2, w2, _, offsets2 = operands([3, 3], 16, 8, torch.bfloat16, "cpu")
    oasr.group_gemm(x2, w2, offsets2)
    assert len(group_module._WORKSPACES) == 2  # G = 3 and G = 2


def test_the_launch_follows_group_pdl_unless_told(torch_group, monkeypatch):
    x, w, _, offsets = operands([5, 0, 11], 16, 8, torch.bfloat16, "cpu")
    default = gemm_config.GROUP_PDL
    oasr.group_gemm(x, w, offsets)
    monkeypatch.setattr(gemm_config, "GROUP_PDL", not default)
    oasr.group_gemm(x, w, offsets)
    group_module._launch(x, w, offsets, None, torch.empty(16, 16, dtype=torch.bfloat16), pdl=default)
    assert torch_group.pdl == [default, not default, default]


def test_views_copies_and_padded_outputs_on_cpu(torch_group):
    sizes = [9, 0, 14]
    x, w, b, offsets = operands(sizes, 30, 64, torch.float16, "cpu", seed=3)
    wide = torch.zeros(23, 80, dtype=torch.float16)
    wide[:, 8:72] = x
    view = wide[:, 8:72]  # row stride 80, offset 16 bytes: read in place
    y = oasr.group_gemm(view, w, offsets, b)  # N = 30: padded rows, a strided result
    assert y.stride() == (32, 1)
    assert_close(y, reference(x, w, offsets, b), torch.float16, 64)
    odd = torch.randn(23, 9, generator=torch.Generator().manual_seed(4)).half()  # K = 9: 18-byte rows, copied
    w9 = torch.randn(3, 30, 9, generator=torch.Generator().manual_seed(5)).half() / 3
    assert_close(oasr.group_gemm(odd, w9, offsets), reference(odd, w9, offsets), torch.float16, 9)
    strided_offsets = torch.stack([offsets, offsets], 1)[:, 0]  # stride 2: made contiguous
    assert_close(oasr.group_gemm(x, w, strided_offsets), reference(x, w, offsets), torch.float16, 64)


def test_empty_problems_launch_nothing(torch_group):
    x, w, b, offsets = operands([4, 0, 3], 8, 16, torch.bfloat16, "cpu")
    assert oasr.group_gemm(x[:0], w, torch.zeros(3, dtype=torch.int32)).shape == (0, 8)
    assert oasr.group_gemm(x, w[:, :0], offsets).shape == (7, 0)
    y = oasr.group_gemm(x[:, :0], w[:, :, :0], offsets, b)  # K = 0: each row is its group's bias
    assert torch.equal(y, torch.cat([b[0].expand(4, 8), b[2].expand(3, 8)]))
    assert torch.equal(oasr.group_gemm(x[:, :0], w[:, :, :0], offsets), torch.zeros(7, 8, dtype=torch.bfloat16))
    assert torch_group.calls == []


@pytest.mark.parametrize("ends", [[4, 2, 7], [3, 9], [-1, 7]], ids=["decreasing", "past_L", "negative"])
def test_bad_offsets_are_reported_by_the_next_call_and_by_the_check(torch_group, ends):
    x, w, _, _ = operands([7] + [0] * (len(ends) - 1), 8, 16, torch.bfloat16, "cpu")
    bad = torch.tensor(ends, dtype=torch.int32)
    oasr.group_gemm(x, w, bad)  # the device cannot raise: it clamps and flags
    with pytest.raises(ValueError, match="an earlier call had `offsets` that were not non-decreasing"):
        oasr.group_gemm(x, w, bad)
    assert len(torch_group.calls) == 1  # the flagged call raised before launching
    good = ends_of([7] + [0] * (len(ends) - 1))
    oasr.group_gemm(x, w, good)
    assert oasr.group_gemm_check() is None
    oasr.group_gemm(x, w, bad)
    with pytest.raises(ValueError, match="a call since the last check"):
        oasr.group_gemm_check()
    assert oasr.group_gemm_check() is None  # reported once


def _cpu(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


def _ends(*ends):
    return torch.tensor(ends, dtype=torch.int32)


BAD = {
    "float32": (
        lambda: oasr.group_gemm(_cpu(4, 8, dtype=torch.float32), _cpu(2, 3, 8), _ends(2, 4)),
        TypeError,
        "float32",
    ),
    "not a tensor": (lambda: oasr.group_gemm([[1.0]], _cpu(2, 3, 8), _ends(2, 4)), TypeError, "`input`"),
    "3-D input": (lambda: oasr.group_gemm(_cpu(1, 4, 8), _cpu(2, 3, 8), _ends(2, 4)), ValueError, "2-D"),
    "2-D weight": (lambda: oasr.group_gemm(_cpu(4, 8), _cpu(3, 8), _ends(2, 4)), ValueError, "`weight` must be 3-D"),
    "weight dtype": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8, dtype=torch.float16), _ends(2, 4)),
        TypeError,
        "`weight`",
    ),
    "K mismatch": (lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 9), _ends(2, 4)), ValueError, "K"),
    "no groups": (lambda: oasr.group_gemm(_cpu(4, 8), _cpu(0, 3, 8), _ends()), ValueError, "at least one group"),
    "offsets int64": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), torch.tensor([2, 4])),
        TypeError,
        "`offsets` has dtype torch.int64",
    ),
    "offsets list": (lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), [2, 4]), TypeError, "`offsets` must be"),
    "offsets length": (lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), _ends(4)), ValueError, r"expected \(2,\)"),
    "bias shape": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), _ends(2, 4), bias=_cpu(3)),
        ValueError,
        "`bias`",
    ),
    "bias dtype": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), _ends(2, 4), bias=_cpu(2, 3, dtype=torch.float16)),
        TypeError,
        "`bias`",
    ),
    "out shape": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), _ends(2, 4), out=_cpu(4, 8)),
        ValueError,
        "`out`",
    ),
    "K strided": (lambda: oasr.group_gemm(_cpu(4, 16)[:, ::2], _cpu(2, 3, 8), _ends(2, 4)), ValueError, "contiguous"),
    "weight K strided": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 16)[:, :, ::2], _ends(2, 4)),
        ValueError,
        "`weight`'s last dimension",
    ),
    "offsets on meta": (
        lambda: oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), torch.zeros(2, dtype=torch.int32, device="meta")),
        ValueError,
        "`offsets` is on meta",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_before_launch(torch_group, case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value) and torch_group.calls == []


def test_out_sharing_memory_with_an_argument_is_refused(torch_group):
    x = _cpu(4, 8)
    with pytest.raises(ValueError, match="`out` and `input`"):
        oasr.group_gemm(x, _cpu(2, 8, 8), _ends(2, 4), out=x)
    w = _cpu(1, 4, 8)
    with pytest.raises(ValueError, match="`out` overlaps `weight`"):
        oasr.group_gemm(_cpu(8, 8), w, _ends(8), out=w.view(8, 4))
    assert torch_group.calls == []


def test_cpu_tensors_get_one_sentence():
    with pytest.raises(ValueError, match="Oasr kernels run on CUDA tensors"):
        oasr.group_gemm(_cpu(4, 8), _cpu(2, 3, 8), _ends(2, 4))
    assert GROUP_GEMM.capabilities == (90,)


# ---------------------------------------------------------------------------
# GPU (sm90)
# ---------------------------------------------------------------------------


@gpu
class TestGroupGemm:
    @pytest.mark.parametrize("case", list(SIZES))
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [False, True], ids=["plain", "bias"])
    def test_groups_against_a_float64_loop(self, case, dtype, with_bias):
        x, w, b, offsets = operands(SIZES[case], 264, 192, dtype, "cuda")
        bias = b if with_bias else None
        out = poisoned((x.shape[0], 264), dtype)
        oasr.group_gemm(x, w, offsets, bias, out=out)
        assert_close(out, reference(x, w, offsets, bias), dtype, 192)

    @pytest.mark.parametrize("n", [256, 264], ids=["n256", "n264"])
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
    @pytest.mark.parametrize("with_bias", [False, True], ids=["plain", "bias"])
    def test_long_k_picks_against_a_float64_loop(self, n, dtype, with_bias):
        """From K = 2048 the rule takes CUTLASS's 256x128 cooperative tiles up to N = 256, else 128x128 ping-pong,
        launched without PDL: each with both dtypes and the bias, on uneven groups with an empty one."""
        x, w, b, offsets = operands([300, 0, 517, 41], n, 2048, dtype, "cuda", seed=6)
        bias = b if with_bias else None
        out = poisoned((x.shape[0], n), dtype)
        oasr.group_gemm(x, w, offsets, bias, out=out)
        assert_close(out, reference(x, w, offsets, bias), dtype, 2048)

    @pytest.mark.parametrize("groups,rows,n,k", [(8, 8000, 1024, 256), (1024, 5000, 64, 64), (3, 17, 24, 8)])
    def test_issue_shapes_and_many_groups(self, groups, rows, n, k):
        sizes = random_sizes(groups, rows, seed=groups)
        x, w, _, offsets = operands(sizes, n, k, torch.bfloat16, "cuda", seed=2)
        out = poisoned((rows, n), torch.bfloat16)
        oasr.group_gemm(x, w, offsets, out=out)
        assert_close(out, reference(x, w, offsets), torch.bfloat16, k)

    def test_views_and_odd_sizes(self):
        sizes = [0, 33, 7, 0, 61]
        x, w, b, offsets = operands(sizes, 40, 72, torch.bfloat16, "cuda", seed=4)
        wide = torch.zeros(101, 96, dtype=torch.bfloat16, device="cuda")
        wide[:, 8:80] = x
        out = poisoned((101, 48), torch.bfloat16)[:, :40]  # strided destination
        oasr.group_gemm(wide[:, 8:80], w, offsets, b, out=out)
        assert_close(out, reference(x, w, offsets, b), torch.bfloat16, 72)
        y = oasr.group_gemm(x[:, :13], w[:, :, :13].contiguous(), offsets)  # K = 13: copied into padded rows
        assert_close(y, reference(x[:, :13], w[:, :, :13], offsets), torch.bfloat16, 13)
        y = oasr.group_gemm(x, w[:, :37], offsets)  # N = 37: padded result rows
        assert y.stride() == (40, 1)
        assert_close(y, reference(x, w[:, :37], offsets), torch.bfloat16, 72)

    @pytest.mark.parametrize("pdl", [False, True], ids=["stream", "pdl"])
    @pytest.mark.parametrize("config", gemm_config.GROUP_PICKS, ids=lambda c: c.name)
    def test_every_pick(self, config, pdl):
        sizes = random_sizes(16, 4000, seed=7)
        x, w, _, offsets = operands(sizes, 512, 256, torch.bfloat16, "cuda", seed=5)
        out = poisoned((4000, 512), torch.bfloat16)
        group_module._launch(x, w, offsets, None, out, config, pdl)
        assert_close(out, reference(x, w, offsets), torch.bfloat16, 256)

    @pytest.mark.parametrize("pdl", [False, True], ids=["stream", "pdl"])
    def test_graph_replay_with_changed_offsets(self, pdl, monkeypatch):
        monkeypatch.setattr(gemm_config, "GROUP_PDL", pdl)  # the public op's launch, captured with its PDL edge
        rows = 3000
        x, w, b, offsets = operands(random_sizes(8, rows, seed=8), 256, 128, torch.bfloat16, "cuda", seed=6)
        out = oasr.group_gemm(x, w, offsets, b)  # first call (workspace) before capturing
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            oasr.group_gemm(x, w, offsets, b, out=out)
        for seed, sizes in enumerate([random_sizes(8, rows, seed=9), [0] * 7 + [rows], [rows] + [0] * 7]):
            offsets.copy_(ends_of(sizes))
            x.copy_(torch.randn(rows, 128, generator=torch.Generator().manual_seed(seed)).to(x))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_close(out, reference(x, w, offsets, b), torch.bfloat16, 128)
        oasr.group_gemm_check()

    @pytest.mark.parametrize("pdl", [False, True], ids=["stream", "pdl"])
    def test_graph_of_a_copy_and_two_calls(self, pdl, monkeypatch):
        """A copy node ahead of the first launch, then two calls on one workspace: every edge kind PDL meets."""
        monkeypatch.setattr(gemm_config, "GROUP_PDL", pdl)
        rows = 2000
        x, w, b, offsets = operands(random_sizes(8, rows, seed=16), 256, 128, torch.bfloat16, "cuda", seed=17)
        staged, reversed_offsets = offsets.clone(), offsets.clone()
        outs = [oasr.group_gemm(x, w, offsets, b), oasr.group_gemm(x, w, reversed_offsets, b)]
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            offsets.copy_(staged)  # a memcpy node, not a kernel, right before a PDL launch
            oasr.group_gemm(x, w, offsets, b, out=outs[0])
            oasr.group_gemm(x, w, reversed_offsets, b, out=outs[1])
        for seed in (18, 19):
            sizes = random_sizes(8, rows, seed=seed)
            staged.copy_(ends_of(sizes))
            reversed_offsets.copy_(ends_of(sizes[::-1]))
            for out in outs:
                out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_close(outs[0], reference(x, w, staged, b), torch.bfloat16, 128)
            assert_close(outs[1], reference(x, w, reversed_offsets, b), torch.bfloat16, 128)
        oasr.group_gemm_check()

    @pytest.mark.parametrize("config", [None, gemm_config.GROUP_WIDE], ids=["pick", "cutlass-wide"])
    @pytest.mark.parametrize("pdl", [False, True], ids=["stream", "pdl"])
    def test_back_to_back_calls_sharing_the_workspace(self, pdl, config):
        """CUTLASS's: call 2's setup kernel rewrites the workspace call 1's grouped kernel reads, so it must wait
        for it; the direct kernel (the pick here) reads offsets that the next call's may not overwrite."""
        rows = 4000
        x, w, _, _ = operands(random_sizes(16, rows, seed=11), 512, 256, torch.bfloat16, "cuda", seed=12)
        ends = [ends_of(random_sizes(16, rows, seed=s)).cuda() for s in (13, 14, 15)]
        outs = [poisoned((rows, 512), torch.bfloat16) for _ in ends]
        for offsets, out in zip(ends, outs, strict=True):  # no synchronisation in between
            group_module._launch(x, w, offsets, None, out, config, pdl)
        torch.cuda.synchronize()
        for offsets, out in zip(ends, outs, strict=True):
            assert_close(out, reference(x, w, offsets), torch.bfloat16, 256)

    @pytest.mark.parametrize("pdl", [False, True], ids=["stream", "pdl"])
    def test_no_host_synchronisation(self, pdl, monkeypatch):
        monkeypatch.setattr(gemm_config, "GROUP_PDL", pdl)
        x, w, b, offsets = operands(random_sizes(8, 2000, seed=10), 128, 64, torch.bfloat16, "cuda")
        out = oasr.group_gemm(x, w, offsets, b)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            oasr.group_gemm(x, w, offsets, b, out=out)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        assert_close(out, reference(x, w, offsets, b), torch.bfloat16, 64)

    @pytest.mark.parametrize("config", [gemm_config.DIRECT, gemm_config.GROUP_WIDE], ids=lambda c: c.name)
    def test_bad_offsets_are_clamped_and_flagged(self, config):
        x, w, _, _ = operands([50, 50], 64, 64, torch.bfloat16, "cuda")
        oasr.group_gemm_check()
        bad = torch.tensor([60, 40], dtype=torch.int32, device="cuda")  # decreasing: group 1 is empty
        out = poisoned((100, 64), torch.bfloat16)
        group_module._launch(x, w, bad, None, out, config)
        with pytest.raises(ValueError, match="not non-decreasing"):
            oasr.group_gemm_check()
        assert_close(out[:60], reference(x[:60], w[:1], bad[:1]), torch.bfloat16, 64)
        past = torch.tensor([50, 130], dtype=torch.int32, device="cuda")  # past L: group 1 clamped to L
        group_module._launch(x, w, past, None, out, config)
        with pytest.raises(ValueError, match="not non-decreasing"):
            oasr.group_gemm_check()
        assert_close(out, reference(x, w, torch.tensor([50, 100], dtype=torch.int32)), torch.bfloat16, 64)
