"""Correctness next to PyTorch: every backend against the op's float64 reference.

Outputs are poisoned (NaN) before each launch, inputs are fresh random data,
and each row says which tolerance was applied, so a table of these results reads
on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd
import torch

from .ops import Config, OpSpec, dtype_name, parse_dtype

COLUMNS = [
    "op", "backend", "config", "dtype", "numel", "max_abs_err", "max_rel_err", "rtol", "atol", "passed",
]  # fmt: skip


def compare(result: torch.Tensor, reference: torch.Tensor, rtol: float, atol: float) -> dict[str, float | bool]:
    """Errors of ``result`` against a float64 ``reference`` (NaN anywhere fails)."""
    result64 = result.detach().double()
    error = (result64 - reference).abs()
    if error.numel() == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "passed": True}
    relative = error / reference.abs().clamp_min(torch.finfo(torch.float64).tiny)
    finite = bool(torch.isfinite(result64).all())
    within = bool((error <= atol + rtol * reference.abs()).all())
    return {
        "max_abs_err": float(error.max()),
        "max_rel_err": float(relative.max()),
        "passed": finite and within,
    }


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
            reference = op.reference(inputs)
            rtol, atol = op.tolerance(dtype)
            for backend in backends:
                inputs["out"].fill_(float("nan"))
                result = op.backends[backend](inputs)
                rows.append(
                    {
                        "op": op.name,
                        "backend": backend,
                        "config": op.config_label(config, dtype).rsplit(",dtype=", 1)[0],
                        "dtype": dtype_name(dtype),
                        "numel": result.numel(),
                        "rtol": rtol,
                        "atol": atol,
                        **compare(result, reference, rtol, atol),
                    }
                )
            del inputs, reference
    return pd.DataFrame(rows, columns=COLUMNS)
