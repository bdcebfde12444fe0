"""Shared fixtures. GPU tests use the `device` fixture (or the `gpu` mark) and are skipped,
and reported as skipped, on machines without CUDA.

Tolerances (rtol, atol) against float64 references, per storage dtype:
float32 1e-5 / 1e-6 (fp32 math, one rounding), float16 1e-3 / 1e-3 and
bfloat16 1e-2 / 1e-2 (one rounding of the fp32 result to the storage type:
half an ulp is 2^-11 and 2^-8 relative).
"""

from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HALF_DTYPES = [torch.float16, torch.bfloat16]

_TOLERANCES = {
    torch.float32: (1e-5, 1e-6),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}


def get_rtol_atol(dtype: torch.dtype) -> tuple[float, float]:
    return _TOLERANCES[dtype]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") and not CUDA:
            item.add_marker(requires_cuda)


@pytest.fixture
def device() -> torch.device:
    if not CUDA:
        pytest.skip("needs a CUDA GPU (none on this machine)")
    return torch.device("cuda")


@pytest.fixture(params=HALF_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def dtype(request: pytest.FixtureRequest) -> torch.dtype:
    return request.param


@pytest.fixture(params=FLOAT_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def dtype_all(request: pytest.FixtureRequest) -> torch.dtype:
    return request.param


@pytest.fixture(params=[(2, 128, 256), (4, 250, 512), (1, 7, 33)], ids=lambda s: "x".join(map(str, s)))
def batch_seq_hidden(request: pytest.FixtureRequest) -> tuple[int, int, int]:
    return request.param


def poisoned_like(reference: torch.Tensor) -> torch.Tensor:
    """A destination filled with NaN, so a kernel that skips an element is caught."""
    return torch.full_like(reference, float("nan"))
