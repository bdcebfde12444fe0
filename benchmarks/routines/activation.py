"""Activation family benchmark routine: ``glu`` and ``swish``, oasr's kernels (``cuda``) against torch eager.

torch is ``F.glu(x, -1)`` and ``F.silu``. ``--shape B T C`` (repeatable) is the
``[B, T, C]`` output; GLU's input is ``[B, T, 2C]``. The defaults are the
registry's Conformer sweep (:data:`profiling.ops.activation.ACTIVATION_SWEEP`,
ending at (16, 1500, 1024)) and a case whose input is 1 GiB in the run's dtype:
``[64, T, 1024]`` with T = 8192 in fp16/bf16 and 4096 in fp32 (GLU: C = 512).
"""

from __future__ import annotations

from benchmarks.routines.registry_routine import SHAPE_FLAG, RegistryRoutine, gib_input_case

ROUTINE = RegistryRoutine(
    "activation", ("glu", "swish"), SHAPE_FLAG, large_case=gib_input_case(input_channels={"glu": 2})
)
SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone = ROUTINE.contract()
