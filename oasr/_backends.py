"""The backend of a gemm, gemm_glu or bmm call: the rule's (``oasr/jit/gemm_plan.py``) or the tuner's
(``oasr/jit/gemm_tune.py``, ``OASR_AUTOTUNE=1``), shared by the ops and :func:`oasr.gemm_plan`."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .jit import gemm_config, gemm_plan, gemm_tune


def rule(problem: gemm_plan.Problem, device: torch.device) -> gemm_plan.GemmPlan:
    """The rule's plan on ``device`` (its SM count; the H200's for a CPU tensor)."""
    return gemm_plan.rule(problem, gemm_config.sm_count(device) if device.type == "cuda" else gemm_config.H200_SMS)


def gpu_name(device: torch.device) -> str:
    """The name of a CUDA ``device`` ("NVIDIA H200"), asked once per device."""
    return _device_name(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _device_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


def planned(
    problem: gemm_plan.Problem,
    dtype: torch.dtype,
    device: torch.device,
    run: Callable[[str, gemm_config.GemmConfig], None],
) -> gemm_plan.GemmPlan:
    """The plan of a call (gemm, gemm_glu, bmm): the rule's, or with ``OASR_AUTOTUNE=1`` on a GPU the tuner's, which
    times ``run(backend, config)`` for each candidate the first time a bucket is met (not while a graph is captured:
    then the rule's)."""
    plan = rule(problem, device)
    if device.type != "cuda" or not gemm_tune.enabled() or torch.cuda.is_current_stream_capturing():
        return plan
    gpu = gpu_name(device)
    runs = {name: functools.partial(run, *candidate) for name, candidate in gemm_plan.candidates(plan).items()}
    return gemm_tune.tuned(plan, str(dtype).removeprefix("torch."), gpu, runs)
