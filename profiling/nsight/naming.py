"""NVTX naming: one push/pop range per profiled launch, in domain ``oasr``.

Range names read ``<op>:<backend>:<field>=<value>,...,dtype=<dtype>``, e.g.
``scale:oasr:n=65536,dtype=float16``. They avoid ``/``, ``@`` and ``]``, which
ncu's ``--nvtx-include`` syntax reserves, so one launch is selected with
``--nvtx-include "oasr@scale:oasr:n=65536,dtype=float16/"``. A profiling worker
wraps a whole sweep in the range ``sweep`` and warms up outside every range, so
``--nvtx-include "oasr@sweep/"`` selects exactly the measured launches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

DOMAIN = "oasr"
SWEEP_RANGE = "sweep"


@dataclass(frozen=True)
class RangeName:
    op: str
    backend: str
    config: dict[str, int]
    dtype: str

    def __str__(self) -> str:
        fields = ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.op}:{self.backend}:{fields},dtype={self.dtype}"

    def nvtx_filter(self) -> str:
        """The ``--nvtx-include`` expression selecting this range's launches."""
        return f"{DOMAIN}@{self}/"


def parse_range_name(name: str) -> RangeName:
    """Inverse of ``str(RangeName(...))``; ValueError for names of another scheme."""
    parts = name.split(":")
    if len(parts) != 3:
        raise ValueError(f"NVTX range {name!r} is not of the form op:backend:fields")
    op, backend, body = parts
    fields = dict(item.split("=", 1) for item in body.split(",") if "=" in item)
    if "dtype" not in fields:
        raise ValueError(f"NVTX range {name!r} has no dtype field")
    dtype = fields.pop("dtype")
    return RangeName(op, backend, {k: int(v) for k, v in fields.items()}, dtype)


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """A push/pop range in domain ``oasr`` (a no-op where the ``nvtx`` package is missing)."""
    try:
        import nvtx
    except ImportError:
        yield
        return
    with nvtx.annotate(name, domain=DOMAIN):
        yield


def profile_launches(name: RangeName, fn: Callable[[], object], *, warmup: int = 3, launches: int = 1) -> None:
    """Run ``fn`` for Nsight Compute: warm-up outside any range, then ``launches`` calls in range ``name``.

    Select the launches with ``ncu --nvtx --nvtx-include "<name.nvtx_filter()>"``.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with nvtx_range(str(name)):
        for _ in range(launches):
            fn()
        torch.cuda.synchronize()
