"""Memory and autograd checks of the public ops (CPU): refused before any launch, naming the arguments.

A written tensor (``out``, ``residual_out``) may be exactly a tensor the op documents as in
place (``out`` is ``input``; ``residual_out`` is ``residual`` or ``input``), but must share
no other memory with the tensors of the call (a shifted view, a partly overlapping one) and
must not overlap itself (an ``expand``ed view), as PyTorch refuses these patterns. Tensors
that require grad are refused while grad mode is on (the ops have no backward).

CPU tensors pass the device check here (CPU is marked ready for every family) and every
family's module is a stub that records launches, so the checks, which come after the
device checks, run on real CPU memory; fake tensors (a faked GPU) skip them.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from conftest import RecordingLaunchers
from torch._subclasses.fake_tensor import FakeTensorMode

import oasr
from oasr import _checks
from oasr.jit.families import FAMILIES

C = 8


@pytest.fixture
def launches():
    """CPU passes the device check; every family records its launches (the list is yielded)."""
    stub = RecordingLaunchers()
    for family in FAMILIES:
        family.use_module(stub)
        _checks.ready_devices(family).add(torch.device("cpu"))
    yield stub.calls
    for family in FAMILIES:
        family.use_module(None)
    _checks.forget_devices()


def refused(calls: list[str], call, message: str, error: type[Exception] = ValueError) -> str:
    """``call()`` raises ``error`` matching ``message``, one line, and launches nothing."""
    with pytest.raises(error, match=message) as info:
        call()
    assert calls == [] and "\n" not in str(info.value)
    return str(info.value)


# ---------------------------------------------------------------------------
# The helpers
# ---------------------------------------------------------------------------


def test_overlaps_compares_byte_ranges():
    x = torch.zeros(4, C)
    assert _checks.overlaps(x[1:], x[:-1]) and _checks.overlaps(x, x) and _checks.overlaps(x[:, :4], x[:, 2:6])
    assert not _checks.overlaps(x[:2], x[2:]) and not _checks.overlaps(x, torch.zeros(4, C))
    assert not _checks.overlaps(x[:0], x) and not _checks.overlaps(x[4:], x)  # empty: no memory
    assert _checks.overlaps(x.t(), x[3:])  # strided: first to last byte
    with FakeTensorMode():
        fake = torch.empty(4, C)
    assert not _checks.overlaps(fake, fake)
    assert _checks.extent(x[1:, 2:5]) == (x.data_ptr() + (C + 2) * 4, x.data_ptr() + (3 * C + 5) * 4)


@pytest.mark.parametrize(
    ("view", "overlapping"),
    [
        (lambda: torch.empty(1, C).expand(4, C), True),
        (lambda: torch.empty(C + 3).as_strided((4, C), (1, 1)), True),
        (lambda: torch.empty(C, 1).expand(C, 3).t(), True),
        (lambda: torch.empty(4, C).t(), False),
        (lambda: torch.empty(4, 2 * C)[:, ::2], False),
        (lambda: torch.empty(1, C).expand(1, C), False),
        (lambda: torch.empty(5, C)[1:], False),
    ],
    ids=["expand", "as_strided", "expand-t", "t", "every-other", "size-1-expand", "offset"],
)
def test_overlaps_itself(view, overlapping):
    assert _checks.overlaps_itself(view()) is overlapping


@pytest.mark.parametrize(
    "view",
    [
        lambda: torch.empty(1, C).expand(4, C),
        lambda: torch.empty(C + 3).as_strided((4, C), (1, 1)),
        lambda: torch.empty(4, C).t(),
        lambda: torch.empty(4, 2 * C)[:, ::2],
        lambda: torch.empty(3, 5, C + 8)[..., :C],  # rows padded: the one-pass case
        lambda: torch.empty(3, 5, C + 8)[..., :C].transpose(0, 1),  # strides out of order: the sorted test
        lambda: torch.empty(3, 5, C + 8)[:, :0, :C],  # empty
        lambda: torch.empty(2, 1, C).expand(2, 3, C)[..., ::2],
        lambda: torch.empty(6, 4 * C)[::2, 1::3],
    ],
    ids=["expand", "as_strided", "t", "every-other", "padded", "padded-t", "empty", "expand-3d", "strided-2d"],
)
def test_disjoint_span_is_overlaps_itself_and_span_in_one(view):
    t = view()
    assert _checks._disjoint_span(t) == (None if _checks.overlaps_itself(t) else _checks._span(t))


def _memory(out, source, in_place, other=None):
    """check_placement's memory rule on CPU tensors (the device and autograd steps pass them)."""
    writes = (("out", out),) if other is None else (("out", out), ("residual_out", other))
    _checks._check_memory("op", (("input", source),), writes, ("input",) if in_place else ())


def test_the_memory_rule_allows_exact_aliasing_only_where_asked():
    x = torch.zeros(4, C)
    _memory(x, x, True)
    _memory(x.view(4, C), x, True)  # another object, the same memory
    _memory(x[2:], x[:2], False)
    _memory(x[:0], x, False)
    with pytest.raises(ValueError, match=r"^oasr\.op: `out` and `input` must be different tensors"):
        _memory(x, x, False)
    with pytest.raises(ValueError, match=r"^oasr\.op: `out` overlaps `input` in memory .*may be `input` itself"):
        _memory(x[:-1], x[1:], True)
    with pytest.raises(ValueError, match=r"`out` overlaps `input` in memory"):
        _memory(x.view(C, 4), x, True)  # same bytes, another shape
    with pytest.raises(ValueError, match=r"`out` has elements that share memory"):
        _memory(torch.zeros(1, C).expand(4, C), torch.zeros(4, C), True)
    with pytest.raises(ValueError, match=r"`residual_out` overlaps `out` in memory"):
        _memory(x[:2], torch.zeros(4, C), True, other=x[1:])  # two outputs never share memory


# ---------------------------------------------------------------------------
# The ops: partial and internal overlap refused, in place allowed
# ---------------------------------------------------------------------------

NORMS = ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"]


def norm(op: str, x: torch.Tensor, **kwargs):
    """``op`` on ``x`` with weight and bias (and ``x`` as the residual unless given)."""
    w = torch.ones(x.shape[-1])
    fn = getattr(oasr, op)
    if op.startswith("add_"):
        return fn(x, kwargs.pop("residual", torch.zeros_like(x)), w, w, **kwargs)
    return fn(x, w, w, **kwargs)


def test_scale_and_swish_refuse_a_shifted_out(launches):
    x = torch.zeros(16)
    message = r"^oasr\.scale: `out` overlaps `input` in memory \(a shifted or overlapping view\); it may be `input`"
    refused(launches, lambda: oasr.scale(x[1:], 2, out=x[:-1]), message)
    refused(launches, lambda: oasr.scale(x[:-1], 2, out=x[1:]), message)
    refused(launches, lambda: oasr.swish(x[1:], out=x[:-1]), r"^oasr\.swish: `out` overlaps `input`")


@pytest.mark.parametrize("op", NORMS)
def test_norms_refuse_an_out_shifted_by_a_row(launches, op):
    rows = torch.zeros(5, C)
    refused(launches, lambda: norm(op, rows[1:], out=rows[:-1]), rf"^oasr\.{op}: `out` overlaps `input` in memory")
    refused(launches, lambda: norm(op, rows[:-1], out=rows[1:]), rf"^oasr\.{op}: `out` overlaps `input` in memory")
    flat = torch.zeros(4 * C + 1)  # by one element
    refused(launches, lambda: norm(op, flat[1:].view(4, C), out=flat[:-1].view(4, C)), "`out` overlaps `input`")


@pytest.mark.parametrize("op", ["add_layer_norm", "add_rms_norm"])
def test_fused_norms_refuse_partly_overlapping_outputs(launches, op):
    x, big = torch.zeros(4, C), torch.zeros(5, C)
    message = rf"^oasr\.{op}: `residual_out` overlaps `out` in memory .* they must not otherwise share memory"
    refused(launches, lambda: norm(op, x, out=big[:-1], residual_out=big[1:]), message)
    refused(launches, lambda: norm(op, x, out=big[1:], residual_out=big[:-1]), message)
    norm(op, big[1:], residual=big[:-1], out=x)  # both read: they may overlap
    assert launches == [op]
    launches.clear()
    refused(launches, lambda: norm(op, x, residual=big[1:], out=big[:-1]), "`out` overlaps `residual` in memory")
    refused(launches, lambda: norm(op, x, residual=big[1:], residual_out=big[:-1]), "`residual_out` overlaps")
    refused(launches, lambda: norm(op, big[1:], residual_out=big[:-1]), "`residual_out` overlaps `input`")
    shifted = big[1:]  # in place over `input`, whose residual is a shifted view of it
    refused(launches, lambda: norm(op, big[:-1], residual=shifted, out=shifted), "`out` overlaps `input` in memory")
    refused(
        launches, lambda: norm(op, big[:-1], residual=shifted, residual_out=shifted), "`residual_out` overlaps `input`"
    )
    refused(launches, lambda: norm(op, shifted, residual=big[:-1], out=shifted), "`out` overlaps `residual` in memory")


@pytest.mark.parametrize("op", ["scale", "swish", "glu", *NORMS])
def test_an_out_that_overlaps_itself_is_refused(launches, op):
    x = torch.zeros(4, C)
    cols = C // 2 if op == "glu" else C
    expanded = torch.empty(1, cols).expand(4, cols)
    calls = {
        "scale": lambda: oasr.scale(x, 2.0, out=expanded),
        "swish": lambda: oasr.swish(x, out=expanded),
        "glu": lambda: oasr.glu(x, out=expanded),
    }
    call = calls.get(op, lambda: norm(op, x, out=expanded))
    message = refused(launches, call, rf"^oasr\.{op}: `out` has elements that share memory \(strides \(0, 1\)")
    assert "expand" in message
    if op.startswith("add_"):
        refused(launches, lambda: norm(op, x, residual_out=expanded), "`residual_out` has elements that share memory")


def test_glu_refuses_any_out_in_its_input(launches):
    x = torch.zeros(4, C)
    message = r"^oasr\.glu: `out` overlaps `input` in memory \(a shifted or overlapping view\); they must not"
    refused(launches, lambda: oasr.glu(x, out=x[:, : C // 2]), message)
    refused(launches, lambda: oasr.glu(x, out=x[:, C // 2 :]), message)
    refused(launches, lambda: oasr.glu(x, out=x.view(-1)[: 2 * C].view(4, C // 2)), message)
    big = torch.zeros(4, 2 * C)
    refused(launches, lambda: oasr.glu(big[:, :C], out=big[:, C : C + C // 2]), message)  # ranges: conservative


def test_in_place_and_disjoint_views_are_allowed(launches):
    x, r = torch.zeros(4, C), torch.zeros(4, C)
    assert oasr.scale(x, 2.0, out=x) is x
    assert oasr.scale(x, 2.0, out=x.view(4, C)).data_ptr() == x.data_ptr()
    assert oasr.swish(x, out=x) is x
    strided = torch.zeros(C, 4).t()
    assert oasr.swish(strided, out=strided) is strided
    for op in NORMS:
        assert norm(op, x, out=x) is x
    for op in ("add_layer_norm", "add_rms_norm"):
        assert norm(op, x, residual=r, out=x, residual_out=r) is x  # the Conformer pattern
        assert norm(op, x, residual=r, out=r, residual_out=x) is r
    buffer = torch.zeros(8, C)
    oasr.scale(buffer[:4], 2.0, out=buffer[4:])
    oasr.glu(buffer[:4], out=torch.zeros(8, C // 2)[4:])
    oasr.rms_norm(buffer[4:], torch.ones(C), out=buffer[:4])
    oasr.scale(buffer[:0], 2.0, out=buffer[:0])
    oasr.glu(torch.zeros(0, C), out=torch.zeros(0, C // 2))
    assert len(launches) == 2 + 2 + 4 + 2 * 2 + 5


def test_fake_tensors_skip_the_memory_checks(launches):
    """Fake tensors (a faked GPU) address no memory: their data_ptr()s (all 0, with a warning) are not read."""
    with warnings.catch_warnings(), FakeTensorMode():
        warnings.simplefilter("error")
        x, out = torch.empty(4, C), torch.empty(4, C)
        oasr.scale(x, 2.0, out=out)
        oasr.glu(x, out=torch.empty(4, C // 2))
        oasr.rms_norm(x, torch.ones(C), out=out)
        oasr.add_rms_norm(x, x, torch.ones(C), out=out, residual_out=torch.empty(4, C))
    assert launches == ["scale", "glu", "rms_norm", "add_rms_norm"]


# ---------------------------------------------------------------------------
# Autograd: no backward, so tensors that require grad are refused while grad mode is on
# ---------------------------------------------------------------------------


def every_op(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> dict[str, object]:
    return {
        "scale": lambda: oasr.scale(x, 2.0, out=out),
        "glu": lambda: oasr.glu(x),
        "swish": lambda: oasr.swish(x, out=out),
        "layer_norm": lambda: oasr.layer_norm(x, w, out=out),
        "rms_norm": lambda: oasr.rms_norm(x, w, out=out),
        "add_layer_norm": lambda: oasr.add_layer_norm(x, torch.zeros(4, C), w, out=out),
        "add_rms_norm": lambda: oasr.add_rms_norm(x, torch.zeros(4, C), w, residual_out=out),
    }


@pytest.mark.parametrize("op", ["scale", "glu", "swish", *NORMS])
def test_tensors_that_require_grad_are_refused_under_grad_mode(launches, op):
    x, w = torch.zeros(4, C, requires_grad=True), torch.ones(C)
    message = rf"^oasr\.{op}: `input` requires grad, but Oasr ops have no backward .*torch\.no_grad\(\)"
    refused(launches, every_op(x, w)[op], message)
    if op in NORMS:
        refused(launches, every_op(x.detach(), torch.nn.Parameter(w))[op], rf"^oasr\.{op}: `weight` requires grad")
    with torch.no_grad():
        every_op(x, torch.nn.Parameter(w))[op]()
    with torch.inference_mode():
        every_op(torch.zeros(4, C), w)[op]()
    assert len(launches) == 2


def test_an_out_that_requires_grad_is_refused(launches):
    out = torch.zeros(4, C, requires_grad=True)
    refused(launches, lambda: oasr.swish(torch.zeros(4, C), out=out), r"^oasr\.swish: `out` requires grad")
    refused(launches, every_op(torch.zeros(4, C), torch.ones(C), out)["add_rms_norm"], "`residual_out` requires grad")


# ---------------------------------------------------------------------------
# Scalars: huge numbers name their argument; the fused norms' alpha is finite
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000], ids=["1e400", "-1e400", "1e5000"])
def test_ints_beyond_the_float_range_name_the_argument(launches, value):
    x = torch.zeros(4, C)
    message = refused(launches, lambda: oasr.scale(x, value), r"^oasr\.scale: `factor` is too large for a float")
    assert len(message) < 160  # no 400-digit number
    refused(launches, lambda: oasr.rms_norm(x, torch.ones(C), eps=value), r"^oasr\.rms_norm: `eps` is too large")
    refused(launches, lambda: oasr.add_rms_norm(x, x, torch.ones(C), alpha=value), r"`alpha` is too large")


@pytest.mark.parametrize("value", [1e400, -1e400, float("nan")], ids=["inf", "-inf", "nan"])
def test_alpha_must_be_finite(launches, value):
    x = torch.zeros(4, C)
    for op in ("add_layer_norm", "add_rms_norm"):
        refused(launches, lambda op=op: norm(op, x, alpha=value), rf"^oasr\.{op}: `alpha` must be finite, got {value}")
    refused(launches, lambda: oasr.rms_norm(x, torch.ones(C), eps=value), r"`eps` must be finite and >= 0")


@pytest.mark.parametrize("value", [1e400, -1e400, float("nan"), 1e300], ids=["inf", "-inf", "nan", "1e300"])
def test_scale_takes_any_float_factor_as_torch_does(launches, value):
    """``x * inf`` is allowed in torch; the factor is rounded to fp32 (1e300 becomes inf), as torch does."""
    x = torch.zeros(4, C)
    assert oasr.scale(x, value) is not x
    assert launches == ["scale"]


def test_glu_with_a_0_dim_out_gets_the_shape_error(launches):
    refused(launches, lambda: oasr.glu(torch.zeros(4, C), out=torch.zeros(())), re.escape("`out` has shape (), "))


def test_compiled_glu_of_a_0_dim_input_gets_the_eager_error(launches):
    torch._dynamo.reset()
    try:
        compiled = torch.compile(oasr.glu, backend="aot_eager", fullgraph=True)
        refused(launches, lambda: compiled(torch.zeros(())), r"^oasr\.glu: `input` must have at least one dimension")
    finally:
        torch._dynamo.reset()
