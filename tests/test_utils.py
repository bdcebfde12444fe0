"""CPU tests for oasr.utils (no GPU needed).

The compute capability of a call comes from its first CUDA tensor; on CPU
tensors that check is skipped, so tests that need a GPU capability patch
``oasr.utils._find_compute_capability``.
"""

import pytest
import torch

from oasr import utils
from oasr.utils import (
    backend_requirement,
    get_compute_capability,
    is_sm90a_supported,
    is_sm100a_supported,
    supported_compute_capability,
)


@pytest.fixture
def fake_cc(monkeypatch):
    """Pretend the first tensor lives on a GPU of the given capability."""

    def set_cc(cc):
        monkeypatch.setattr(utils, "_find_compute_capability", lambda args: cc)

    return set_cc


# ---------------------------------------------------------------------------
# @supported_compute_capability
# ---------------------------------------------------------------------------


def test_supported_compute_capability_tags_function():
    def check(x):
        return True

    tagged = supported_compute_capability([80, 90])(check)
    assert tagged is check
    assert check._supported_ccs == {80, 90}
    assert check.is_compute_capability_supported(90)
    assert not check.is_compute_capability_supported(75)


@pytest.mark.parametrize("bad", [[80, "90"], [True], [9.0]])
def test_supported_compute_capability_rejects_non_ints(bad):
    with pytest.raises(TypeError, match="compute capabilities must be ints"):
        supported_compute_capability(bad)


# ---------------------------------------------------------------------------
# Pattern 1: single implementation
# ---------------------------------------------------------------------------


@supported_compute_capability([80, 90])
def _check_single(x, scale=1.0):
    if x.shape[-1] > 4:
        raise ValueError("last dim must be <= 4")
    return True


@backend_requirement(backend_checks={}, common_check=_check_single)
def single(x, scale=1.0):
    """Single doc."""
    return x * scale


def test_single_runs_check_then_function():
    assert torch.equal(single(torch.ones(3), 2.0), torch.full((3,), 2.0))
    assert single.__name__ == "single" and single.__doc__ == "Single doc."
    with pytest.raises(ValueError, match="last dim must be <= 4"):
        single(torch.ones(5))


def test_single_skip_check():
    assert torch.equal(single(torch.ones(5), skip_check=True), torch.ones(5))


def test_single_queries():
    assert not single.has_backend_choices()
    assert not single.has_backend("cutlass")
    assert not single.is_backend_supported("cutlass")
    assert single.is_compute_capability_supported(90)
    assert not single.is_compute_capability_supported(75)


def test_single_unsupported_cc(fake_cc):
    fake_cc(75)
    with pytest.raises(RuntimeError, match=r"SM75\); supported: SM80, SM90"):
        single(torch.ones(3))
    single(torch.ones(3), skip_check=True)  # bypassed
    fake_cc(90)
    single(torch.ones(3))


def test_check_returning_false_is_value_error():
    @backend_requirement({}, common_check=lambda x: False)
    def f(x):
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match="inputs rejected by <lambda>"):
        f(torch.ones(1))


# ---------------------------------------------------------------------------
# Pattern 2: several backends
# ---------------------------------------------------------------------------

calls = []


@supported_compute_capability([80, 86, 89, 90])
def _cutlass_check(q, k, backend):
    calls.append("cutlass_check")
    if q.shape[-1] > 8:
        raise ValueError("CUTLASS: head_dim must be <= 8")
    return True


@supported_compute_capability([75, 80, 86, 89, 90, 100])
def _cudnn_check(q, k, backend):
    calls.append("cudnn_check")
    return True


def _common_check(q, k, backend):
    calls.append("common_check")
    if q.shape != k.shape:
        raise ValueError("q and k shapes differ")
    return True


@backend_requirement(
    backend_checks={"cutlass": _cutlass_check, "cudnn": _cudnn_check},
    common_check=_common_check,
)
def attention(q, k, backend="cutlass"):
    calls.append(f"run:{backend}")
    return backend


@pytest.fixture(autouse=True)
def _clear_calls():
    calls.clear()


def test_multi_backend_default_and_explicit():
    q = torch.ones(2, 4)
    assert attention(q, q) == "cutlass"
    assert calls == ["common_check", "cutlass_check", "run:cutlass"]
    calls.clear()
    assert attention(q, q, backend="cudnn") == "cudnn"
    assert calls == ["common_check", "cudnn_check", "run:cudnn"]


def test_multi_backend_value_errors_propagate():
    q = torch.ones(2, 16)
    with pytest.raises(ValueError, match="head_dim must be <= 8"):
        attention(q, q)
    assert "run:cutlass" not in calls
    assert attention(q, q, backend="cudnn") == "cudnn"
    with pytest.raises(ValueError, match="shapes differ"):
        attention(q, torch.ones(3, 16), backend="cudnn")


def test_unknown_backend():
    q = torch.ones(2, 4)
    with pytest.raises(ValueError) as e:
        attention(q, q, backend="triton")
    msg = str(e.value)
    assert "backend='triton'" in msg
    assert "valid backends: 'cutlass', 'cudnn'" in msg
    # No heuristic: "auto" is an unknown backend too.
    with pytest.raises(ValueError, match="backend='auto'"):
        attention(q, q, backend="auto")
    assert calls == []


def test_multi_backend_skip_check():
    q = torch.ones(2, 16)
    assert attention(q, q, skip_check=True) == "cutlass"
    assert attention(q, torch.ones(1), backend="x", skip_check=True) == "x"
    assert calls == ["run:cutlass", "run:x"]


def test_multi_backend_queries():
    assert attention.has_backend_choices()
    assert attention.has_backend("cudnn") and not attention.has_backend("triton")
    assert attention.is_backend_supported("cutlass")
    assert attention.is_backend_supported("cutlass", cc=90)
    assert not attention.is_backend_supported("cutlass", cc=100)
    assert attention.is_backend_supported("cudnn", cc=100)
    assert not attention.is_backend_supported("triton", cc=90)
    assert attention.is_compute_capability_supported(75)  # cudnn only
    assert attention.is_compute_capability_supported(100)
    assert not attention.is_compute_capability_supported(120)


def test_multi_backend_cc(fake_cc):
    q = torch.ones(2, 4)
    fake_cc(100)
    assert attention(q, q, backend="cudnn") == "cudnn"
    with pytest.raises(RuntimeError) as e:
        attention(q, q, backend="cutlass")
    msg = str(e.value)
    assert "backend='cutlass'" in msg and "SM100" in msg
    assert "supported: SM80, SM86, SM89, SM90" in msg


def test_common_check_ccs_restrict_every_backend(fake_cc):
    @supported_compute_capability([90])
    def common(x, backend):
        return True

    @supported_compute_capability([80, 90, 100])
    def check_a(x, backend):
        return True

    @backend_requirement({"a": check_a, "b": lambda x, backend: True}, common)
    def f(x, backend="a"):
        return backend

    assert f.is_backend_supported("a", cc=90)
    assert not f.is_backend_supported("a", cc=80)
    assert not f.is_backend_supported("b", cc=80)  # undecorated, but common is
    assert f.is_backend_supported("b", cc=90)
    assert not f.is_compute_capability_supported(80)
    fake_cc(80)
    with pytest.raises(RuntimeError, match=r"SM80\); supported: SM90$"):
        f(torch.ones(1), backend="b")


def test_backend_checks_need_backend_parameter():
    with pytest.raises(TypeError, match="no 'backend' parameter"):

        @backend_requirement({"a": _cudnn_check})
        def f(x):
            pass


def test_needs_some_check():
    with pytest.raises(TypeError, match="needs backend_checks or common_check"):

        @backend_requirement({})
        def f(x):
            pass


def test_checks_receive_defaults_and_keywords():
    seen = []

    def check(x, n=3, *, flag=False, backend="a"):
        seen.append((x, n, flag, backend))
        return True

    @backend_requirement({"a": check, "b": check})
    def f(x, n=3, *, flag=False, backend="a"):
        return (x, n, flag, backend)

    assert f(1) == (1, 3, False, "a")
    assert f(1, 5, flag=True, backend="b") == (1, 5, True, "b")
    assert seen == [(1, 3, False, "a"), (1, 5, True, "b")]


# ---------------------------------------------------------------------------
# Pattern 3: automatic backend selection
# ---------------------------------------------------------------------------

heuristic_calls = []


def _heuristic(suitable_backends, q, k, backend):
    heuristic_calls.append(list(suitable_backends))
    preferred = ["cutlass", "cudnn"] if q.shape[-1] <= 4 else ["cudnn", "cutlass"]
    return [b for b in preferred if b in suitable_backends]


@backend_requirement(
    backend_checks={"cutlass": _cutlass_check, "cudnn": _cudnn_check},
    common_check=_common_check,
    heuristic_func=_heuristic,
)
def auto_attention(q, k, backend="auto"):
    if backend == "auto":
        backend = auto_attention.suitable_auto_backends[0]
    return backend


@pytest.fixture(autouse=True)
def _clear_heuristic_calls():
    heuristic_calls.clear()


def test_auto_heuristic_order():
    q = torch.ones(2, 4)
    assert auto_attention(q, q) == "cutlass"
    assert auto_attention.suitable_auto_backends == ["cutlass", "cudnn"]
    q = torch.ones(2, 6)
    assert auto_attention(q, q) == "cudnn"
    assert auto_attention.suitable_auto_backends == ["cudnn", "cutlass"]
    assert heuristic_calls == [["cutlass", "cudnn"], ["cutlass", "cudnn"]]


def test_auto_drops_backends_whose_check_fails():
    q = torch.ones(2, 16)  # too large for cutlass
    assert auto_attention(q, q) == "cudnn"
    assert heuristic_calls == [["cudnn"]]
    assert auto_attention.suitable_auto_backends == ["cudnn"]


def test_auto_drops_backends_without_cc(fake_cc):
    q = torch.ones(2, 4)
    fake_cc(100)
    assert auto_attention(q, q) == "cudnn"
    assert heuristic_calls == [["cudnn"]]
    fake_cc(120)
    with pytest.raises(RuntimeError, match=r"SM120\); supported: SM75, SM80"):
        auto_attention(q, q)


def test_auto_common_check_errors_propagate():
    with pytest.raises(ValueError, match="shapes differ"):
        auto_attention(torch.ones(2, 4), torch.ones(3, 4))
    assert heuristic_calls == []


def test_auto_no_suitable_backend():
    def picky(suitable_backends, q, k, backend):
        return []

    @backend_requirement({"cutlass": _cutlass_check}, heuristic_func=picky)
    def f(q, k, backend="auto"):
        raise AssertionError("must not run")

    q = torch.ones(2, 16)
    with pytest.raises(ValueError, match="no suitable backend") as e:
        f(q, q)
    assert "head_dim must be <= 8" in str(e.value)


def test_auto_explicit_backend_still_checked():
    q = torch.ones(2, 16)
    with pytest.raises(ValueError, match="head_dim must be <= 8"):
        auto_attention(q, q, backend="cutlass")
    with pytest.raises(ValueError, match="valid backends: 'cutlass', 'cudnn', 'auto'"):
        auto_attention(q, q, backend="triton")
    assert heuristic_calls == []


def test_auto_skip_check_still_resolves():
    q = torch.ones(2, 16)  # would fail the cutlass check
    assert auto_attention(q, q, skip_check=True) == "cudnn"
    assert heuristic_calls == [["cutlass", "cudnn"]]
    assert calls == []  # no check ran


def test_auto_result_visible_through_oasr_api(monkeypatch):
    """@oasr_api (level > 0) copies attributes with functools.wraps; the
    function body reads suitable_auto_backends from the outer wrapper."""
    from oasr import api_logging

    monkeypatch.setenv("OASR_LOGLEVEL", "1")
    monkeypatch.setenv("OASR_LOGDEST", "stderr")
    api_logging._reload_config()
    try:

        @api_logging.oasr_api
        @backend_requirement(
            {"cutlass": _cutlass_check, "cudnn": _cudnn_check},
            heuristic_func=_heuristic,
        )
        def f(q, k, backend="auto"):
            return f.suitable_auto_backends[0] if backend == "auto" else backend

    finally:
        monkeypatch.delenv("OASR_LOGLEVEL")
        api_logging._reload_config()
    assert f.__wrapped__ is not None  # really wrapped by oasr_api
    assert f(torch.ones(2, 4), torch.ones(2, 4)) == "cutlass"
    assert f(torch.ones(2, 16), torch.ones(2, 16)) == "cudnn"
    assert f.is_backend_supported("cudnn", cc=100)


# ---------------------------------------------------------------------------
# Device helpers
# ---------------------------------------------------------------------------


def test_get_compute_capability_rejects_cpu():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        get_compute_capability("cpu")


def test_find_compute_capability_cpu_and_no_tensor():
    assert utils._find_compute_capability([1, torch.ones(1), "x"]) is None
    assert utils._find_compute_capability([1, "x"]) is None


@pytest.mark.parametrize(
    "cap,cuda,sm90a,sm100a",
    [
        ((9, 0), "12.3", True, False),
        ((9, 0), "12.2", False, False),
        ((9, 0), None, False, False),
        ((10, 0), "12.8", False, True),
        ((10, 0), "12.6", False, False),
        ((10, 0), "13.0", False, True),
        ((8, 0), "12.8", False, False),
    ],
)
def test_sm_arch_supported(monkeypatch, cap, cuda, sm90a, sm100a):
    seen = []

    def fake_capability(dev):
        seen.append(dev)
        return cap

    monkeypatch.setattr(torch.cuda, "get_device_capability", fake_capability)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    assert get_compute_capability(1) == cap
    assert seen == [torch.device("cuda", 1)]
    assert is_sm90a_supported("cuda") is sm90a
    assert is_sm100a_supported(torch.device("cuda:0")) is sm100a


def test_sm_arch_false_on_cpu():
    assert is_sm90a_supported("cpu") is False
    assert is_sm100a_supported("cpu") is False


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a build without CUDA")
def test_sm_arch_false_without_cuda():
    assert is_sm90a_supported("cuda") is False
    assert is_sm100a_supported("cuda") is False
