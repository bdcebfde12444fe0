"""Correctness next to PyTorch: every backend against the op's float64 reference.

Outputs are poisoned (NaN) before each launch, inputs are fresh random data,
and each row says which tolerance was applied, so a table of these results reads
on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd
import torch

from .ops import Config, Inputs, OpSpec, dtype_name, parse_dtype

COLUMNS = [
    "op", "backend", "config", "dtype", "numel", "max_abs_err", "max_rel_err", "rtol", "atol", "passed",
]  # fmt: skip


def compare(result: torch.Tensor, reference: torch.Tensor, rtol: float, atol: float) -> dict[str, float | bool]:
    """Errors of ``result`` against a float64 ``reference``: the one check every part of the harness uses.

    Passes when every element is within ``atol + rtol * |reference|``; a NaN or an
    infinity passes only where the reference holds the same value (so a poisoned,
    unwritten output fails). ``max_abs_err``/``max_rel_err`` are over the elements
    where both are finite.
    """
    actual = result.detach().double()
    expected = reference.detach().double().to(actual.device)
    if actual.numel() == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "passed": True}
    passed = bool(torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True).all())
    both_finite = torch.isfinite(actual) & torch.isfinite(expected)
    error = (actual - expected).abs()[both_finite]
    relative = error / expected.abs()[both_finite].clamp_min(torch.finfo(torch.float64).tiny)
    return {
        "max_abs_err": float(error.max()) if error.numel() else 0.0,
        "max_rel_err": float(relative.max()) if relative.numel() else 0.0,
        "passed": passed,
    }


def refcheck(op: OpSpec, inputs: Inputs, backends: Iterable[str], dtype: torch.dtype) -> dict[str, dict]:
    """Per backend, :func:`compare` against its float64 reference (``op.reference_for``), ``out`` poisoned
    (NaN) before each launch. Each backend's dict also holds ``numel``, the size of what it returned.
    """
    rtol, atol = op.tolerance(dtype)
    expected = {}  # each reference computed once (backends without their own share op.reference)
    checks = {}
    for backend in backends:
        reference = op.reference_for(backend)
        if reference not in expected:
            expected[reference] = reference(inputs)
        if "out" in inputs:
            inputs["out"].fill_(float("nan"))
        result = op.backends[backend](inputs)
        checks[backend] = {"numel": result.numel(), **compare(result, expected[reference], rtol, atol)}
    return checks


def check_op(
    op: OpSpec,
    configs: Iterable[Config],
    dtypes: Sequence[str | torch.dtype] = ("float32", "float16", "bfloat16"),
    backends: Sequence[str] = ("oasr", "torch"),
    device: str | torch.device = "cuda",
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (config, dtype, backend): max abs/rel error, tolerance, pass/fail."""
    rows = []
    for config in configs:
        for dtype in map(parse_dtype, dtypes):
            inputs = op.make_inputs(config, dtype, torch.device(device), seed)
            rtol, atol = op.tolerance(dtype)
            for backend, check in refcheck(op, inputs, backends, dtype).items():
                rows.append(
                    {
                        "op": op.name,
                        "backend": backend,
                        "config": op.config_label(config),
                        "dtype": dtype_name(dtype),
                        "rtol": rtol,
                        "atol": atol,
                        **check,
                    }
                )
            del inputs
    return pd.DataFrame(rows, columns=COLUMNS)
