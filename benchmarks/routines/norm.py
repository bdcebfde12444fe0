"""Norm family benchmark routine: LayerNorm, RMSNorm and the fused residual forms, oasr (``cuda``) against torch.

torch is ``F.layer_norm`` / ``F.rms_norm``, and for ``add_*`` a ``torch.add``
followed by the norm (torch has no fused op). ``--shape B T C`` (repeatable) is
the ``[B, T, C]`` input. The defaults are the registry's Conformer sweeps
(:mod:`profiling.ops.norm`, ending at (16, 1500, 1024)) and a case whose input
is 1 GiB in the run's dtype: ``[64, T, 1024]`` with T = 8192 in fp16/bf16 and
4096 in fp32 (the ``add_*`` forms read a residual of the same size).
"""

from __future__ import annotations

import torch

from benchmarks.routines.registry_routine import BACKENDS, SHAPE_FLAG, RegistryRoutine, gib_input_case, refcheck
from profiling.ops import get_op

ROUTINE = RegistryRoutine(
    "norm", ("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"), SHAPE_FLAG, large_case=gib_input_case()
)
SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone = ROUTINE.contract()


def large_reference_check() -> None:
    """The float64 reference check of the 1 GiB fp16 ``add_rms_norm`` case, as ``--refcheck`` runs it.

    It leaves the GPU in the state that slowed the small scale launches timed right
    after it (``benchmarks/scale_after_large_op.py``).
    """
    op, dtype = get_op("add_rms_norm"), torch.float16
    inputs = op.make_inputs(ROUTINE.large_case(op, dtype), dtype, torch.device("cuda"), 0)
    refcheck(op, inputs, list(BACKENDS), dtype)
    torch.cuda.synchronize()
