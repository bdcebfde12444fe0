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
    "op", "backend", "config", "dtype", "numel", "max_abs_err", "max_rel_err", "err_over_tol", "rtol", "atol", "passed",
]  # fmt: skip
RECORDED_BEFORE_SCALED_REL_ERR = "err_over_tol"
"""A correctness table without this column was recorded when ``max_rel_err`` divided each error by its own
element's reference (so a near-zero reference gave 1e303): such a table's ``max_rel_err`` means nothing."""


def compare(result: torch.Tensor, reference: torch.Tensor, rtol: float, atol: float) -> dict[str, float | bool]:
    """Errors of ``result`` against a float64 ``reference``: the one check every part of the harness uses.

    Passes when every element is within ``atol + rtol * |reference|``; a NaN or an
    infinity passes only where the reference holds the same value (so a poisoned,
    unwritten output fails). Over the elements where both are finite:

    - ``max_abs_err``: the largest ``|result - reference|``;
    - ``max_rel_err``: ``max_abs_err`` over the reference's scale, its largest magnitude (bounded however
      close to zero single elements of the reference are; 0 when both are all zeros);
    - ``err_over_tol``: the largest ``|result - reference| / (atol + rtol * |reference|)``, the quantity the check
      tests: the finite elements pass when it is at most 1.
    """
    actual = result.detach().double()
    expected = reference.detach().double().to(actual.device)
    if actual.numel() == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "err_over_tol": 0.0, "passed": True}
    passed = bool(torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True).all())
    both_finite = torch.isfinite(actual) & torch.isfinite(expected)
    error = (actual - expected).abs()[both_finite]
    magnitude = expected.abs()[both_finite]
    if not error.numel():
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "err_over_tol": 0.0, "passed": passed}
    worst, scale = float(error.max()), float(magnitude.max())
    allowed = (atol + rtol * magnitude).clamp_min(torch.finfo(torch.float64).tiny)
    return {
        "max_abs_err": worst,
        "max_rel_err": worst / scale if scale > 0 else (0.0 if worst == 0 else float("inf")),
        "err_over_tol": float((error / allowed).max()),
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
