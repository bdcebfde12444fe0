"""Shared fixtures. GPU tests use the `device` fixture (or the `gpu` mark) and are skipped,
and reported as skipped, on machines without CUDA.

Tolerances (rtol, atol) against float64 references, per storage dtype, are those
of ``profiling.harness.ops.base.DEFAULT_TOLERANCES`` (documented there): float32 1e-5/1e-6,
float16 1e-3/1e-3, bfloat16 1e-2/1e-2 for an op computed in fp32 and rounded once.
Families with longer fp32 reductions (norms) document wider ones in their tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import torch

from oasr import _backends
from oasr.jit.families import FAMILIES, Family
from profiling.compare import stand_in
from profiling.harness.ops.base import DEFAULT_TOLERANCES, dtype_name
from profiling.provenance import REPO_ROOT

CUDA = torch.cuda.is_available()

RECORDINGS = REPO_ROOT / "reports" / "h200" / "profiles"
"""Committed Nsight Compute recordings made on the H200 (``<op>/<name>.ncu-rep``, most packed: ``packing.stored``)."""
requires_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HALF_DTYPES = [torch.float16, torch.bfloat16]


def get_rtol_atol(dtype: torch.dtype) -> tuple[float, float]:
    return DEFAULT_TOLERANCES[dtype_name(dtype)]


SESSION_CACHES = ("OASR_JIT_DIR", "OASR_REPORT_CACHE")
"""The suite's JIT builds and decompressed recordings go to a folder of its own, not the user's ~/.cache/oasr.
An explicit setting is kept: the H200 scripts name a persistent cache (scripts/device_env.sh), prebuilt once."""
_session_folder: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _session_folder
    unset = [name for name in SESSION_CACHES if name not in os.environ]
    if unset:
        _session_folder = Path(tempfile.mkdtemp(prefix="oasr-tests-"))
        for name in unset:  # inherited by the subprocesses and notebook kernels the tests start
            os.environ[name] = str(_session_folder / name.removeprefix("OASR_").lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_folder is not None:
        shutil.rmtree(_session_folder, ignore_errors=True)


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


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, device: str = "cuda") -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def nonzero_randn(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str = "cuda",
    seed: int = 0,
    scale: float = 1.0,
    offset: float = 0.0,
) -> torch.Tensor:
    """offset + scale * N(0, 1) from a seeded generator, never zero (|z| < 0.01 becomes 0.5)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    z = torch.randn(shape, generator=generator, dtype=torch.float64)
    z = torch.where(z.abs() < 1e-2, torch.full_like(z, 0.5), z)
    return (offset + scale * z).to(dtype=dtype, device=device)


class RecordingLaunchers:
    """A family's module whose launchers record their calls and launch nothing."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        def launch(*args: object) -> None:
            self.calls.append(name)

        return launch


@contextlib.contextmanager
def standing_in(module: object, families: Iterable[Family] = FAMILIES) -> Iterator[None]:
    """Within the block every family of ``families`` runs ``module`` (``profiling.compare.stand_in``), every variant."""
    with contextlib.ExitStack() as stack:
        for family in families:
            stack.enter_context(stand_in(family, module))
        yield


def gemm_tolerance(dtype: torch.dtype, k: int) -> tuple[float, float]:
    """(rtol, atol) of a gemm/bmm of depth ``k`` against float64, for O(1) outputs (inputs ~ N(0, 1),
    weights ~ N(0, 1/k)).

    The output is rounded once to its storage dtype (2^-9 relative for bf16, 2^-12 for fp16; rtol
    1e-2 and 2e-3 leave room for the activations' fast exp/tanh), and the fp32 accumulation of k
    products (tensor cores round each partial sum to fp32) adds up to ~k * 2^-24 of the products'
    magnitudes: atol grows with k, atol = rtol / 4 + k * 2^-20 (8e-4 more at k = 1024).
    """
    rtol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    return rtol, rtol / 4 + k * 2.0**-20


def unpack_subsampling_weight2(packed: torch.Tensor, d: int) -> torch.Tensor:
    """torch's ``[D, D, 3, 3]`` back from :func:`oasr.conv2d.pack_subsampling_weight2`'s image (for stand-ins)."""
    n = packed.shape[2]
    return packed.reshape(n // 16, 3, 3, n // 8, 2, 8, 8).permute(3, 5, 0, 4, 6, 1, 2).reshape(n, n, 3, 3)[:d, :d]


def force_backend(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """Every gemm, gemm_glu and bmm call runs ``backend`` ("oasr": the rule's configuration; "cublas": torch)."""

    def forced(problem, dtype, device, run):
        return _backends.rule(problem, device).with_backend(backend, "forced", "a test forces it")

    for name in ("oasr.gemm", "oasr.bmm"):
        monkeypatch.setattr(sys.modules[name], "planned", forced)
