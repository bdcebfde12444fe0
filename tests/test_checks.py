"""The checks every public op shares (CPU): devices and compute capabilities, on a faked GPU.

Tensors made under FakeTensorMode live on ``cuda:0`` on any machine, and
``oasr._checks.compute_capability`` is patched to the GPU under test, so the device checks
(``input`` on a GPU of a capability its family supports, every other tensor on ``input``'s
device) run here. The family's module is a stub that records the launches.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from conftest import RecordingLaunchers, standing_in
from torch._subclasses.fake_tensor import FakeTensorMode

import oasr
from oasr import _checks
from oasr.jit.families import FAMILIES, NORM, SCALE, family_of


@pytest.fixture
def gpu(monkeypatch):
    """Fake a GPU of compute capability ``gpu.capability`` (9.0 unless set); yields the stub modules."""
    state = type("FakeGPU", (), {"capability": (9, 0), "lookups": 0, "launchers": RecordingLaunchers()})()

    def capability(device):
        state.lookups += 1
        return state.capability

    monkeypatch.setattr(_checks, "compute_capability", capability)
    _checks.forget_devices()
    with standing_in(state.launchers), FakeTensorMode():
        yield state
    _checks.forget_devices()


def cuda(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="cuda")


def call_every_op(**extra: torch.Tensor) -> None:
    """Each public op once, on well-formed [2, 3, 8] half tensors (``extra`` replaces arguments)."""
    x, w = cuda(2, 3, 8), cuda(8)
    oasr.scale(x, 2.0, out=extra.get("out", cuda(2, 3, 8)))
    oasr.glu(x, out=extra.get("half_out", cuda(2, 3, 4)))
    oasr.swish(x, out=extra.get("out", cuda(2, 3, 8)))
    oasr.layer_norm(x, extra.get("weight", w), extra.get("bias", w), out=extra.get("out", cuda(2, 3, 8)))
    oasr.rms_norm(x, extra.get("weight", w), out=extra.get("out", cuda(2, 3, 8)))
    residual = extra.get("residual", cuda(2, 3, 8))
    oasr.add_layer_norm(x, residual, extra.get("weight", w), out=extra.get("out", cuda(2, 3, 8)))
    oasr.add_rms_norm(x, residual, extra.get("weight", w), residual_out=extra.get("residual_out", cuda(2, 3, 8)))
    taps = cuda(3, 8)
    oasr.depthwise_conv1d(x, taps, extra.get("bias", w), padding=1, out=extra.get("out", cuda(2, 3, 8)))
    oasr.depthwise_conv1d_step(x, cuda(2, 2, 8), taps, extra.get("bias", w), out=extra.get("out", cuda(2, 3, 8)))


def test_a_supported_gpu_is_looked_up_once_per_family(gpu):
    call_every_op()
    call_every_op()
    assert gpu.lookups == 4  # one per family, on the first call
    launchers = ["scale", "glu", "swish", "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"]
    launchers += ["depthwise_conv1d", "depthwise_conv1d_step"]
    assert gpu.launchers.calls == 2 * launchers


# Every op that launches a kernel; fold_batch_norm is plain torch (no kernel, no device check).
KERNEL_OPS = [op for family in FAMILIES for op in family.ops if op != "fold_batch_norm"]


@pytest.mark.parametrize("op", KERNEL_OPS)
def test_an_unsupported_gpu_gets_one_sentence_before_any_launch(gpu, op):
    gpu.capability = (7, 5)
    x, w, frames, taps = cuda(2, 8), cuda(8), cuda(2, 3, 8), cuda(3, 8)
    calls = {
        "scale": lambda: oasr.scale(x, 2.0),
        "glu": lambda: oasr.glu(x),
        "swish": lambda: oasr.swish(x),
        "bias_activation": lambda: oasr.bias_activation(x, w, "relu"),
        "layer_norm": lambda: oasr.layer_norm(x, w),
        "rms_norm": lambda: oasr.rms_norm(x, w),
        "add_layer_norm": lambda: oasr.add_layer_norm(x, x, w),
        "add_rms_norm": lambda: oasr.add_rms_norm(x, x, w),
        "depthwise_conv1d": lambda: oasr.depthwise_conv1d(frames, taps, w, padding=1, activation="silu"),
        "depthwise_conv1d_step": lambda: oasr.depthwise_conv1d_step(frames, cuda(2, 2, 8), taps, w),
        "gemm": lambda: oasr.gemm(x, cuda(4, 8), activation="silu"),
        "gemm_glu": lambda: oasr.gemm_glu(x, cuda(4, 8)),
        "bmm": lambda: oasr.bmm(frames, cuda(2, 8, 4)),
        "group_gemm": lambda: oasr.group_gemm(x, cuda(2, 4, 8), torch.ones(2, dtype=torch.int32, device="cuda")),
        "conv2d": lambda: oasr.conv2d(cuda(2, 5, 5, 1), cuda(8, 3, 3, 1), w, activation="relu"),
        "conv2d_subsampling": lambda: oasr.conv2d_subsampling(
            cuda(2, 9, 9), cuda(16, 1, 3, 3), cuda(16), cuda(16, 16, 3, 3), cuda(16)
        ),
        "attention": lambda: oasr.attention(cuda(2, 3, 2, 64), cuda(2, 3, 2, 64), cuda(2, 3, 2, 64)),
        "rel_pos_attention": lambda: oasr.rel_pos_attention(
            cuda(2, 3, 2, 64), cuda(2, 3, 2, 64), cuda(2, 3, 2, 64), cuda(5, 2, 64), cuda(2, 64), cuda(2, 64)
        ),
    }
    with pytest.raises(ValueError) as info:
        calls[op]()
    message = str(info.value)
    first = {"depthwise_conv1d_step": "input_chunk", "attention": "q", "rel_pos_attention": "q"}.get(op, "input")
    assert message.startswith(f"oasr.{op}: `{first}` is on cuda:0, a GPU of compute capability 7.5, but the ")
    listed = ", ".join(f"{cc // 10}.{cc % 10}" for cc in sorted(family_of(op).capabilities))
    assert f"kernels run only on compute capability {listed}" in message and "\n" not in message
    assert gpu.launchers.calls == []
    # Not remembered: the next call is refused again.
    with pytest.raises(ValueError, match=r"compute capability 7\.5"):
        calls[op]()


def test_a_family_declared_for_sm90_refuses_an_sm80_gpu(gpu, monkeypatch):
    """The coming CUTLASS families declare capabilities=(90,): an A100 user gets one sentence."""
    hopper_only = dataclasses.replace(NORM, capabilities=(90,))
    monkeypatch.setattr("oasr.norm.NORM", hopper_only)
    monkeypatch.setattr("oasr.norm._READY", _checks.ready_devices(hopper_only))
    gpu.capability = (8, 0)
    message = re.escape(
        "oasr.rms_norm: `input` is on cuda:0, a GPU of compute capability 8.0, but the norm kernels run only "
        "on compute capability 9.0."
    )
    with pytest.raises(ValueError, match=f"^{message}$"):
        oasr.rms_norm(cuda(2, 8), cuda(8))
    oasr.scale(cuda(2, 8), 2.0)  # other families still run
    gpu.capability = (9, 0)
    oasr.rms_norm(cuda(2, 8), cuda(8))
    assert gpu.launchers.calls == ["scale", "rms_norm"]


def test_check_device_without_a_gpu_names_the_fix():
    with pytest.raises(ValueError) as info:
        _checks.check_device("scale", SCALE, torch.device("cpu"))
    assert str(info.value).startswith("oasr.scale: `input` is on cpu, but Oasr kernels run on CUDA tensors")
    assert str(info.value).endswith("move it with `input.cuda()`.")


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("out", torch.empty(2, 3, 8, dtype=torch.float16)),
        ("weight", torch.empty(8, dtype=torch.float16)),
        ("residual", torch.empty(2, 3, 8, dtype=torch.float16)),
        ("residual_out", torch.empty(2, 3, 8, dtype=torch.float16)),
        ("bias", torch.empty(8, dtype=torch.float16, device="meta")),
    ],
)
def test_every_tensor_must_be_on_the_device_of_input(gpu, argument, value):
    device = value.device
    with FakeTensorMode(allow_non_fake_inputs=True):
        tensor = torch.empty_like(value, device=device)  # a fake tensor on cpu or meta
    with pytest.raises(ValueError, match=f"`{argument}` is on {device}, expected cuda:0 \\(the device of `input`\\)"):
        call_every_op(**{argument: tensor})
    with pytest.raises(ValueError, match="`out` is on cpu"):
        oasr.glu(cuda(2, 8), out=torch.empty(2, 4, dtype=torch.float16, device="cpu"))


def test_shapes_are_checked_before_devices(gpu):
    """Order: a wrong shape is reported even when a device is wrong too."""
    with pytest.raises(ValueError, match=r"`weight` has shape \(4,\), expected \(8,\)"):
        oasr.rms_norm(cuda(2, 8), torch.empty(4, dtype=torch.float16, device="cpu"))
    with pytest.raises(TypeError, match=r"`out` has dtype torch\.float32"):
        oasr.swish(torch.empty(2, 8, dtype=torch.float16, device="cpu"), out=torch.empty(2, 8, device="cpu"))


def test_launchers_get_the_layouts_they_take(gpu):
    """The launchers refuse nothing (they return None and assert): the ops hand the row-view launchers (GLU, the
    norms) [rows, C] views of row-strided tensors, and contiguous tensors as they are.

    (Fake CUDA tensors need no copy for these layouts; the GPU tests cover the copies.)
    """
    launches: list[tuple[str, tuple]] = []

    class Strides(RecordingLaunchers):
        def __getattr__(self, name):
            def launch(*args):
                launches.append((name, tuple(a.stride() for a in args if isinstance(a, torch.Tensor))))

            return launch

    with standing_in(Strides()):
        w, out = cuda(8), cuda(2, 3, 8)
        x = torch.empty_strided((2, 3, 8), (48, 16, 1), dtype=torch.float16, device="cuda")  # rows 16 apart
        assert oasr.layer_norm(x, w, w, out=out) is out
        assert oasr.glu(x).shape == (2, 3, 4)
        assert oasr.swish(out, out=out) is out
    assert launches == [
        ("layer_norm", ((8, 1), (16, 1), (1,), (1,))),  # out and input as [6, 8] rows, weight and bias
        ("glu", ((4, 1), (16, 1))),
        ("swish", ((24, 8, 1), (24, 8, 1))),  # contiguous: as they are
    ]


# ---------------------------------------------------------------------------
# Arguments no kernel takes, refused in one sentence naming them (issue 57)
# ---------------------------------------------------------------------------


def test_sparse_tensors_are_refused_before_any_launch():
    dense = torch.randn(2, 3, 8)
    sparse = dense.to_sparse()
    w = torch.ones(8)
    calls = {
        "input": lambda: oasr.swish(sparse),
        "weight": lambda: oasr.layer_norm(dense, w.to_sparse()),
        "residual": lambda: oasr.add_rms_norm(dense, sparse, w),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"`{name}` is a torch.sparse_coo tensor; .* dense tensors"):
            call()


def test_the_streaming_step_names_its_first_argument():
    with pytest.raises(TypeError, match=r"oasr.depthwise_conv1d_step: `input_chunk` must be a torch.Tensor, got list"):
        oasr.depthwise_conv1d_step([1.0], torch.zeros(1, 2, 4), torch.ones(3, 4))
    with pytest.raises(TypeError, match=r"`input_chunk` has dtype torch.int32"):
        oasr.depthwise_conv1d_step(torch.zeros(1, 2, 4, dtype=torch.int32), torch.zeros(1, 2, 4), torch.ones(3, 4))
    with pytest.raises(ValueError, match=r"`input_chunk` is on cpu, but .* move it with `input_chunk.cuda\(\)`"):
        oasr.depthwise_conv1d_step(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.ones(3, 4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64, torch.float8_e4m3fn], ids=str)
def test_fold_batch_norm_refuses_tensors_it_cannot_fold(dtype):
    w, v = torch.ones(3, 4), torch.ones(4)
    with pytest.raises(TypeError, match=rf"oasr.fold_batch_norm: `weight` has dtype {re.escape(str(dtype))}"):
        oasr.fold_batch_norm(w.to(dtype), None, v, v)
    with pytest.raises(TypeError, match=rf"oasr.fold_batch_norm: `running_var` has dtype {re.escape(str(dtype))}"):
        oasr.fold_batch_norm(w, None, v, v.to(dtype))


def test_fold_batch_norm_names_an_eps_beyond_floats():
    w, v = torch.ones(3, 4), torch.ones(4)
    with pytest.raises(ValueError, match=r"oasr.fold_batch_norm: `eps` is too large for a float"):
        oasr.fold_batch_norm(w, None, v, v, eps=10**400)
    with pytest.raises(ValueError, match=r"`eps` must be finite and >= 0, got inf"):
        oasr.fold_batch_norm(w, None, v, v, eps=float("inf"))


def test_huge_padding_and_strides_are_refused_by_name():
    x = torch.randn(1, 8, 4)
    with pytest.raises(ValueError, match=r"oasr.depthwise_conv1d: `padding` must be at most 1073741824"):
        oasr.depthwise_conv1d(x, torch.ones(3, 4), padding=10**30)
    image = torch.randn(1, 8, 8, 8, dtype=torch.bfloat16)
    weight = torch.randn(8, 3, 3, 8, dtype=torch.bfloat16)
    for name in ("stride", "padding"):
        with pytest.raises(ValueError, match=rf"oasr.conv2d: `{name}` must be at most 1073741824"):
            oasr.conv2d(image, weight, **{name: (1, 10**30)})
