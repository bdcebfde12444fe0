"""The GPU's state around a measurement: clocks, power, temperature, driver and the L2 persisting state.

A figure is only as good as the state the GPU was in: clocks that sagged under a long run, a
power cap, a hot part, or a persisting-L2 carve-out left set by earlier code (llm.c #851: a
persisting window made a LayerNorm read 4x the HBM bandwidth). :func:`around` reads the state
before and after a timing or a profile, and the result goes into that measurement's provenance.

One reading (:func:`reading`) holds:

- from NVML (``pynvml``, PyPI ``nvidia-ml-py``, in the H200 image; the library torch's own
  ``torch.cuda.clock_rate``/``power_draw``/``temperature`` use): ``sm_clock_mhz``,
  ``memory_clock_mhz``, ``sm_clock_max_mhz``, ``power_w``, ``temperature_c``, ``driver``;
- from the CUDA runtime (cuda-python's ``cuda.bindings.runtime``): ``persisting_l2_limit_bytes``
  (``cudaDeviceGetLimit(cudaLimitPersistingL2CacheSize)``), ``persisting_l2_max_bytes`` (the
  device's largest carve-out) and ``access_policy_window_bytes`` (torch's current stream's
  access-policy window, ``cudaStreamGetAttribute``);
- ``nvml`` and ``l2``: ``"ok"``, or ``"unavailable: <why>"`` with those fields None.

Without a GPU, NVML or cuda-python, the fields are None and the reason is said: reading the
state never stops a measurement.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

import torch

NVML_FIELDS = ("sm_clock_mhz", "memory_clock_mhz", "sm_clock_max_mhz", "power_w", "temperature_c", "driver")
L2_FIELDS = ("persisting_l2_limit_bytes", "persisting_l2_max_bytes", "access_policy_window_bytes")
OK = "ok"


def reading(device: int | None = None, *, l2: bool | str = True) -> dict[str, Any]:
    """One reading of the state of CUDA device ``device`` (torch's current one by default); see the module
    docstring for the fields.

    Parameters
    ----------
    device : int, optional
        The CUDA device index.
    l2 : bool or str
        Read this process's L2 persisting state; a string instead says why it is not read here (it is said as
        ``"unavailable: <l2>"``), e.g. when the measured kernels run in another process.
    """
    if device is None and torch.cuda.is_available():
        device = torch.cuda.current_device()
    return {
        "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        **_nvml(device),
        **(_l2(device) if l2 is True else _unavailable(L2_FIELDS, "l2", str(l2 or "not read"))),
    }


@contextlib.contextmanager
def around(device: int | None = None, *, l2: bool | str = True) -> Iterator[dict[str, Any]]:
    """``{"before": reading, "after": reading}`` of the block's GPU (``"after"`` filled as the block ends, also
    when it raises); ``l2`` as for :func:`reading`."""
    state = {"before": reading(device, l2=l2)}
    try:
        yield state
    finally:
        state["after"] = reading(device, l2=l2)


def _unavailable(fields: tuple[str, ...], key: str, why: str) -> dict[str, Any]:
    return {**dict.fromkeys(fields), key: f"unavailable: {why}"}


def _nvml(device: int | None) -> dict[str, Any]:
    try:
        import pynvml
    except ImportError:
        return _unavailable(NVML_FIELDS, "nvml", "pynvml is not installed (pip install nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no driver here (a CPU machine): NVML's own words say so
        return _unavailable(NVML_FIELDS, "nvml", f"NVML did not start ({exc})")
    try:
        handle = _nvml_handle(pynvml, device)
        return {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,  # NVML counts milliwatts
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "driver": str(pynvml.nvmlSystemGetDriverVersion()),
            "nvml": OK,
        }
    except Exception as exc:  # NVML's errors, or a torch without the PCI fields: said, never raised on a measurement
        return _unavailable(NVML_FIELDS, "nvml", f"NVML could not read device {device} ({type(exc).__name__}: {exc})")
    finally:
        pynvml.nvmlShutdown()


def _nvml_handle(pynvml: Any, device: int | None) -> Any:
    """NVML's handle of CUDA device ``device``, found by PCI bus id: NVML numbers every GPU of the host, CUDA only
    the visible ones (``CUDA_VISIBLE_DEVICES``), so the two indices differ."""
    if device is None or not torch.cuda.is_available():
        return pynvml.nvmlDeviceGetHandleByIndex(device or 0)
    props = torch.cuda.get_device_properties(device)
    bus_id = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)


def _l2(device: int | None) -> dict[str, Any]:
    if device is None:
        return _unavailable(L2_FIELDS, "l2", "no CUDA GPU (torch.cuda.is_available() is False)")
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return _unavailable(L2_FIELDS, "l2", "cuda-python is not installed (pip install cuda-bindings)")
    try:
        success = rt.cudaError_t.cudaSuccess
        (err,) = rt.cudaSetDevice(device)  # the runtime's current device is its own: make it torch's
        if err == success:
            err, limit = rt.cudaDeviceGetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize)
        if err != success:
            return _unavailable(L2_FIELDS, "l2", f"the CUDA runtime failed: {err.name}")
        err, maximum = rt.cudaDeviceGetAttribute(rt.cudaDeviceAttr.cudaDevAttrMaxPersistingL2CacheSize, device)
        stream = torch.cuda.current_stream(device).cuda_stream
        err_window, value = rt.cudaStreamGetAttribute(stream, rt.cudaStreamAttributeAccessPolicyWindow)
    except Exception as exc:  # the bindings' names differ between versions: the state is said missing, not raised
        return _unavailable(L2_FIELDS, "l2", f"{type(exc).__name__}: {exc}")
    return {
        "persisting_l2_limit_bytes": int(limit),
        "persisting_l2_max_bytes": int(maximum) if err == success else None,
        "access_policy_window_bytes": int(value.accessPolicyWindow.num_bytes) if err_window == success else None,
        "l2": OK,
    }


def _whole(value: Any) -> str:
    """A reading to the unit; a recording's value that is not a number is shown as it is, not raised on."""
    return f"{value:.0f}" if isinstance(value, (int, float)) else str(value)


def describe(state: Mapping[str, Any] | None) -> str:
    """One line for people: before -> after of each reading, the driver, the L2 persisting state (or why not)."""
    if not state or "before" not in state:
        return "not recorded (a measurement made before the GPU state was recorded)"
    before, after = state["before"], state.get("after", state["before"])
    parts = []
    if before.get("nvml") == OK and after.get("nvml") == OK:
        for key, label, unit in (
            ("sm_clock_mhz", "SM", "MHz"),
            ("memory_clock_mhz", "memory", "MHz"),
            ("power_w", "power", "W"),
            ("temperature_c", "temperature", "°C"),
        ):
            parts.append(f"{label} {_whole(before[key])} → {_whole(after[key])} {unit}")
        parts.append(f"SM max {_whole(before['sm_clock_max_mhz'])} MHz, driver {before['driver']}")
    else:
        parts.append(f"clocks {before.get('nvml') if before.get('nvml') != OK else after.get('nvml')}")
    l2 = [r for r in (before, after) if r.get("l2") == OK]
    if len(l2) == 2:
        carve = max(r["persisting_l2_limit_bytes"] for r in l2)
        window = max(r["access_policy_window_bytes"] or 0 for r in l2)
        text = f"persisting L2 {carve} B, stream window {window} B"
        parts.append(text + (" (set: bandwidths may read the L2, not HBM)" if carve or window else ""))
    else:
        parts.append(f"L2 state {next(r.get('l2') for r in (before, after) if r.get('l2') != OK)}")
    return "; ".join(parts)
