"""Norm family benchmark routine: LayerNorm, RMSNorm and the fused residual forms, oasr (``cuda``) against torch.

torch is ``F.layer_norm`` / ``F.rms_norm``, and for ``add_*`` a ``torch.add``
followed by the norm (torch has no fused op). ``--shape B T C`` (repeatable) is
the ``[B, T, C]`` input. The defaults are the registry's Conformer sweeps
(:mod:`profiling.ops.norm`, ending at (16, 1500, 1024)) and a case whose input
is 1 GiB in the run's dtype: ``[64, T, 1024]`` with T = 8192 in fp16/bf16 and
4096 in fp32 (the ``add_*`` forms read a residual of the same size).
"""

from __future__ import annotations

from benchmarks.routines.registry_routine import SHAPE_FLAG, RegistryRoutine, gib_input_case

ROUTINE = RegistryRoutine(
    "norm", ("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"), SHAPE_FLAG, large_case=gib_input_case()
)
SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone = ROUTINE.contract()
