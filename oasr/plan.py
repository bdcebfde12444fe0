"""``oasr.gemm_plan``: which backend a gemm, gemm_glu or bmm call runs, and why (nothing is launched)."""

from __future__ import annotations

import math

from torch import Tensor

from ._backends import gpu_name, rule
from .bmm import _check_bmm
from .gemm import _check_gemm
from .jit import gemm_plan as plans
from .jit import gemm_tune


def gemm_plan(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None, op: str = "gemm"
) -> plans.GemmPlan:
    """Which backend ``oasr.<op>(input, weight, bias, activation)`` runs, with which configuration, and why.

    The rule's bands (``oasr/jit/plans.py``: each cites the measured figure behind it) or, with
    ``OASR_AUTOTUNE=1`` on a GPU, the tuner's recorded choice for the call's bucket (``oasr/jit/gemm_tune.py``; a
    bucket not yet timed says so, and the call's first run times it). Nothing is launched.

    Parameters
    ----------
    input, weight, bias, activation
        As the op takes them: gemm ``input [..., K]``, ``weight [N, K]``, ``bias [N]``, an activation;
        gemm_glu ``weight [2N, K]`` and ``bias [2N]``; bmm ``input [batch, M, K]`` and ``weight`` its ``mat2``
        ``[batch, K, N]``, no bias or activation. float16 or bfloat16, checked as the op checks them.
    op : {"gemm", "gemm_glu", "bmm"}

    Returns
    -------
    oasr.jit.plans.GemmPlan
        ``backend`` ("oasr" or "cublas"), ``config``, ``band``, ``why``; ``str(plan)`` is one sentence.

    Raises
    ------
    TypeError, ValueError
        As the op raises them for these arguments; ValueError for an unknown ``op``, or a bias or activation given
        to bmm.
    """
    if op not in plans.OPS:
        raise ValueError(f"oasr.gemm_plan: `op` must be one of {plans.OPS}, got {op!r}")
    if op == "bmm":
        if bias is not None or activation is not None:
            raise ValueError("oasr.gemm_plan: bmm takes no `bias` or `activation`")
        batch, m, n = _check_bmm(input, weight, None)
        problem = plans.Problem("bmm", m, n, input.shape[2], batch)
    else:
        if op == "gemm_glu" and activation is not None:
            raise ValueError("oasr.gemm_plan: gemm_glu takes no `activation` (its gate is the GLU)")
        shape = _check_gemm(op, input, weight, bias, activation, None, op == "gemm_glu")
        m, k = math.prod(shape[:-1]), input.shape[-1]
        problem = plans.Problem(op, m, shape[-1], k, 1, bias is not None, None if op == "gemm_glu" else activation)
    device = input.device
    plan = rule(problem, device)
    if device.type != "cuda" or not gemm_tune.enabled():
        return plan
    tuned = gemm_tune.cached(plan, str(input.dtype).removeprefix("torch."), gpu_name(device))
    if tuned is not None:
        return tuned
    return plan.with_backend(plan.backend, plan.band, f"{plan.why}\n(OASR_AUTOTUNE=1: not timed yet; a call times it)")
