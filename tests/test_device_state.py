"""The GPU's state around a measurement (profiling.harness.device_state): unavailable with its reason on this CPU
machine, read through NVML and the CUDA runtime where they answer (stand-ins here), recorded and shown."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from oasr.jit.families import FAMILIES
from profiling import compare
from profiling.harness import device_state
from profiling.workbench.notebook import Workbench

cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the readings of a machine without a GPU")


@cpu_only
def test_without_a_gpu_every_field_is_none_and_the_reason_is_said() -> None:
    with device_state.around() as state:
        pass
    for moment in ("before", "after"):
        reading = state[moment]
        assert all(reading[f] is None for f in (*device_state.NVML_FIELDS, *device_state.L2_FIELDS))
        assert reading["nvml"].startswith("unavailable: ") and reading["l2"].startswith("unavailable: no CUDA GPU")
    json.dumps(state)  # it goes into JSON provenance as it is
    line = device_state.describe(state)
    assert line.startswith("clocks unavailable: ") and "L2 state unavailable: no CUDA GPU" in line
    assert device_state.describe(None).startswith("not recorded")


def test_a_reading_for_another_process_says_why_its_l2_is_not_read() -> None:
    reading = device_state.reading(l2="not read: measured elsewhere")
    assert reading["l2"] == "unavailable: not read: measured elsewhere"


class _FakeNvml(types.ModuleType):
    """pynvml's calls the module makes, answering as a driver would (stand-in readings, not measurements)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self, sm_clocks: list[int]) -> None:
        super().__init__("pynvml")
        self.sm_clocks = sm_clocks

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> str:
        return bus_id

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return self.sm_clocks.pop(0) if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return 412_500

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return 51

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.0"


def _fake_runtime(limit: int, window: int) -> types.ModuleType:
    ok = types.SimpleNamespace(name="cudaSuccess")
    rt = types.ModuleType("cuda.bindings.runtime")
    rt.cudaError_t = types.SimpleNamespace(cudaSuccess=ok)
    rt.cudaLimit = types.SimpleNamespace(cudaLimitPersistingL2CacheSize="limit")
    rt.cudaDeviceAttr = types.SimpleNamespace(cudaDevAttrMaxPersistingL2CacheSize="max")
    rt.cudaStreamAttributeAccessPolicyWindow = "window"
    rt.cudaSetDevice = lambda device: (ok,)
    rt.cudaDeviceGetLimit = lambda what: (ok, limit)
    rt.cudaDeviceGetAttribute = lambda what, device: (ok, 80 * 2**20)
    value = types.SimpleNamespace(accessPolicyWindow=types.SimpleNamespace(num_bytes=window))
    rt.cudaStreamGetAttribute = lambda stream, what: (ok, value)
    return rt


@pytest.fixture
def answering(monkeypatch: pytest.MonkeyPatch):
    """NVML and the CUDA runtime stand-ins in sys.modules, torch's stream a stand-in; returns a setter for the
    persisting-L2 state they report."""
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml([1980, 1755]))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    bindings = types.ModuleType("cuda.bindings")
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)

    def persisting(limit: int, window: int) -> None:
        runtime = _fake_runtime(limit, window)
        bindings.runtime = runtime
        monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", runtime)

    return persisting


def test_readings_before_and_after_and_their_line(answering) -> None:
    answering(0, 0)
    with device_state.around(device=0) as state:
        pass
    assert state["before"]["sm_clock_mhz"] == 1980 and state["after"]["sm_clock_mhz"] == 1755
    assert state["before"]["power_w"] == 412.5 and state["after"]["persisting_l2_limit_bytes"] == 0
    line = device_state.describe(state)
    assert line.startswith("SM 1980 → 1755 MHz; memory 2619 → 2619 MHz; power 412 → 412 W; temperature 51 → 51 °C")
    assert "driver 580.0" in line and line.endswith("persisting L2 0 B, stream window 0 B")


def test_a_persisting_carve_out_is_said_to_skew_bandwidth(answering) -> None:
    answering(30 * 2**20, 16 * 2**20)
    with device_state.around(device=0) as state:
        pass
    assert state["after"]["access_policy_window_bytes"] == 16 * 2**20
    assert "(set: bandwidths may read the L2, not HBM)" in device_state.describe(state)


def test_an_nvml_call_that_fails_is_said_not_raised(answering, monkeypatch: pytest.MonkeyPatch) -> None:
    answering(0, 0)
    nvml = sys.modules["pynvml"]

    def no_power(handle: str) -> int:
        raise nvml.NVMLError("Not Supported")

    monkeypatch.setattr(nvml, "nvmlDeviceGetPowerUsage", no_power, raising=False)
    reading = device_state.reading(0)
    assert reading["nvml"] == "unavailable: NVML could not read device 0 (NVMLError: Not Supported)"
    assert reading["sm_clock_mhz"] is None and reading["l2"] == "ok"


@pytest.mark.gpu
def test_on_a_gpu_the_state_is_read() -> None:
    pytest.importorskip("pynvml")
    pytest.importorskip("cuda.bindings.runtime")
    with device_state.around() as state:
        torch.ones(1, device="cuda")
    assert state["before"]["nvml"] == "ok" and state["after"]["l2"] == "ok", state
    assert state["before"]["sm_clock_mhz"] > 0 and state["after"]["persisting_l2_limit_bytes"] == 0


@pytest.mark.gpu
def test_a_planted_persisting_window_is_read_and_said() -> None:
    """A persisting-L2 carve-out and an access-policy window on torch's stream, set here and reset after: the
    reading holds both, and its line says bandwidths may read the L2 (written without a GPU: first run on the H200
    pending)."""
    rt = pytest.importorskip("cuda.bindings.runtime")
    buffer = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    window = rt.cudaStreamAttrValue()
    policy = window.accessPolicyWindow
    policy.base_ptr, policy.num_bytes, policy.hitRatio = buffer.data_ptr(), buffer.numel(), 1.0
    policy.hitProp = rt.cudaAccessProperty.cudaAccessPropertyPersisting
    policy.missProp = rt.cudaAccessProperty.cudaAccessPropertyStreaming
    assert rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize, buffer.numel())[0] == 0
    try:
        assert rt.cudaStreamSetAttribute(stream, rt.cudaStreamAttributeAccessPolicyWindow, window)[0] == 0
        state = {"before": device_state.reading()}
    finally:
        policy.num_bytes = 0  # the window off, the carve-out back to none: later tests see a plain GPU
        rt.cudaStreamSetAttribute(stream, rt.cudaStreamAttributeAccessPolicyWindow, window)
        rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
    reading = state["before"]
    assert reading["l2"] == "ok" and reading["persisting_l2_limit_bytes"] >= buffer.numel(), reading
    assert reading["access_policy_window_bytes"] == buffer.numel()
    assert "(set: bandwidths may read the L2, not HBM)" in device_state.describe(state)
    assert device_state.reading()["persisting_l2_limit_bytes"] == 0


def test_a_timing_recording_keeps_the_state(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path))
    state = {"before": device_state.reading(), "after": device_state.reading()}
    tree = compare.State("worktree", tmp_path, "0123456789abcdef")
    path = compare.save_samples("h200", "scale", tree, {("n=2048", "float16"): {"worktree": [1e-6] * 5}}, state)
    assert json.loads(path.read_text())["device_state"] == state


@cpu_only
def test_the_environment_shows_the_recorded_timings_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed timing tables predate the recording of the GPU state: the environment says so."""
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    table = Workbench(FAMILIES[0]).environment()
    assert table.loc["GPU state, timing", "value"].startswith("not recorded")
